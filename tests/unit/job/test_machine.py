"""The threads a job uses by default, and OpenMP's wait policy set by the command line before torch loads."""

from __future__ import annotations

import pytest

from distill_sweep.config.schema import RunSettings
from distill_sweep.job.machine import job_threads, usable_cpus


def test_default_threads_follow_the_allocation_explicit_threads_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert job_threads(RunSettings()) == 1
    assert job_threads(RunSettings(threads=3)) == 3  # as given (check_threads judges it, not this)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    assert job_threads(RunSettings()) == usable_cpus()[0]
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # torchrun's one thread per rank is kept
    assert job_threads(RunSettings()) == 1
