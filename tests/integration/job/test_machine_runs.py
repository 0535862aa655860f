"""The threads a job uses by default, and OpenMP's wait policy set by the command line before torch loads: the
tests that run a job, a command or processes (its fast tests: tests/unit/job/test_machine.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS",
                                                               "SLURM_CPUS_PER_TASK")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**clean, **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to tell 1 from torch's default")
def test_a_job_takes_the_allocations_cpus_not_every_core() -> None:
    # torch's own default is every core, whatever SLURM allocated: the job sets its threads where it runs
    code = ("import torch; from distill_sweep.cli.run_job import _use_threads; "
            "from distill_sweep.config.schema import RunSettings; "
            "before = torch.get_num_threads(); _use_threads(RunSettings()); print(before, torch.get_num_threads())")
    before, after = _python(code, SLURM_CPUS_PER_TASK="1").split()
    assert int(before) >= 2 and int(after) == 1


_CLI = ("import os, sys; sys.argv = ['distill_sweep', '--help']; import distill_sweep.__main__ as m\n"
        "try:\n    m._cli()\nexcept SystemExit:\n    pass\nprint(os.environ.get('OMP_WAIT_POLICY'))")


def test_the_command_line_makes_openmp_wait_passively_before_torch_loads() -> None:
    assert _python(_CLI) == "PASSIVE"
    assert _python(_CLI, OMP_WAIT_POLICY="ACTIVE") == "ACTIVE"  # the user's own choice is kept
    # once torch is loaded OpenMP has read the variable: setting it then would only mislead
    late = "import torch, os; from distill_sweep.job.machine import passive_openmp; passive_openmp(); " \
           "print(os.environ.get('OMP_WAIT_POLICY'))"
    assert _python(late) == "None"
