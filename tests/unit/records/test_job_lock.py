"""records/locks.py's JobLock on a `.lock` that is no file: a job sets it aside in one line and takes its lock (it
failed with a traceback on every run); a read-only caller (status) leaves it where it is."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from distill_sweep.records.locks import LOCK, JobLock, held_elsewhere


def test_a_lock_that_is_a_directory_is_set_aside_and_the_lock_taken(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    job = tmp_path / "job"
    (job / LOCK / "inside").mkdir(parents=True)
    with pytest.raises(IsADirectoryError):
        held_elsewhere(job)  # read only: nothing moved
    assert (job / LOCK).is_dir()
    lock = JobLock(job)
    with caplog.at_level(logging.WARNING, logger="distill_sweep"):
        assert lock.acquire(wait=False)
    try:
        (line,) = [r.getMessage() for r in caplog.records if r.name == "distill_sweep"]
        (aside,) = job.glob(f"{LOCK}.corrupt-*")
        assert line == f"{job / LOCK} is not a lock file (a directory): set it aside as {aside.name} and took the job's lock"
        assert (aside / "inside").is_dir() and (job / LOCK).is_file()
    finally:
        lock.release()
