"""How many processes a job runs as: what the launch environment says, or what a sweep plans for its jobs; and
which of them speaks.

Config checks read it before torch is imported (a procedure that runs in one process, a batch that must
split evenly over the processes); distributed.py sets up the process group itself. The command line checks the
launch environment first (`launch_problem`: one line for a WORLD_SIZE that is not a number of processes, or one
that no launcher set); every rank but rank 0 keeps quiet (`speak_once`): the job's lines and a refusal are said
once.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

from distill_sweep.errors import ConfigError

_PLANNED = [1]  # processes per job that a sweep will start (set while the sweeper checks the jobs it submits)
_LAUNCHER_KEYS = ("RANK", "MASTER_ADDR", "MASTER_PORT")  # what torchrun sets besides WORLD_SIZE


def launch_problem() -> str | None:
    """One line for a launch environment that cannot start a job: WORLD_SIZE that is not a positive whole number,
    or above 1 without the rendezvous torchrun sets beside it (RANK, MASTER_ADDR, MASTER_PORT); None when fine."""
    size = os.environ.get("WORLD_SIZE")
    if size is None:
        return None
    if not size.strip().isdigit() or int(size) < 1:
        return (f"WORLD_SIZE={size!r} is not a number of processes (a whole number >= 1; torchrun sets it): unset "
                "it, or start the processes with torchrun --nproc_per_node=N -m distill_sweep ...")
    missing = [key for key in _LAUNCHER_KEYS if key not in os.environ]
    if int(size) > 1 and missing:
        return (f"WORLD_SIZE={size} but {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: several "
                f"processes are started by torchrun (torchrun --nproc_per_node={int(size)} -m distill_sweep ...) or "
                "by a SLURM launcher (hydra/launcher=slurm hydra.launcher.tasks_per_node=N); unset WORLD_SIZE to run "
                "in one process")
    return None


def requested_size() -> int:
    """How many processes the environment started for this job (1 when it is not a distributed launch), or,
    while a sweep plans its jobs (`planned`), how many its launcher will start for each."""
    if "WORLD_SIZE" in os.environ:
        problem = launch_problem()
        if problem is not None:
            raise ConfigError(problem)
        return int(os.environ["WORLD_SIZE"])
    if os.environ.get("SUBMITIT_EXECUTOR") == "slurm" and int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        return int(os.environ["SLURM_NTASKS"])
    return _PLANNED[0]


def launch_rank() -> int:
    """This process's rank as its launcher set it (torchrun's RANK, SLURM's SLURM_PROCID for a task of several),
    before the process group exists; 0 for one process."""
    if "WORLD_SIZE" in os.environ:
        rank = os.environ.get("RANK", "0")
        return int(rank) if rank.isdigit() else 0
    if os.environ.get("SUBMITIT_EXECUTOR") == "slurm" and int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        return int(os.environ.get("SLURM_PROCID", "0"))
    return 0


RANK_0_SPEAKS_S = 10.0  # how long a refusing rank other than 0 waits before it exits (`refused`)


def refused(status: int) -> NoReturn:
    """Exit with `status` after a refusal that rank 0 says (each rank finds the same problem): a rank other than 0
    waits first, since torchrun stops every rank (SIGTERM) as soon as one exits with an error, and rank 0 must not be
    stopped before it has said the line. Rank 0's own exit then stops the waiting ranks."""
    if launch_rank() != 0:
        time.sleep(RANK_0_SPEAKS_S)
    sys.exit(status)


# `log.warning(..., extra=EVERY_RANK)`: a line of this rank's own (a signal it received, where it resumed), which every
# rank says, prefixed with its rank (`speak_once`): on SLURM each rank has its own log, and they can differ there.
EVERY_RANK = {"every_rank": True}


class _ErrorsOnly(logging.Filter):
    """What a rank other than 0 lets through: its errors (every rank logs the same job's lines), and its own lines
    (`EVERY_RANK`), with its rank in front."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "every_rank", False):
            if not getattr(record, "rank_said", False):
                record.msg, record.rank_said = f"[rank {launch_rank()}] {record.msg}", True
            return True
        return record.levelno >= logging.ERROR


def speak_once() -> None:
    """On a rank other than 0, the handlers of the root logger (the console and the job's log file) pass errors
    only, and Python's warnings are off: every rank runs the same job and would print each of its lines ("done"
    included) once per rank. Call it once logging is configured (Hydra's job logging)."""
    if launch_rank() == 0:
        return
    warnings.simplefilter("ignore")  # the libraries' warnings too: rank 0 prints each once
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _ErrorsOnly) for f in handler.filters):
            handler.addFilter(_ErrorsOnly())


class Stopped(Exception):
    """SIGTERM reached a rank of a job of several processes (`stopped_by_sigterm`)."""


_HELD = {"depth": 0, "pending": False}  # sigterm_deferred: held back, and whether one came meanwhile


def _stopped(signum: int) -> Stopped:
    return Stopped(f"stopped by signal {signum} (torchrun stops every rank when one of them fails: that rank's "
                   "error is the news); the job keeps its last checkpoint, from which the same command resumes")


@contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """Inside the block SIGTERM raises Stopped in the main thread, where Python's default would end the process at
    once: torchrun stops every rank with it when one rank fails, so rank 0 then writes the record as failed instead
    of leaving it `running` (a re-run resumes a failed job from its last checkpoint)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        if _HELD["depth"]:
            _HELD["pending"] = True  # raised when the deferral ends
            return
        raise _stopped(signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: nothing to catch here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def sigterm_deferred() -> Iterator[None]:
    """A SIGTERM that `stopped_by_sigterm` turns into Stopped is held back while the block runs (writing the record
    of a failed job: a Stopped raised inside the write would leave the record `running`), and raised when it ends.
    (A flag, not the signal mask: the mask is a thread's, and Python runs its handlers in the main thread whichever
    thread the signal reached.)"""
    _HELD["depth"] += 1
    try:
        yield
    finally:
        _HELD["depth"] -= 1
        if not _HELD["depth"] and _HELD["pending"]:
            _HELD["pending"] = False
            raise _stopped(signal.SIGTERM)


@contextmanager
def planned(size: int) -> Iterator[None]:
    """While the block runs, jobs are checked as if started as `size` processes (the sweeper's planning)."""
    before, _PLANNED[0] = _PLANNED[0], size
    try:
        yield
    finally:
        _PLANNED[0] = before
