"""What this machine lets a job use, checked before torch: its CPUs (the affinity mask, a SLURM allocation).

A thread count above the CPUs a process may use does not fail: OpenMP threads then spin on shared cores and a
job (and everything beside it) runs many times slower. So it is refused, in one line, where the job runs.
"""

from __future__ import annotations

import os

from distill_sweep.config.schema import RunSettings
from distill_sweep.errors import ConfigError


def usable_cpus() -> tuple[int, str]:
    """How many CPUs this process may use, and what says so: the affinity mask (taskset, cgroup cpusets), or
    SLURM's CPUs per task inside an allocation where that is fewer."""
    try:
        count, source = len(os.sched_getaffinity(0)), "the CPUs this process may use"
    except AttributeError:  # no affinity call (macOS): every CPU
        count, source = os.cpu_count() or 1, "the CPUs of this machine"
    slurm = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and 0 < int(slurm) < count:
        count, source = int(slurm), "the SLURM allocation's CPUs per task (SLURM_CPUS_PER_TASK)"
    return count, source


def check_threads(run: RunSettings) -> None:
    """`threads` within the CPUs this process may use (ConfigError, one line)."""
    if run.threads is None:
        return
    count, source = usable_cpus()
    if run.threads > count:
        raise ConfigError(f"threads={run.threads}: more than the {count} CPU(s) here ({source}); threads beyond "
                          f"them spin on shared cores and slow every job down: use threads={count} or fewer")


__all__ = ["check_threads", "usable_cpus"]
