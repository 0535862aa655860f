"""A job from the command line is composed and typed once: the check's composition and identity are the run's.

Counted from the outside: the command runs in an interpreter whose profiler counts the calls of Hydra's config
loader (`ConfigLoaderImpl.load_configuration`: every composition, whoever asks for it) and of the one function that
types a composed config (`job.config.parse_plain`), by their code objects, so no caller's binding matters.
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
from distill_sweep.job.config import parse_plain

watched = {ConfigLoaderImpl.load_configuration.__code__: "compositions", parse_plain.__code__: "parses"}
counts = {"compositions": 0, "parses": 0}

def count(frame, event, arg):
    if event == "call" and frame.f_code in watched:
        counts[watched[frame.f_code]] += 1

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
    assert counts == {"compositions": 1, "parses": 1}
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
    assert counts == {"compositions": 1, "parses": 1}


def test_a_run_with_a_hydra_flag_still_goes_through_hydras_main(tmp_path: Path) -> None:
    """--cfg job prints the config (Hydra's main handles its flags): the check composes, then main."""
    proc = run_cli([*FAST, "--cfg", "job"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "objective:" in proc.stdout and not (tmp_path / "outputs").exists()
