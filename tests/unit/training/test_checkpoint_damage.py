"""training/checkpoint.py's load_checkpoint on a one-process checkpoint whose bytes changed in place: torch.load
reads it without a word (a weight silently changed); its zip CRC-32s tell, and it is set aside like an unreadable
one (the sharded checkpoint's own checks: test_sharded_checkpoint.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from distill_sweep.training.checkpoint import changed_member, load_checkpoint, save_checkpoint
from distill_sweep.training.checkpoint_files import CHECKPOINT, previous_path


def _flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8] = bytes(b ^ 0xFF for b in data[middle:middle + 8])
    path.write_bytes(bytes(data))


def test_bytes_changed_in_place_are_set_aside_and_the_previous_checkpoint_used(tmp_path: Path,
                                                                             caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / CHECKPOINT
    weights = torch.arange(20000, dtype=torch.float32)
    save_checkpoint(path, {"config_hash": "h", "model": {"w": weights}, "step": 1})
    save_checkpoint(path, {"config_hash": "h", "model": {"w": weights + 1}, "step": 2}, keep_previous=True)
    assert previous_path(path).exists() and changed_member(path) is None
    size = path.stat().st_size
    _flipped(path)
    assert path.stat().st_size == size
    assert torch.load(path, weights_only=True)["step"] == 2  # (what torch.load alone makes of it: no error)
    assert changed_member(path) is not None
    with caplog.at_level(logging.WARNING):
        state = load_checkpoint(path, "h")
    assert state is not None and state["step"] == 1 and torch.equal(state["model"]["w"], weights)  # the previous one
    said = [r.getMessage() for r in caplog.records]
    assert any("unreadable checkpoint" in s and "fails its CRC-32 check: bytes changed in place" in s for s in said)
    assert len(list(tmp_path.glob(f"{CHECKPOINT}.corrupt-*"))) == 1


def test_a_checkpoint_saved_without_crcs_is_read(tmp_path: Path) -> None:
    """torch.save told not to compute CRC-32s (its config's save.compute_crc32) stores 0 for them: such a checkpoint
    is read, not set aside as damaged on every resume."""
    from torch.utils.serialization import config

    path = tmp_path / CHECKPOINT
    before = config.save.compute_crc32
    config.save.compute_crc32 = False
    try:
        save_checkpoint(path, {"config_hash": "h", "step": 3, "model": {"w": torch.ones(100)}})
    finally:
        config.save.compute_crc32 = before
    assert changed_member(path) is None
    state = load_checkpoint(path, "h")
    assert state is not None and state["step"] == 3
