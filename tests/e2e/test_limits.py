"""The machine's limits, paths, interpolation and quoting mistakes, a loss that overflows, Ctrl-C, a SLURM host
with no cluster, and what a newcomer reads first (--help, a preset's dry run, `make demo`): each is one line (or
a short summary) from the real command line, with nothing written where a refusal is due."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import FAST, ROOT, records, run_cli_preloaded, save_diverged_model

from distill_sweep.training.checkpoint_files import CHECKPOINT


def _errors(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("distill_sweep")]


def _refused(proc: subprocess.CompletedProcess, *names: str) -> str:
    """The one line of a refusal (exit 2, nothing else on stderr), holding each of `names`."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, f"rc {proc.returncode}\n{proc.stderr[-3000:]}"
    assert lines[0].startswith("distill_sweep: error: "), lines[0]
    for name in names:
        assert name in lines[0], f"{name!r} not in: {lines[0]}"
    return lines[0]


def _store(tmp_path: Path) -> list[str]:
    return [f"results_dir={tmp_path / 'results'}", f"cache_dir={tmp_path / 'cache'}"]


# ------------------------------------------------------------------------------ the machine's resources
def test_threads_above_the_cpus_this_process_may_use_are_refused(tmp_path: Path) -> None:
    """The affinity mask (taskset) bounds `threads`; inside a SLURM allocation, its CPUs per task."""
    if shutil.which("taskset") is None:
        pytest.skip("no taskset here to restrict the process to one CPU")
    args = [*[a for a in FAST if not a.startswith("threads=")], *_store(tmp_path)]
    one_cpu = subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "distill_sweep", *args, "threads=2"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
    _refused(one_cpu, "threads=2", "1 CPU(s)", "threads=1 or fewer")
    allocation = run_cli_preloaded([*args, "threads=2"], cwd=tmp_path, env={"SLURM_CPUS_PER_TASK": "1"})
    _refused(allocation, "threads=2", "SLURM_CPUS_PER_TASK")
    many = len(os.sched_getaffinity(0)) + 1
    _refused(run_cli_preloaded([*args, f"threads={many}", "init=1,3", "-m"], cwd=tmp_path), f"threads={many}")
    # a SLURM job gets cpus_per_task, whatever the submitting host has
    _refused(run_cli_preloaded([*args, "threads=8", "hydra/launcher=slurm", "hydra.launcher.cpus_per_task=4", "-m"],
                     cwd=tmp_path), "threads=8", "hydra.launcher.cpus_per_task=4")
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: device=cuda is a valid choice here")
def test_device_cuda_without_cuda_is_refused_and_auto_takes_the_cpu(tmp_path: Path, shared_cache: Path) -> None:
    proc = run_cli_preloaded([*FAST, *_store(tmp_path), "device=cuda"], cwd=tmp_path)
    _refused(proc, "device=cuda", "CUDA is not available", "device=auto")
    assert not records(tmp_path / "results")
    auto = run_cli_preloaded([*FAST, f"results_dir={tmp_path / 'results'}", f"cache_dir={shared_cache}", "device=auto",
                    "max_steps_per_epoch=2"], cwd=tmp_path)  # the session's teacher: the device is the point
    assert auto.returncode == 0, auto.stderr[-3000:]
    (record,) = records(tmp_path / "results")
    assert record["status"] == "completed" and record["device"] == "cpu"


