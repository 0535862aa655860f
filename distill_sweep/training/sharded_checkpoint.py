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

The sha256 of every file of the shard directory (`checksums`: each rank hashes its share of them after the save) goes
into `checkpoint.pt` with the directory's name, and a resume checks them first (`damage`): bytes changed in place, at
the file's length (a flipped bit on the disk, a copy gone wrong), set the checkpoint aside as a file cut short does.
A checkpoint written before the checksums is checked by length only.
"""

from __future__ import annotations

import hashlib
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

from distill_sweep.records.disk import set_aside
from distill_sweep.training import distributed
from distill_sweep.training.checkpoint import save_checkpoint
from distill_sweep.training.checkpoint_files import shard_dirs

log = logging.getLogger("distill_sweep")

SHARDS = "shards"  # the key of checkpoint.pt naming its shard directory
SUMS = "shard_sha256"  # the key of checkpoint.pt holding each of its shard directory's files' sha256 (`checksums`)
WHOLE = StateDictOptions(full_state_dict=True)  # whole tensors on every rank (a one-process checkpoint's)


def _box(state: dict[str, nn.Module]) -> nn.Module:
    """The checkpointed modules as one module (parameter names `student.…`, `objective.…`), which DCP's state-dict
    helpers take."""
    return nn.ModuleDict(state)


def check(resume: dict[str, Any] | None, path: Path) -> dict[str, Any] | None:
    """`resume` (checkpoint.pt's content), or None where the shard directory it names is gone, or damaged (the job
    starts over, as for an unreadable checkpoint): a damaged one is set aside with the checkpoint naming it, in one
    line (records.disk.set_aside), so that no re-run meets it again."""
    if resume is None or not resume.get(SHARDS):
        return resume
    shards = path.parent / resume[SHARDS]
    if not (shards / ".metadata").exists():
        log.warning("ignoring %s: its shard directory %s is missing or incomplete; starting from the beginning",
                    path, resume[SHARDS])
        return None
    problem = damage(shards, resume.get(SUMS))
    if problem is not None:
        if distributed.is_main():  # (the other ranks find the same, or the files already gone: None either way)
            try:
                set_aside(shards)
                moved = set_aside(path)
            except OSError as err:
                problem += f"; it cannot be moved aside either ({err})"
            else:
                problem += f"; set it and {path.name} aside as {moved.name.removeprefix(path.name)}"
            log.warning("damaged sharded checkpoint %s (%s): starting from the beginning", shards, problem)
        return None
    return resume


def damage(shards: Path, sums: dict[str, str] | None = None) -> str | None:
    """What is wrong with a shard directory, read without loading it: its `.metadata` unreadable, a shard file
    missing or shorter than the entries the metadata places in it (a write cut short), or a file whose sha256 is not
    the one `sums` holds for it (`checksums` at save time: bytes changed in place); None when whole."""
    try:
        metadata = dcp.FileSystemReader(str(shards)).read_metadata()
        ends: dict[str, int] = {}
        for info in (metadata.storage_data or {}).values():
            ends[info.relative_path] = max(ends.get(info.relative_path, 0), int(info.offset) + int(info.length))
    except Exception as err:  # noqa: BLE001 - unpickling garbage raises anything (pickle, EOF, Unicode, ...)
        first = str(err).strip().splitlines()[0][:160] if str(err).strip() else "no detail"
        return f".metadata unreadable: {type(err).__name__}: {first}"
    if not ends:
        return ".metadata names no shard file"
    for name, end in sorted(ends.items()):
        file = shards / name
        size = file.stat().st_size if file.is_file() else None
        if size is None or size < end:
            return f"{name} {'is missing' if size is None else f'holds {size} of its {end} bytes'}"
    for name, want in sorted((sums or {}).items()):
        try:
            got = _sha256(shards / name)
        except OSError as err:
            return f"{name} cannot be read ({type(err).__name__}: {err})"
        if got != want:
            return f"{name} is not the file that was saved (its sha256 differs from the one written at save time)"
    return None


def _sha256(file: Path) -> str:
    with file.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def checksums(shards: Path) -> dict[str, str]:
    """The sha256 of each file of the shard directory DCP has just written, by name: each rank hashes its share of
    them (rank 0's listing of the names, sorted: every N-th from its rank) and all ranks gather them (a collective with several);
    one process hashes them all."""
    names = sorted(p.name for p in shards.iterdir() if p.is_file())
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return {name: _sha256(shards / name) for name in names}
    rank, size = dist.get_rank(), dist.get_world_size()
    listed = [names]
    dist.broadcast_object_list(listed, src=0)  # rank 0's listing, which wrote .metadata last: every rank splits one
    mine = {name: _sha256(shards / name) for name in listed[0][rank::size]}
    everyone: list[dict[str, str] | None] = [None] * size
    dist.all_gather_object(everyone, mine)
    return {name: digest for part in everyone for name, digest in (part or {}).items()}


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
    sums = checksums(path.parent / name[0])  # (a collective too: every rank hashes its share)
    if distributed.is_main():
        save_checkpoint(path, {**plain, SHARDS: name[0], SUMS: sums,
                               "optimizer": SHARDS if optimizer is not None else None})
        remove_shards(path, keep=name[0])


def remove_shards(path: Path, keep: str | None = None) -> None:
    """The shard directories beside `path` but `keep` (the one `path` names): after a commit, none of them is named
    (one process writes whole tensors after resuming a sharded checkpoint: all of them go)."""
    for old in shard_dirs(path):
        if old.name != keep:
            shutil.rmtree(old, ignore_errors=True)


def is_sharded(module: nn.Module) -> bool:
    """Whether some parameter of `module` is a sharded DTensor (an FSDP module's)."""
    return any(isinstance(p, DTensor) for p in module.parameters())


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t
