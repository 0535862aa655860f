"""The modes of what the tool writes: the umask's, as `open` and `mkdir` give them (issue 49: every file written
through records.disk.atomic_file was 0600 whatever the umask, mkstemp's mode, so a lab sharing a results dir or a
cache, as the SLURM guide sets up, got `Permission denied` on each other's records and teachers)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from distill_sweep.records import disk
from distill_sweep.records.files import write_json_atomic
from distill_sweep.records.locks import JobLock
from distill_sweep.records.predictions import write_checked_npz


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700),
                                                       (0o002, 0o664, 0o775)])
def test_written_files_and_directories_have_the_umasks_mode(mask: int, file_mode: int, dir_mode: int,
                                                            tmp_path: Path, umask: None):
    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    os.umask(mask)
    record = tmp_path / "job" / "result.json"
    write_json_atomic(record, {"status": "completed"})  # a record, chosen.json, a cached teacher's meta ...
    write_json_atomic(record, {"status": "completed", "again": True})  # replaced: the new file's mode
    npz = write_checked_npz(tmp_path / "job" / "predictions.npz", {"a": np.arange(3)}, {"version": 1})
    lock = JobLock(tmp_path / "job")
    assert lock.acquire(wait=False)
    lock.release()
    made = disk.new_dir(tmp_path, ".store-")  # a store built in it, then renamed into place
    build_toy_tokenizer(tmp_path / "tok")  # the cache's tokenizer, built in a directory of its own and renamed
    (tokenizer,) = (tmp_path / "tok").iterdir()
    assert {p.name: mode(p) for p in (record, npz, tmp_path / "job" / ".lock")} == \
        {"result.json": file_mode, "predictions.npz": file_mode, ".lock": file_mode}
    assert mode(made) == dir_mode and mode(tokenizer) == dir_mode
    assert {mode(p) for p in tokenizer.iterdir()} == {file_mode}
    assert sorted(p.name for p in record.parent.iterdir()) == [".lock", "predictions.npz", "result.json"]
