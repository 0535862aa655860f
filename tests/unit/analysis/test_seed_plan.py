"""`-m +plan_seeds=true`: the seeds each comparison of a planned grid needs, from a pilot's records."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import write_record
from helpers import write_seed_pilot as _pilot
from scipy import stats as sps

from distill_sweep.analysis import seed_plan


def _power(d: float, n: int, alpha: float = 0.05) -> float:
    """Two-sided paired t-test power from scipy's noncentral t (independent of the code under test)."""
    crit = sps.t.ppf(1 - alpha / 2, n - 1)
    return float(sps.nct.sf(crit, n - 1, d * math.sqrt(n)) + sps.nct.cdf(-crit, n - 1, d * math.sqrt(n)))


def _dz_end(t_obs: float, df: int, target: float) -> float:
    """The noncentrality at which P(T <= t_obs) = target, by bisection on scipy's noncentral t."""
    lo, hi = -60.0, 60.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sps.nct.cdf(t_obs, df, mid) > target else (lo, mid)
    return (lo + hi) / 2


def _fewest(d: float, alpha: float) -> int:
    return next(n for n in range(2, 100_000) if _power(d, n, alpha) >= 0.8)


def _planned(objectives: tuple[str, ...], seeds: range, inits: tuple[str, ...] = ("init-1",)) -> list[dict]:
    return [{"task": "toy", "procedure": "task_specific", "objective": o, "init": i, "seed": s}
            for o in objectives for i in inits for s in seeds]


def test_plan_from_pilot_by_hand(tmp_path: Path) -> None:
    _pilot(tmp_path)
    plan = seed_plan.plan(tmp_path, _planned(("vanilla_kd", "att_kl", "att_mse"), range(1, 4)))
    row = plan.set_index("comparison").loc["init-1: vanilla_kd vs att_kl"]
    assert row["pilot pairs"] == 3 and abs(row["mean(A-B)"] + 2.0) < 1e-9
    assert abs(row["d"] + 2.0) < 1e-9
    # d's 95% interval: t = d sqrt(3) has a noncentral t (2 df, noncentrality delta sqrt(3)); invert it
    t_obs = -2.0 * math.sqrt(3)
    d_low, d_high = _dz_end(t_obs, 2, 0.975) / math.sqrt(3), _dz_end(t_obs, 2, 0.025) / math.sqrt(3)
    assert row["d_low"] == pytest.approx(d_low, abs=1e-6) and row["d_high"] == pytest.approx(d_high, abs=1e-6)
    assert d_low < -2.0 < 0 < d_high  # 3 pilot pairs at d = -2 (p = 0.07) do not even rule out d = 0
    level = 0.05 / 3  # three planned comparisons: Holm's first step
    assert row["level"] == pytest.approx(level)
    assert row["seeds_low"] == _fewest(abs(d_low), level) and row["seeds_high"] == math.inf
    assert row["verdict"].startswith("enough only if") or row["verdict"].startswith("add at least")
    no_pilot = plan.set_index("comparison").loc["init-1: vanilla_kd vs att_mse"]
    assert no_pilot["pilot pairs"] == 0 and no_pilot["verdict"].startswith("no pilot")
    assert len(plan) == 3  # every pair of the three objectives at the one init


def test_plan_compares_one_thing_at_a_time_and_pools_tasks(tmp_path: Path) -> None:
    planned = _planned(("vanilla_kd", "att_kl"), range(1, 3), ("init-1", "init-3"))
    names = [name for name, *_ in seed_plan.comparisons(planned)]
    # objectives at each init, inits of each objective; never a different objective at a different init
    assert sorted(names) == sorted(["init-1: vanilla_kd vs att_kl", "init-3: vanilla_kd vs att_kl",
                                    "vanilla_kd: init-1 vs init-3", "att_kl: init-1 vs init-3"])
    _pilot(tmp_path)
    two_tasks = planned + [{**job, "task": "rte"} for job in planned]
    row = seed_plan.plan(tmp_path, two_tasks).set_index("comparison").loc["init-1: vanilla_kd vs att_kl"]
    level = 0.05 / 4
    far = abs(_dz_end(-2.0 * math.sqrt(3), 2, 0.975) / math.sqrt(3))
    assert row["tasks"] == "rte,toy" and row["seeds_low"] == math.ceil(_fewest(far, level) / 2)  # 2 pairs per seed


def test_a_pilot_run_on_another_dev_set_is_left_out(tmp_path: Path) -> None:
    """The pilot's pairs pool one dev set per task, as the report's statistics do (frames.one_dev_set)."""
    import json

    _pilot(tmp_path)
    odd = write_record(tmp_path, objective="att_kl", seed=4, score=0.10)  # on another dev set
    write_record(tmp_path, objective="vanilla_kd", seed=4, score=0.72)
    for path in tmp_path.rglob("result.json"):
        raw = json.loads(path.read_text())
        raw["data"]["dev_hash"] = {"validation": "other" if path == odd else "dev1"}
        path.write_text(json.dumps(raw))
    plan = seed_plan.plan(tmp_path, _planned(("vanilla_kd", "att_kl"), range(1, 4)))
    row = plan.set_index("comparison").loc["init-1: vanilla_kd vs att_kl"]
    assert row["pilot pairs"] == 3 and abs(row["mean(A-B)"] + 2.0) < 1e-9  # seed 4's pair is not pooled
