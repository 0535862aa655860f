"""FSDP2's parts that need no second rank: a rank's slice of a partial batch, bf16's precision policy, a sharded
checkpoint that names missing shards (the 2-rank jobs: tests/integration/training/test_fsdp.py)."""

from __future__ import annotations

from pathlib import Path

import torch

from distill_sweep.training.checkpoint_files import CHECKPOINT


def test_a_rank_slice_splits_a_partial_batch_and_weighs_rows() -> None:
    from types import SimpleNamespace

    from distill_sweep.training.fsdp import ROWS, rank_slice

    def slices(n: int, size: int) -> list[tuple[list[int], int]]:
        batch = {"input_ids": torch.arange(n).unsqueeze(1), "labels": torch.arange(n)}
        cut = [rank_slice(batch, SimpleNamespace(rank=r, size=size)) for r in range(size)]
        return [(c["labels"].tolist(), int(c[ROWS])) for c in cut]

    # 7 rows over 3 ranks: 3 + 2 + 2, in order, none twice, each counted
    assert slices(7, 3) == [([0, 1, 2], 3), ([3, 4], 2), ([5, 6], 2)]
    # 1 row over 2 ranks: rank 1 runs the same forward on a stand-in (row 0) that counts for nothing
    assert slices(1, 2) == [([0], 1), ([0], 0)]


def test_bf16_all_gathers_and_computes_in_bf16_and_reduces_in_float32() -> None:
    from distill_sweep.training.fsdp import precision_policy

    bf16, fp32 = precision_policy("bf16"), precision_policy("fp32")
    assert (bf16.param_dtype, bf16.reduce_dtype) == (torch.bfloat16, torch.float32)
    assert (fp32.param_dtype, fp32.reduce_dtype) == (None, None)  # no cast


def test_a_checkpoint_naming_missing_shards_starts_over_and_removal_takes_every_shard_directory(tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    from distill_sweep.training import sharded_checkpoint
    from distill_sweep.training.checkpoint import load_checkpoint, save_checkpoint
    from distill_sweep.training.checkpoint_files import remove_checkpoint

    path = tmp_path / CHECKPOINT
    save_checkpoint(path, {"config_hash": "k", "position": {}, "shards": "checkpoint.shards-new"})
    state = load_checkpoint(path, "k")
    assert state is not None and sharded_checkpoint.check(state, path) is None  # its shards are not there: start over
    (tmp_path / "checkpoint.shards-new").mkdir()
    assert sharded_checkpoint.check(state, path) is None  # nor whole (DCP writes .metadata last)
    (tmp_path / "checkpoint.shards-new").rmdir()
    dcp.save({"model": {"w": torch.ones(3)}}, checkpoint_id=str(tmp_path / "checkpoint.shards-new"))
    assert sharded_checkpoint.check(state, path) is state  # (a damaged one: test_sharded_checkpoint.py)
    (tmp_path / "checkpoint.shards-cut").mkdir()  # a save a kill cut short: no checkpoint.pt names it
    (tmp_path / "checkpoint.shards-cut" / "__0_0.distcp").write_bytes(b"x")
    remove_checkpoint(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
