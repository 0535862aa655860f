"""Checkpoints of sharded (FSDP) jobs: the modules' and the optimizer's shards written by every rank with
torch.distributed.checkpoint (DCP), the rest (position, history, scheduler, RNG, partial epoch sums) in
`checkpoint.pt` as for one process.

A save: every rank writes its shards into a new directory beside the checkpoint (`checkpoint.shards-<id>/`, DCP's
files are fsynced), then rank 0 writes `checkpoint.pt` naming that directory (checkpoint.py's atomic rename: the
commit point) and removes the directories no checkpoint names. A kill at any moment leaves `checkpoint.pt` naming a
complete directory (the new one only once it is whole), so a re-run resumes from the last completed save. The
shards are keyed by parameter name, not by rank: DCP re-shards them on load, so a checkpoint written by N ranks
resumes under any number of processes, one included (a process loads the tensors whole). A checkpoint written by
one process (plain tensors) resumes in one process.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.tensor import DTensor

from distill_sweep.errors import ConfigError
from distill_sweep.training import distributed
from distill_sweep.training.checkpoint import save_checkpoint
from distill_sweep.training.checkpoint_files import shard_dirs

log = logging.getLogger("distill_sweep")

SHARDS = "shards"  # the key of checkpoint.pt naming its shard directory


def _box(state: dict[str, nn.Module]) -> nn.Module:
    """The checkpointed modules as one module (parameter names `student.…`, `objective.…`), which DCP's state-dict
    helpers take."""
    return nn.ModuleDict(state)


def check(resume: dict[str, Any] | None, path: Path) -> dict[str, Any] | None:
    """`resume` (checkpoint.pt's content), or None where the shard directory it names is gone (the job starts
    over, as for an unreadable checkpoint)."""
    if resume is None or not resume.get(SHARDS):
        return resume
    if not (path.parent / resume[SHARDS] / ".metadata").exists():
        log.warning("ignoring %s: its shard directory %s is missing or incomplete; starting from the beginning",
                    path, resume[SHARDS])
        return None
    return resume


def load_modules(resume: dict[str, Any], state: dict[str, nn.Module], path: Path) -> None:
    """The checkpointed modules' weights into `state`'s modules (every rank; sharded or whole)."""
    if not resume.get(SHARDS):
        if any(is_sharded(m) for m in state.values()):
            raise ConfigError(f"{path} was written by one process: it resumes in one process (a checkpoint written "
                              "by several ranks resumes under any number)")
        for name, module in state.items():
            if resume.get(name):
                module.load_state_dict(resume[name])
        return
    box = _box(state)
    model_sd, _ = get_state_dict(box, [])
    loaded = {"model": model_sd}
    dcp.load(loaded, checkpoint_id=str(path.parent / resume[SHARDS]))
    set_state_dict(box, [], model_state_dict=loaded["model"], optim_state_dict={})


def load_optimizer(resume: dict[str, Any], state: dict[str, nn.Module], optimizer: torch.optim.Optimizer,
                   path: Path) -> None:
    """The checkpointed optimizer state into `optimizer` (over some of `state`'s parameters)."""
    if not resume.get(SHARDS):
        optimizer.load_state_dict(resume["optimizer"])
        return
    box = _box(state)
    _, optim_sd = get_state_dict(box, optimizer)
    loaded = {"optimizer": optim_sd}
    dcp.load(loaded, checkpoint_id=str(path.parent / resume[SHARDS]))
    set_state_dict(box, optimizer, model_state_dict={}, optim_state_dict=loaded["optimizer"])


def finite(state: dict[str, nn.Module], device: torch.device) -> bool:
    """Every weight finite on every rank (each rank checks its shards; a collective)."""
    mine = all(bool(torch.isfinite(_local(p)).all()) for m in state.values() for p in m.parameters())
    return not distributed.any_rank(not mine, device)


def save(path: Path, plain: dict[str, Any], state: dict[str, nn.Module], optimizer: torch.optim.Optimizer | None
         ) -> None:
    """Every rank: its shards of `state` (and of `optimizer`'s state) into a new shard directory; then rank 0
    commits `plain` + the directory's name as `path` and removes the directories no checkpoint names."""
    name = [f"{path.stem}.{SHARDS}-{uuid.uuid4().hex[:12]}"]
    dist.broadcast_object_list(name, src=0)  # one directory for all ranks: rank 0's name
    box = _box(state)
    model_sd, optim_sd = get_state_dict(box, [optimizer] if optimizer is not None else [])
    content: dict[str, Any] = {"model": model_sd}
    if optimizer is not None:
        content["optimizer"] = optim_sd
    dcp.save(content, checkpoint_id=str(path.parent / name[0]))  # collective: returns once the metadata is written
    if distributed.is_main():
        save_checkpoint(path, {**plain, SHARDS: name[0], "optimizer": SHARDS if optimizer is not None else None})
        for old in shard_dirs(path):
            if old.name != name[0]:
                shutil.rmtree(old, ignore_errors=True)


def is_sharded(module: nn.Module) -> bool:
    """Whether some parameter of `module` is a sharded DTensor (an FSDP module's)."""
    return any(isinstance(p, DTensor) for p in module.parameters())


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t
