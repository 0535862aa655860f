"""What this machine lets a job use, checked before torch: its CPUs (the affinity mask, a SLURM allocation).

A thread count above the CPUs a process may use does not fail: OpenMP threads then spin on shared cores and a
job (and everything beside it) runs many times slower. So it is refused, in one line, where the job runs.
"""

from __future__ import annotations

import os
import sys

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


def job_threads(run: RunSettings) -> int:
    """The torch threads a job uses: `threads` as given, else the CPUs this process may use (usable_cpus).

    torch's own default is every core of the machine, whatever the affinity mask or SLURM allocation says, and
    its OpenMP threads then wait for one another on cores another process holds. An OMP_NUM_THREADS that a
    launcher set (torchrun sets 1 for several ranks per node) is kept where it asks for fewer."""
    if run.threads is not None:
        return run.threads
    count = usable_cpus()[0]
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    return min(int(omp), count) if omp.isdigit() and int(omp) > 0 else count


def passive_openmp() -> None:
    """OpenMP threads that sleep, not spin, while they wait (OMP_WAIT_POLICY=PASSIVE), unless the user chose.

    OpenMP reads the variable once, when torch loads it: this must run before torch is imported, in the process
    of the command line (the jobs it runs, and the processes it starts, inherit it). Spinning threads hold their
    cores between operations; beside one busy process that made a CPU job several times slower than one thread.
    """
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


__all__ = ["check_threads", "job_threads", "passive_openmp", "usable_cpus"]
