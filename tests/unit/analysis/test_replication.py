"""The master seed as the unit of replication (analysis/replication.py) on a grid crossing `seed=1,2,3` with
`seeds.data_order=1,2`: unit means by hand, and seeded simulations through the report's functions of a cell's 95%
interval (coverage) and the objective x init interaction test (type-I error), each beside what the same function
gives when every run is its own unit (the old rule), so each check could fail on that code."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from distill_sweep.analysis import replication, stats
from distill_sweep.analysis.interaction import init_interactions

SEEDS, ORDERS = 3, 2  # a 3 x 2 crossing: the design the variance table asks for


def test_unit_means_by_hand() -> None:
    frame = pd.DataFrame({"system": ["A"] * 5, "task": ["rte"] * 5, "seed": [1, 1, 2, 2, 3],
                          "value": [1.0, 3.0, 4.0, 8.0, 5.0], "path": list("abcde")})
    got = replication.unit_means(frame, ["system", "task"])
    assert got["value"].tolist() == [2.0, 6.0, 5.0] and got["runs"].tolist() == [2, 2, 1]
    assert got["path"].tolist() == ["a", "c", "e"]  # the unit's first run
    assert replication.runs_per_unit(frame, ["system", "task"]) == 2


def _cells(values: np.ndarray) -> pd.DataFrame:
    """Scores [R, SEEDS, ORDERS] as a scores frame: replication r is row r, its runs per master seed and order."""
    reps = values.shape[0]
    return pd.DataFrame({
        "system": np.repeat(np.arange(reps), SEEDS * ORDERS).astype(str), "init_label": "1", "task": "rte",
        "metric": "accuracy", "seed": np.tile(np.repeat(np.arange(SEEDS), ORDERS), reps), "value": values.ravel()})


def test_a_crossed_cells_interval_covers_at_its_level() -> None:
    """score = 70 + a(master seed, sd 2) + e(run, sd 1): the cell's t-interval over the master seeds' means covers
    the true 70 at 95%; over the 6 runs as independent it does not. 4,000 seeded replications: Monte Carlo error
    sqrt(0.95 x 0.05 / 4000) = 0.34 points, so 94% is 3 errors below the nominal rate."""
    reps = 4000
    rng = np.random.default_rng(20261203)
    values = 70.0 + 2.0 * rng.normal(size=(reps, SEEDS, 1)) + rng.normal(size=(reps, SEEDS, ORDERS))
    frame = _cells(values)
    cells = stats.aggregate(frame)
    assert (cells["n"] == SEEDS).all() and (cells["runs"] == SEEDS * ORDERS).all()
    coverage = float(((cells["ci_low"] <= 70.0) & (70.0 <= cells["ci_high"])).mean())
    assert coverage >= 0.94, coverage  # measured 95.4%
    runs = stats.aggregate(frame, unit=None)  # every run its own unit: n = 6
    naive = float(((runs["ci_low"] <= 70.0) & (70.0 <= runs["ci_high"])).mean())
    assert naive < 0.90, naive  # measured 82.6%
    # the unit's interval is the t-interval of the unit means, recomputed with numpy/scipy on the first cell
    units = values[0].mean(axis=1)
    half = 4.302652729911275 * units.std(ddof=1) / math.sqrt(SEEDS)  # t_{0.975, 2}
    assert (cells["ci_low"][0], cells["ci_high"][0]) == pytest.approx((units.mean() - half, units.mean() + half))


def _interaction_frame(values: np.ndarray, seed_of_run: np.ndarray) -> pd.DataFrame:
    """One replication's scores [2 systems, 2 inits, SEEDS, ORDERS] as a scores frame; `seed_of_run` [SEEDS,
    ORDERS] is the seed column each run gets."""
    shape = values.shape
    return pd.DataFrame({
        "task": "rte", "system": np.repeat(["A", "B"], values[0].size),
        "init_label": np.tile(np.repeat(["x", "y"], SEEDS * ORDERS), 2),
        "seed": np.tile(seed_of_run.ravel(), shape[0] * shape[1]), "value": values.ravel()})


def test_a_crossed_grids_interaction_test_keeps_its_level() -> None:
    """No interaction: every run of a (system, init) cell at one master seed shares that unit's effect (sd 2), plus
    its own noise (sd 1). init_interactions on the master seeds: type-I at most 6%; with each (seed, order) run a
    unit of its own (the old rule, given here as distinct seeds) it rejects far more. 2,000 seeded replications:
    Monte Carlo error sqrt(0.05 x 0.95 / 2000) = 0.49 points."""
    reps = 2000
    rng = np.random.default_rng(50)
    values = 2.0 * rng.normal(size=(reps, 2, 2, SEEDS, 1)) + rng.normal(size=(reps, 2, 2, SEEDS, ORDERS))
    master = np.repeat(np.arange(SEEDS)[:, None], ORDERS, axis=1)
    per_run = np.arange(SEEDS * ORDERS).reshape(SEEDS, ORDERS)
    rejected = np.zeros(reps, dtype=bool)
    naive = np.zeros(200, dtype=bool)
    for r in range(reps):
        (row,) = init_interactions(_interaction_frame(values[r], master)).to_dict("records")
        assert row["n"] == SEEDS
        rejected[r] = row["p"] < 0.05
        if r < len(naive):
            naive[r] = init_interactions(_interaction_frame(values[r], per_run))["p"].iloc[0] < 0.05
    assert rejected.mean() <= 0.06, rejected.mean()  # measured 5.05%
    # 200 replications of the old rule: measured 20% (Monte Carlo error 2.8 points); 12% is 3 errors below
    assert naive.mean() > 0.12, naive.mean()
