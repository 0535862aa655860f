"""`-m +plan_seeds=true`: the tests that run a job, a command or processes (its fast tests:
tests/unit/analysis/test_seed_plan.py)."""

from __future__ import annotations

from pathlib import Path

from helpers import FAST, records, run_cli_preloaded
from helpers import write_seed_pilot as _pilot


def test_plan_seeds_dry_run(tmp_path: Path) -> None:
    _pilot(tmp_path / "results")
    before = len(records(tmp_path / "results"))
    res = run_cli_preloaded([*FAST, "objective=vanilla_kd,att_kl", "seed=1,2,3,4,5", f"results_dir={tmp_path / 'results'}",
                   f"cache_dir={tmp_path / 'cache'}", "-m", "+plan_seeds=true"], cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "would run" in res.stdout  # the dry run's plan
    line = next(x for x in res.stdout.splitlines() if x.startswith("init-1: vanilla_kd vs att_kl"))
    assert "–" in line and " 5 " in line  # a range of seeds needed, 5 planned
    assert "alpha/m = 0.05/1" in res.stdout
    assert len(records(tmp_path / "results")) == before and not (tmp_path / "cache").exists()  # nothing ran
