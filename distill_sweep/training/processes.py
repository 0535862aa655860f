"""How many processes a job runs as: what the launch environment says, or what a sweep plans for its jobs.

Config checks read it before torch is imported (a procedure that runs in one process, a batch that must
split evenly over the processes); distributed.py sets up the process group itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

_PLANNED = [1]  # processes per job that a sweep will start (set while the sweeper checks the jobs it submits)


def requested_size() -> int:
    """How many processes the environment started for this job (1 when it is not a distributed launch), or,
    while a sweep plans its jobs (`planned`), how many its launcher will start for each."""
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    if os.environ.get("SUBMITIT_EXECUTOR") == "slurm" and int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        return int(os.environ["SLURM_NTASKS"])
    return _PLANNED[0]


@contextmanager
def planned(size: int) -> Iterator[None]:
    """While the block runs, jobs are checked as if started as `size` processes (the sweeper's planning)."""
    before, _PLANNED[0] = _PLANNED[0], size
    try:
        yield
    finally:
        _PLANNED[0] = before
