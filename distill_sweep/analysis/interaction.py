"""Table 3's claim tested as what it is: an objective x init interaction ("the initialisation matters for some
objectives and not for others"), not a test of each row's inits.

The init effect of an objective A for the inits x, y is A_x - A_y, the difference of its scores at one (task, seed)
unit. For two objectives A, B the interaction contrast of a unit is the difference of differences

    d = (A_x - A_y) - (B_x - B_y)

over the units where all four runs completed. Its test is the one-sample t-test of d against 0 (the paired t-test
of the two init effects, `stats.paired_ttest`), with the Student t-interval of mean(d) (`stats.paired_t_ci`) at
confidence 1 - alpha, so the interval excludes 0 exactly when p < alpha. Every pair of inits is tested, not the best
against the worst: picking the inits from the same scores would make the contrast as large as the data allow, and
its p too small. The contrasts of three inits are linearly dependent (x-z = (x-y) + (y-z)); Holm's correction holds
under any dependence. Units are pooled over tasks as the table's other t-tests pool them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from distill_sweep.analysis import replication
from distill_sweep.analysis.paper import GLUE_TASKS
from distill_sweep.analysis.stats import detectable_effect, holm, paired_t_ci, paired_ttest

COLUMNS = ("a", "b", "init_x", "init_y", "n", "tasks", "effect_a", "effect_b", "diff", "ci_low", "ci_high", "t",
           "p", "p_holm", "significant_holm", "testable", "detectable", "note")


def init_interactions(scores_df: pd.DataFrame, systems: Sequence[str] | None = None,
                      inits: Sequence[str] | None = None, alpha: float = 0.05,
                      family_p: Sequence[float] = ()) -> pd.DataFrame:
    """One row per pair of systems (a, b) and pair of inits (init_x, init_y) of the scores frame (columns task,
    seed, system, init_label, value): n units, tasks pooled, effect_a / effect_b (mean init effect x - y of each
    over those units), diff (mean d), ci_low / ci_high (the 1 - alpha t-interval of diff), t, p, p_holm, note.

    `family_p`: the table's other p-values, corrected together with these in one Holm family (NaNs are left out
    of it); p_holm is each interaction test's adjusted p in that family. Rows without a p (under 2 units, d of zero
    variance) stay out of the family and say why. detectable: the interaction the contrast's n units would detect
    with 80% power at Holm's first-step level (stats.detectable_effect), what a contrast not called cannot rule
    out."""
    if scores_df.empty:
        return pd.DataFrame(columns=COLUMNS)
    # a unit is a task's master seed: the runs of one master seed that vary another source's seed are repeated
    # measures, averaged (the pivot's mean) before the contrast; each its own unit made the test reject 18% of
    # true nulls on a 3 x 2 crossing (analysis/replication.py)
    wide = (scores_df.groupby(["task", replication.UNIT, "system", "init_label"])["value"].mean()
            .unstack(["system", "init_label"]))  # a pivot's mean, in a third of pivot_table's time
    present_systems = list(dict.fromkeys(scores_df["system"]))
    present_inits = list(dict.fromkeys(scores_df["init_label"]))
    system_list = [s for s in (systems or present_systems) if s in present_systems]
    init_list = [i for i in (inits or present_inits) if i in present_inits]
    tasks = wide.index.get_level_values("task").to_numpy()
    rows = [_contrast(wide, tasks, a, b, x, y, alpha)
            for a, b in combinations(system_list, 2) for x, y in combinations(init_list, 2)]
    out = pd.DataFrame(rows, columns=[*(c for c in COLUMNS if c not in ("p_holm", "significant_holm", "testable",
                                                                         "detectable")), "_sd"])
    p = out["p"].to_numpy(dtype=float)
    family = np.concatenate([p, np.asarray(list(family_p), dtype=float)])
    out["p_holm"] = holm(family)[: len(p)] if len(p) else []
    out["significant_holm"] = out["p_holm"] < alpha
    out["testable"] = out["p"].notna()
    # what a contrast that is not called cannot rule out: the interaction its n units detect with 80% power at
    # Holm's first-step level over the family, at the contrasts' observed spread
    tested = int((~np.isnan(family)).sum())
    out["detectable"] = [detectable(int(n), float(sd), tested, alpha) if ok else math.nan
                         for n, sd, ok in zip(out["n"], out["_sd"], out["testable"], strict=True)]
    return out[list(COLUMNS)]


def detectable(n: int, contrast_sd: float, family: int, alpha: float = 0.05) -> float:
    """The interaction (in points) that n units whose contrasts d have standard deviation `contrast_sd` detect with
    80% power at Holm's first-step level alpha / family (stats.detectable_effect): the one formula the report's
    Table 3 note and the dry run's power line (analysis/interaction_power.py) both state."""
    return detectable_effect(n, contrast_sd, alpha / max(1, family))


def family_size(systems: int, inits: int, tasks: Sequence[str] = ("task",), baseline: bool = False) -> int:
    """The Holm family Table 3 tests on a full grid of `systems` rows x `inits` inits over `tasks` (report/build.py,
    report/tables.py's join_family): every pair of inits within each row; every pair of rows x every pair of inits
    as an interaction contrast; bold's best-vs-runner-up test in each row's task columns and Avg, less those that
    are a pooled test's twin (tables.twin_columns: the one task of a one-task table, the Avg over the GLUE tasks
    alone); and, where the grid has the baseline row (`baseline`: the no-KD row), each other row's difference-map
    cell against it at every init and column. tests/unit/analysis/test_interaction_power.py holds it to the
    report's own count."""
    init_pairs = inits * (inits - 1) // 2
    names = list(dict.fromkeys(tasks))
    avg = set(GLUE_TASKS) <= set(names)  # the Avg column is shown only with every GLUE task
    twins = (names if len(names) == 1 else []) + (["avg"] if avg and set(names) <= set(GLUE_TASKS) else [])
    columns = [*names, *(["avg"] if avg else [])]
    bold = systems * sum(col not in twins for col in columns) if inits > 1 else 0
    difference_map = (systems - 1) * inits * len(columns) if baseline else 0
    return systems * init_pairs + systems * (systems - 1) // 2 * init_pairs + bold + difference_map


def _column(wide: pd.DataFrame, system: str, init: str) -> np.ndarray:
    key = (system, init)
    return wide[key].to_numpy(dtype=float) if key in wide.columns else np.full(len(wide), np.nan)


def _contrast(wide: pd.DataFrame, tasks: np.ndarray, a: str, b: str, x: str, y: str, alpha: float
              ) -> dict[str, Any]:
    ax, ay, bx, by = (_column(wide, s, i) for s, i in ((a, x), (a, y), (b, x), (b, y)))
    both = ~(np.isnan(ax) | np.isnan(ay) | np.isnan(bx) | np.isnan(by))
    effect_a, effect_b = (ax - ay)[both], (bx - by)[both]
    t, p, note = paired_ttest(effect_a, effect_b)
    lo, hi = paired_t_ci(effect_a, effect_b, 1.0 - alpha)
    n = int(both.sum())
    return {"a": a, "b": b, "init_x": x, "init_y": y, "n": n, "tasks": len(set(tasks[both])),
            "effect_a": float(effect_a.mean()) if n else math.nan,
            "effect_b": float(effect_b.mean()) if n else math.nan,
            "diff": float((effect_a - effect_b).mean()) if n else math.nan,
            "ci_low": lo, "ci_high": hi, "t": t, "p": p,
            "_sd": float((effect_a - effect_b).std(ddof=1)) if n > 1 else math.nan,
            "note": note if n else "no (task, seed) with all four runs completed"}
