"""Where a job's checkpoint lives and how its files are removed (no torch: the job's and the teacher cache's
bookkeeping read these before torch is imported; checkpoint.py writes and reads the files)."""

from __future__ import annotations

import shutil
from pathlib import Path

CHECKPOINT = "checkpoint.pt"


def previous_path(path: Path) -> Path:
    """Where `save_checkpoint(..., keep_previous=True)` keeps the checkpoint it replaced."""
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def shard_dirs(path: Path) -> list[Path]:
    """The shard directories of a sharded job's checkpoint (sharded_checkpoint.py), complete or cut short (not
    those set aside as damaged, `.corrupt-<time>`: kept for whoever wants to look at them)."""
    return sorted(p for p in path.parent.glob(f"{path.stem}.shards-*") if p.is_dir() and ".corrupt-" not in p.name)


def remove_checkpoint(path: Path) -> None:
    """Delete the checkpoint and the previous one kept beside it, if any, its shard directories (a sharded job's),
    and the temp files of writes that a kill (-9) cut short: nothing else cleans those up. Call it when no write
    of this checkpoint is under way."""
    path.unlink(missing_ok=True)
    previous_path(path).unlink(missing_ok=True)
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        tmp.unlink(missing_ok=True)
    for shards in shard_dirs(path):
        shutil.rmtree(shards, ignore_errors=True)
