"""Several processes with `torch.distributed` (NCCL on GPU, gloo on CPU): the process group and the ranks'
agreement (config hash, stop and non-finite flags, sums).

The procedures that declare `shards` (causal_lm, task_specific, task_agnostic) shard their student with FSDP2
(fsdp.py: FSDP reduce-scatters the gradients, sharded_checkpoint.py has every rank write its shards; records equal
one process's within float tolerance, not to the bit). The others run in one process (job/identity.py refuses
several in one line).

The processes are started by `torchrun` (it sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT) or by
submitit on SLURM (`hydra/launcher=slurm hydra.launcher.tasks_per_node=N hydra.launcher.nodes=M`: every task
runs the whole Hydra job; `submitit.helpers.TorchDistributedEnvironment` gives the same variables). Every rank
then runs the same job: same config (checked: ranks that disagree stop with one line), same seeds, its own
slice of each global batch. Rules that keep them one job:

* only rank 0 writes (the record, the saved student, the tracker, the checkpoint's file; the ranks each write
  their shards beside it); every rank reads the checkpoint on resume;
* the non-finite flag is all-reduced (`any_rank`) before any backward, so every rank takes the same update or
  skips the same step;
* a SLURM preemption signal reaches ranks at different steps: the stop flag is all-reduced every step
  (`any_rank`), so all ranks checkpoint (rank 0 writes) and stop at the same step, and rank 0 hands the signal
  to submitit (which requeues on global rank 0 only) even when another rank got it first;
* every rank evaluates the whole dev set (no DistributedSampler, whose padding repeats examples).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist

from distill_sweep.errors import ConfigError
from distill_sweep.training.processes import requested_size

log = logging.getLogger("distill_sweep")


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


_WORLD = World()


def world() -> World:
    return _WORLD


def is_main() -> bool:
    return _WORLD.main


def setup(device: torch.device) -> World:
    """Join the process group the launcher prepared (nothing to do for one process); returns this rank."""
    global _WORLD
    if requested_size() <= 1:
        return _WORLD
    if not dist.is_initialized():
        if "WORLD_SIZE" not in os.environ:  # submitit on SLURM: rendezvous from the SLURM variables
            from submitit.helpers import TorchDistributedEnvironment

            TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    _WORLD = World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
    log.info("rank %d of %d", _WORLD.rank, _WORLD.size)
    return _WORLD


def local_device(device: torch.device) -> torch.device:
    """A GPU job's rank uses its local GPU (cuda:LOCAL_RANK)."""
    if device.type == "cuda" and _WORLD.size > 1:
        torch.cuda.set_device(_WORLD.local_rank)
        return torch.device("cuda", _WORLD.local_rank)
    return device


def check_same(value: str, what: str) -> None:
    """Every rank must hold the same `value` (e.g. the job's config hash): else ConfigError on every rank."""
    if _WORLD.size <= 1:
        return
    values: list[str | None] = [None] * _WORLD.size
    dist.all_gather_object(values, value)
    if len(set(values)) > 1:
        raise ConfigError(f"the {_WORLD.size} ranks disagree on the {what} ({', '.join(sorted(set(map(str, values))))}):"
                          " every rank must run the same job")


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank when it is true on some rank."""
    if _WORLD.size <= 1:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def sum_floats(values: list[float], device: torch.device) -> list[float]:
    """The sum over ranks of each value (float64); the values themselves on one process. Every rank must
    call it at the same point (a collective)."""
    if _WORLD.size <= 1:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


@contextmanager
def alone() -> Iterator[None]:
    """Inside the block this process is a world of one: no collective is called. For work only rank 0 does while
    the others wait in `main_first` (training a cached teacher with the stage driver, whose per-step
    collectives would otherwise wait for ranks that are not training)."""
    global _WORLD
    saved, _WORLD = _WORLD, World(local_rank=_WORLD.local_rank)
    try:
        yield
    finally:
        _WORLD = saved


@contextmanager
def main_first() -> Iterator[None]:
    """Rank 0 runs the block first (building a cache), the other ranks after it (reading that cache): one build
    instead of one per rank. Rank 0 releases the others even when the block raises (they then meet the same
    error themselves)."""
    if _WORLD.size <= 1:
        yield
        return
    if not _WORLD.main:
        dist.barrier()
    try:
        yield
    finally:
        if _WORLD.main:
            dist.barrier()


def teardown() -> None:
    global _WORLD
    if dist.is_initialized():
        dist.destroy_process_group()
    _WORLD = World()
