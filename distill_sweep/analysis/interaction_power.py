"""The dry run's power line for Table 3's claim: the smallest objective x init interaction a planned grid detects
with 80% power, before anything runs.

It is the figure the report prints beside an interaction it does not call (analysis/interaction.py, `detectable`:
the same formula at the same level), at the grid's n: the (task, master seed) units of a row x init cell (the
fewest any cell of the grid holds), at Holm's first-step level over the family Table 3 tests on that grid
(`family_size`: its init pairs, interaction contrasts, bold tests and difference-map cells). A contrast d = (A_x - A_y) - (B_x - B_y) adds four unit scores with signs +-1, so with a per-unit
standard deviation sigma its sd is 2 sigma where the four are independent (runs that share a master seed's data
order correlate, which makes it smaller: the figure is then conservative). sigma is read from completed records of
the planned tasks and rows under results_dir (their seed-level spread within each task x row x init cell, pooled),
or stays unknown until runs exist: the line then gives the interaction per point of sigma.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from distill_sweep.analysis import frames, replication
from distill_sweep.analysis.interaction import detectable, family_size
from distill_sweep.analysis.seed_plan import system_name

CONTRAST_SD_PER_SIGMA = 2.0  # sqrt(4): a contrast's four unit scores, each with sd sigma, independent
# procedures whose runs go to tables of their own, with no interaction test: report/decoder.py's PROCEDURE and
# report/pretraining.py's SOURCE_PROCEDURE (the report layer sits above this one; a unit test keeps them equal)
OWN_TABLES = ("causal_lm", "task_agnostic")


def grid_shape(planned: Sequence[dict[str, Any]]) -> tuple[int, int, int]:
    """(rows, inits, units) of a planned grid (dicts of task, procedure, objective, init, seed): rows are the
    systems planned at two or more inits (runs of OWN_TABLES' procedures left out), units the fewest (task, master
    seed) pairs any of their cells holds."""
    cells: dict[tuple[str, str], set[tuple[str, int]]] = {}
    for job in (j for j in planned if str(j["procedure"]) not in OWN_TABLES):
        cell = (system_name(str(job["procedure"]), str(job["objective"])), str(job["init"]))
        cells.setdefault(cell, set()).add((str(job["task"]), int(job["seed"])))
    inits_of: dict[str, set[str]] = {}
    for system, init in cells:
        inits_of.setdefault(system, set()).add(init)
    rows = [s for s, inits in inits_of.items() if len(inits) > 1]
    inits = set().union(*(inits_of[s] for s in rows)) if rows else set()
    units = min((len(u) for (s, _), u in cells.items() if s in rows), default=0)
    return len(rows), len(inits), units


def unit_sd(results_dir: str | Path, planned: Sequence[dict[str, Any]]) -> tuple[float, int]:
    """(sigma, its degrees of freedom): the pooled within-cell standard deviation of the master seeds' scores
    (each seed's runs averaged first, analysis/replication.py) over the completed records under results_dir of the
    planned tasks and rows, each task x row x init cell with two or more seeds contributing; (nan, 0) without."""
    if not Path(results_dir).is_dir():
        return math.nan, 0
    records, _ = frames.one_dev_set(frames.load_store(results_dir).records)  # one dev set, as the report
    if records.empty:
        return math.nan, 0
    sc, _ = frames.scores(records)
    tasks = {str(j["task"]) for j in planned}
    systems = {system_name(str(j["procedure"]), str(j["objective"])) for j in planned}
    mine = sc[sc["task"].isin(tasks) & pd.Series([system_name(str(p), str(o)) in systems for p, o in
                                                  zip(sc["procedure"], sc["objective"], strict=True)], index=sc.index,
                                                 dtype=bool)]
    if mine.empty:
        return math.nan, 0
    cell = ["task", "procedure", "objective", "init_label"]
    units = replication.unit_means(mine, cell)
    grouped = units.groupby(cell)["value"]
    df = int((grouped.count() - 1).clip(lower=0).sum())
    if df < 1:
        return math.nan, 0
    sum_sq = float(grouped.apply(lambda v: float(((v - v.mean()) ** 2).sum())).sum())
    return math.sqrt(sum_sq / df), df


def power_line(results_dir: str | Path, planned: Sequence[dict[str, Any]], alpha: float = 0.05) -> str:
    """The dry run's line ("" where the grid crosses no two rows with two inits: Table 3 tests no interaction)."""
    rows, inits, units = grid_shape(planned)
    if rows < 2 or inits < 2:
        return ""
    kept = [j for j in planned if str(j["procedure"]) not in OWN_TABLES]
    tasks = sorted({str(j["task"]) for j in kept})
    baseline = any(system_name(str(j["procedure"]), str(j["objective"])) == frames.NO_KD_LABEL for j in kept)
    family = family_size(rows, inits, tasks, baseline)
    per_sigma = detectable(units, CONTRAST_SD_PER_SIGMA, family, alpha)
    sigma, df = unit_sd(results_dir, planned)
    head = (f"objective x init interaction (Table 3's test) at this grid's n: {units} (task, master seed) units per "
            f"row x init, Holm's first-step level alpha/m = {alpha}/{family} = {alpha / family:.3g} over the "
            f"{family} tests Table 3 makes on {rows} rows x {inits} inits x {len(tasks)} task(s) (its init pairs, "
            "interaction contrasts, bold and difference-map cells: one family); a contrast of 4 independent unit scores "
            "has sd 2 sigma")
    if math.isnan(per_sigma):
        return head + "; fewer than 2 units: no interaction is testable"
    if math.isnan(sigma):
        return (f"{head}; detectable with 80% power: \u00b1{per_sigma:.2f} x sigma points (sigma, the per-unit sd, "
                f"unknown until runs exist: no completed records of these tasks and rows under {results_dir})")
    return (f"{head}; detectable with 80% power: \u00b1{per_sigma * sigma:.2f} points (\u00b1{per_sigma:.2f} x sigma, "
            f"sigma = {sigma:.2f} points: the per-unit sd of the completed records under {results_dir}, pooled over "
            f"their cells, {df} df)")
