"""training/sharded_checkpoint.py's check: a shard directory cut short or with a garbage `.metadata` is set aside
with the checkpoint naming it, in one line, and the job starts over; a whole one resumes; a completed job's
clean-up leaves what was set aside."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

from distill_sweep.training import sharded_checkpoint
from distill_sweep.training.checkpoint import save_checkpoint
from distill_sweep.training.checkpoint_files import CHECKPOINT, remove_checkpoint


def _sharded(tmp_path: Path) -> tuple[Path, dict, Path]:
    """A checkpoint.pt naming a shard directory that DCP wrote (one process: one shard file)."""
    path, name = tmp_path / CHECKPOINT, f"checkpoint.{sharded_checkpoint.SHARDS}-abc"
    dcp.save({"model": {"w": torch.arange(4096, dtype=torch.float32)}}, checkpoint_id=str(tmp_path / name))
    resume = {"config_hash": "h", "position": {}, sharded_checkpoint.SHARDS: name}
    save_checkpoint(path, resume)
    return path, resume, tmp_path / name


def _damaged(path: Path, resume: dict, caplog: pytest.LogCaptureFixture) -> str:
    with caplog.at_level(logging.WARNING, logger="distill_sweep"):
        assert sharded_checkpoint.check(resume, path) is None  # the job starts over
    lines = [r.getMessage() for r in caplog.records if r.name == "distill_sweep"]
    assert len(lines) == 1, lines
    line = lines[0]
    assert not path.exists() and not (path.parent / resume["shards"]).exists()
    assert len(list(path.parent.glob(f"{CHECKPOINT}.corrupt-*"))) == 1  # both set aside, kept to look at
    assert len(list(path.parent.glob(f"{resume['shards']}.corrupt-*"))) == 1
    return line


def test_a_whole_shard_directory_resumes(tmp_path: Path) -> None:
    path, resume, _ = _sharded(tmp_path)
    assert sharded_checkpoint.check(resume, path) is resume


def test_a_shard_file_cut_in_half_is_set_aside_in_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    path, resume, shards = _sharded(tmp_path)
    (distcp,) = shards.glob("*.distcp")
    distcp.write_bytes(distcp.read_bytes()[: distcp.stat().st_size // 2])
    half = distcp.stat().st_size
    line = _damaged(path, resume, caplog)
    assert f"{distcp.name} holds {half} of its" in line
    assert "damaged sharded checkpoint" in line and f"{distcp.name} holds" in line and "starting from" in line
    # a completed job's clean-up removes its checkpoint and shard directories, not what was set aside
    remove_checkpoint(path)
    assert len(list(tmp_path.glob("*.corrupt-*"))) == 2


def test_a_garbage_metadata_is_set_aside_in_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path, resume, shards = _sharded(tmp_path)
    (shards / ".metadata").write_bytes(b"\x00garbage" * 7)
    assert ".metadata unreadable" in _damaged(path, resume, caplog)


def test_bytes_flipped_mid_file_at_its_length_are_set_aside_in_one_line(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """The save's checksums in checkpoint.pt: a .distcp whose middle bytes changed, its length the same (a length
    check passes it), is set aside with the checkpoint, and the job starts over."""
    path, resume, shards = _sharded(tmp_path)
    resume = {**resume, sharded_checkpoint.SUMS: sharded_checkpoint.checksums(shards)}
    assert sorted(resume[sharded_checkpoint.SUMS]) == [".metadata", "__0_0.distcp"]
    save_checkpoint(path, resume)
    assert sharded_checkpoint.check(resume, path) is resume  # unchanged: it resumes
    (distcp,) = shards.glob("*.distcp")
    data = bytearray(distcp.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4] = bytes(b ^ 0xFF for b in data[middle:middle + 4])
    distcp.write_bytes(bytes(data))
    assert sharded_checkpoint.damage(shards) is None  # (its length is whole: only the checksum can tell)
    line = _damaged(path, resume, caplog)
    assert f"{distcp.name} is not the file that was saved (its sha256 differs" in line and "starting from" in line