# ------------------------------------------------------------------------------ paths and the override grammar
def test_a_quoted_tilde_is_the_home_directory_in_every_path(tmp_path: Path) -> None:
    """`results_dir='~/...'` made a directory named `~` in the launch directory; now `~` is $HOME, as it
    already was for task.data_dir and the model paths."""
    home, launch = tmp_path / "home", tmp_path / "launch"
    home.mkdir()
    launch.mkdir()
    proc = run_cli_preloaded([*FAST, "max_steps_per_epoch=2", "results_dir='~/store'", "cache_dir='~/cache'"], cwd=launch,
                   env={"HOME": str(home)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (record,) = records(home / "store")
    assert record["status"] == "completed"
    assert (home / "cache" / "teachers").is_dir()
    assert not list(launch.rglob("~"))


def test_an_unset_environment_variable_is_one_line_naming_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DS_TEST_UNSET"}
    proc = subprocess.run([sys.executable, "-m", "distill_sweep", *FAST, "results_dir=${oc.env:DS_TEST_UNSET}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    _refused(proc, "results_dir", "DS_TEST_UNSET is not set", "export DS_TEST_UNSET=", "${oc.env:DS_TEST_UNSET,")
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.parametrize(("argv", "names"), [
    # an unquoted space: the shell hands Hydra the path's second half as an override of its own
    (["results_dir=/tmp/my", "results"], ["results", "quote the whole override", "\"results_dir='/tmp/my results'\""]),
    # `~` (or a bracket, a quote) unquoted: Hydra's lexer refuses the value
    (["results_dir=~/x"], ["results_dir=~/x", "quote it", "\"results_dir='~/x'\""]),
], ids=["space", "tilde"])
def test_an_override_hydra_cannot_parse_says_how_to_quote_it(argv: list[str], names: list[str],
                                                             tmp_path: Path) -> None:
    _refused(run_cli_preloaded([*FAST, *argv], cwd=tmp_path), *names)


# ------------------------------------------------------------------------------ failures while training
@pytest.mark.parametrize("sweep", [False, True], ids=["one-job", "sweep"])
def test_a_non_finite_loss_is_one_line(tmp_path: Path, shared_cache: Path, sweep: bool) -> None:
    """A student that has diverged (an inf in its weights; settings that overflow are refused up front): one line,
    what happened and what a re-run does."""
    diverged = save_diverged_model(tmp_path / "student", shared_cache, "bert.embeddings.LayerNorm.bias")
    args = [*FAST, "objective=att_mse", "student=pretrained", f"student.name_or_path={diverged}",
            f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}", *(["-m"] if sweep else [])]
    proc = run_cli_preloaded(args, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    (line,) = _errors(proc)
    failed = "1 of 1 jobs failed (see their result.json); the first: " if sweep else ""
    assert line.startswith(f"distill_sweep: error: {failed}non-finite loss at intermediate 1/1 step 1"), line
    assert "diverged" in line and "resumes" in line
    assert "Traceback" not in proc.stderr and "Error executing job" not in proc.stderr
    (record,) = records(tmp_path / "r")
    assert record["status"] == "failed"


def test_ctrl_c_is_one_line_and_the_same_command_resumes(tmp_path: Path, shared_cache: Path) -> None:
    args = [*FAST, "objective=att_kl_hid_seq", "epochs=2", "checkpoint.every_steps=2", f"results_dir={tmp_path / 'r'}",
            f"cache_dir={shared_cache}"]
    # as from a terminal: SIGINT at its default disposition (a test run started in the background of a
    # non-interactive shell ignores SIGINT, and Python then leaves it ignored: the job would just go on)
    proc = subprocess.Popen([sys.executable, "-m", "distill_sweep", *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not list((tmp_path / "r").rglob(CHECKPOINT)):
        assert proc.poll() is None, proc.stderr.read()[-3000:] if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("distill_sweep")]
    assert lines == ["distill_sweep: interrupted (Ctrl-C); a job that had started keeps its record ('running') and its "
                     "last checkpoint: the same command resumes it from there"], stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    (record,) = records(tmp_path / "r")
    assert record["status"] == "running"
    again = run_cli_preloaded(args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    (record,) = records(tmp_path / "r")
    assert record["status"] == "completed" and record["resumed"] == 1


def _fake_slurm(bin_dir: Path, ping_ok: bool) -> dict[str, str]:
    """sbatch and srun failing as SLURM's own commands do without a controller, and scontrol whose ping
    answers `ping_ok` (SLURM may not be installed where this runs: the real cluster is tests/e2e/test_slurm.py)."""
    bin_dir.mkdir()
    scripts = {tool: f"echo '{tool}: error: {what}Unable to contact slurm controller (connect failure)' >&2\nexit 1"
               for tool, what in (("sbatch", "Batch job submission failed: "), ("srun", ""))}
    scripts["scontrol"] = ("echo 'Slurmctld(primary) at ctl is UP'" if ping_ok else
                           "echo 'scontrol: error: fetch_config: DNS SRV lookup failed' >&2\n"
                           "echo 'scontrol: fatal: Could not establish a configuration source' >&2\nexit 1")
    for tool, body in scripts.items():
        (bin_dir / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / tool).chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_a_slurm_host_that_reaches_no_cluster_is_one_line_before_any_submission(tmp_path: Path) -> None:
    proc = run_cli_preloaded([*FAST, *_store(tmp_path), "hydra/launcher=slurm", "-m"], cwd=tmp_path,
                   env=_fake_slurm(tmp_path / "bin", ping_ok=False))
    assert proc.returncode == 1, proc.stderr[-3000:]
    (line,) = [line for line in proc.stderr.splitlines() if line.strip()]  # nothing else on stderr: no sbatch echo
    assert line == ("distill_sweep: error: the SLURM cluster cannot be reached: scontrol: fatal: Could not "
                    "establish a configuration source; nothing was submitted: check that this host reaches the "
                    "cluster (sinfo), or run here with hydra/launcher=local"), line
    assert not records(tmp_path / "results") and not list(tmp_path.rglob(".submitit"))


def test_a_submission_that_fails_anyway_is_one_error_line(tmp_path: Path) -> None:
    """The controller answers a ping, sbatch still fails: its reason in the sweep's one line."""
    proc = run_cli_preloaded([*FAST, *_store(tmp_path), "hydra/launcher=slurm", "-m"], cwd=tmp_path,
                   env=_fake_slurm(tmp_path / "bin", ping_ok=True))
    assert proc.returncode == 1, proc.stderr[-3000:]
    (line,) = _errors(proc)
    assert line.startswith("distill_sweep: error: the launcher could not submit the jobs: sbatch: error: Batch job "
                           "submission failed: Unable to contact slurm controller"), line
    assert "hydra/launcher=local" in line
    assert "Traceback" not in proc.stderr and "FailedJobError" not in proc.stderr
    assert not records(tmp_path / "results")


# ------------------------------------------------------------------------------ what a newcomer reads first
def test_help_says_what_the_tool_is_and_offers_no_base_config(tmp_path: Path) -> None:
    proc = run_cli_preloaded(["--help"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("distill_sweep: knowledge-distillation sweeps"), proc.stdout[:200]
    assert "powered by Hydra" not in proc.stdout.splitlines()[0]
    (objectives,) = [line for line in proc.stdout.splitlines() if line.startswith("objective: ")]
    offered = objectives.removeprefix("objective: ").split(", ")
    assert "base" not in offered and "att_mse" in offered and "vanilla_kd" in offered


def test_a_paper_presets_dry_run_prints_its_summary_first(tmp_path: Path) -> None:
    # one task of Table 3's grid (72 of its 504 jobs: the grid's size is test_sweep's); planning is per job
    proc = run_cli_preloaded(["experiment=paper_table3", "task=rte", f"results_dir={tmp_path / 'r'}", "+dry_run=true", "-m"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "distill_sweep: 72 jobs in the grid, 0 already completed, 72 to run"
    assert lines[1].startswith("estimated cost: ")
    assert sum(line.startswith("  would run: ") for line in lines) == 20
    assert "  ... and 52 more (+dry_run_list=true lists every job)" in lines
    listed = run_cli_preloaded(["experiment=paper_table3", "task=rte", f"results_dir={tmp_path / 'r'}", "+dry_run=true",
                      "+dry_run_list=true", "-m"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert listed.stdout.count("  would run: ") == 72 and "more (+dry_run_list" not in listed.stdout


def test_make_demo_writes_outside_the_default_result_store() -> None:
    """`make tables` reads results/: the demo's records there mixed into the user's tables."""
    if shutil.which("make") is None:
        pytest.skip("no make here")
    proc = subprocess.run(["make", "-n", "demo", "STAMP=/dev/null"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    (run,) = [line for line in proc.stdout.splitlines() if "-m distill_sweep experiment=demo" in line]
    (where,) = re.findall(r"results_dir=(\S+)", run)
    tables = subprocess.run(["make", "-n", "tables", "STAMP=/dev/null"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    (store,) = re.findall(r"-m distill_sweep\.report (\S+)", tables.stdout)
    assert (ROOT / store).resolve() not in [(ROOT / where).resolve(), *(ROOT / where).resolve().parents]
