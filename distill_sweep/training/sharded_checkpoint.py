"""Checkpoints of sharded (FSDP) jobs: the modules' and the optimizer's shards written by every rank with
torch.distributed.checkpoint (DCP), the rest (position, history, scheduler, RNG, partial epoch sums) in
`checkpoint.pt` as for one process.

A save: every rank writes its shards into a new directory beside the checkpoint (`checkpoint.shards-<id>/`, DCP's
files are fsynced), then rank 0 writes `checkpoint.pt` naming that directory (checkpoint.py's atomic rename: the
commit point) and removes the directories no checkpoint names. A kill at any moment leaves `checkpoint.pt` naming a
complete directory (the new one only once it is whole), so a re-run resumes from the last completed save. The
shards are keyed by parameter name, not by rank: DCP re-shards them on load, so a checkpoint written by N ranks
resumes under any number of processes, one included (a process loads the tensors whole). A checkpoint written by
one process (whole tensors in checkpoint.pt) resumes in one process or sharded: each rank keeps its shards of them.
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
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
    set_state_dict,
)
from torch.distributed.tensor import DTensor

from distill_sweep.training import distributed
from distill_sweep.training.checkpoint import save_checkpoint
from distill_sweep.training.checkpoint_files import shard_dirs

log = logging.getLogger("distill_sweep")

SHARDS = "shards"  # the key of checkpoint.pt naming its shard directory
WHOLE = StateDictOptions(full_state_dict=True)  # whole tensors on every rank (a one-process checkpoint's)


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
    if not resume.get(SHARDS):  # written by one process: whole tensors, each rank keeps its shards of them
        for name, module in state.items():
            if resume.get(name):
                if is_sharded(module):
                    set_model_state_dict(module, resume[name], options=WHOLE)
                else:
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
        if not any(is_sharded(m) for m in state.values()):
            optimizer.load_state_dict(resume["optimizer"])
            return
        # written by one process: its state is keyed by the parameters' positions in the optimizer, which are the
        # same here (the stage lists the sharded parameters in the same order); keyed by name, it is sharded
        names = {id(p): n for n, p in _box(state).named_parameters()}
        order = [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
        plain = resume["optimizer"]
        whole = {"state": {order[i]: v for i, v in plain["state"].items()},
                 "param_groups": [{**g, "params": [order[i] for i in g["params"]]} for g in plain["param_groups"]]}
        set_optimizer_state_dict(_box(state), optimizer, whole, options=WHOLE)
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
