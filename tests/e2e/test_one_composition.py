"""A job is composed and typed once: from the command line, the check's composition and identity are the run's; in
a sweep, the sweeper's are the job's.

Counted from the outside: the command runs in an interpreter whose profiler counts the calls of Hydra's config
loader (`ConfigLoaderImpl._load_configuration_impl`: every composition, whoever asks for it, in Hydra 1.3 and 1.4) and of the one function that
types a composed config (`job.config.parse_plain`), by their code objects, so no caller's binding matters; and of
those, the ones made while Hydra's launcher launches a job (`BasicLauncher.launch` below in the stack) and while a
job runs (`cli.run_job.run_main` below in the stack).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import FAST, ROOT, cli_env, run_cli

COUNTING = r"""
import json, runpy, sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from distill_sweep.cli.run_job import run_main
from distill_sweep.job.config import parse_plain

watched = {ConfigLoaderImpl._load_configuration_impl.__code__: "compositions", parse_plain.__code__: "parses"}
within = {BasicLauncher.launch.__code__: "by the launcher", run_main.__code__: "in a job"}
# by file and name: importing these modules here would import them again as Hydra loads its plugins
named = {("distill_sweep/__main__.py", "check_overrides"): "by the check",
         ("distill_sweep/sweep/sweeper.py", "sweep"): "by the sweeper"}
counts = {"compositions": 0, "parses": 0}

def count(frame, event, arg):
    if event == "call" and frame.f_code in watched:
        what = watched[frame.f_code]
        counts[what] += 1
        caller = frame.f_back
        while caller is not None:
            code = caller.f_code
            where = within.get(code) or next((w for (path, name), w in named.items()
                                              if code.co_name == name and code.co_filename.endswith(path)), None)
            if where is not None:
                key = f"{what} {where}"
                counts[key] = counts.get(key, 0) + 1
            caller = caller.f_back

out, sys.argv = sys.argv[1], ["distill_sweep", *sys.argv[2:]]
sys.setprofile(count)
try:
    runpy.run_module("distill_sweep", run_name="__main__", alter_sys=True)
finally:
    sys.setprofile(None)
    with open(out, "w") as f:
        json.dump(counts, f)
"""


def _counted(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, dict[str, int]]:
    out = cwd / "counts.json"
    proc = subprocess.run([sys.executable, "-c", COUNTING, str(out), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=cli_env(PYTHONPATH=str(ROOT)))
    return proc, json.loads(out.read_text())


def test_a_job_from_the_command_line_is_composed_and_parsed_once(tmp_path: Path) -> None:
    args = [*FAST, f"results_dir={tmp_path / 'results'}", f"cache_dir={tmp_path / 'cache'}", "objective=vanilla_kd"]
    first, counts = _counted(args, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "done toy/vanilla_kd" in first.stdout + first.stderr
    assert counts == {"compositions": 1, "parses": 1, "compositions by the check": 1, "parses by the check": 1}
    # the one composition is the run's: Hydra's run directory, its .hydra/ files and the job's log as main writes them
    (run_dir,) = (tmp_path / "outputs").glob("*/*_toy_vanilla_kd")
    assert sorted(p.name for p in (run_dir / ".hydra").iterdir()) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    hydra_yaml = (run_dir / ".hydra" / "hydra.yaml").read_text()
    assert "mode: RUN" in hydra_yaml and "name: run_job" in hydra_yaml
    assert "done toy/vanilla_kd" in (run_dir / "run_job.log").read_text()

    # the same job again: found completed, still one composition and one parse
    again, counts = _counted(args, tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "already completed" in again.stdout + again.stderr
    assert counts == {"compositions": 1, "parses": 1, "compositions by the check": 1, "parses by the check": 1}


def test_a_run_with_a_hydra_flag_still_goes_through_hydras_main(tmp_path: Path) -> None:
    """--cfg job prints the config (Hydra's main handles its flags): the check composes, then main."""
    proc = run_cli([*FAST, "--cfg", "job"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "objective:" in proc.stdout and not (tmp_path / "outputs").exists()


def test_a_sweeps_jobs_are_composed_and_typed_once_in_the_sweeper(tmp_path: Path) -> None:
    """Four jobs (two objectives x two seeds) in two packs, and the job that builds their teacher's outputs first."""
    args = [*FAST, f"results_dir={tmp_path / 'results'}", f"cache_dir={tmp_path / 'cache'}",
            f"hydra.sweep.dir={tmp_path / 'multirun'}", "objective=vanilla_kd,att_kl", "seed=1,2", "-m"]
    proc, counts = _counted(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert "building the teacher outputs of 1 task(s) first" in out and "2 pack(s) trained in lockstep" in out
    assert out.count("] completed: toy/") == 4
    # no job is composed by Hydra's launcher or typed in its run: each was, once, by the sweeper
    assert "compositions by the launcher" not in counts and "parses in a job" not in counts
    # the check composes and types the first job, then one per further swept value (att_kl, seed=2)
    assert counts["compositions by the check"] == counts["parses by the check"] == 3
    # the sweeper composes once per set of group choices (objective=vanilla_kd, att_kl), none per job, and types
    # each of the four jobs and the build job once
    assert counts["compositions by the sweeper"] == 2 and counts["parses by the sweeper"] == 4 + 1
    # the rest is Hydra's main composing the sweep's own config (twice in Hydra 1.3: its mode, then the config)
    assert 1 <= counts["compositions"] - 3 - 2 <= 2 and counts["parses"] == 3 + 5
    # the jobs' .hydra/ files say what Hydra's launcher would have written: the job's overrides, its number
    pack = next((tmp_path / "multirun").glob("1_*"))
    assert (pack / ".hydra" / "overrides.yaml").read_text().count("pack_file=") == 1
    assert "num: 1" in (pack / ".hydra" / "hydra.yaml").read_text()
