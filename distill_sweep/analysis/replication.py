"""The unit of replication: a task's master seed.

A grid may cross the master seed (`seed=1,2,3`) with another source's seed (`seeds.data_order=1,2`,
`seeds.dropout=...`): one cell then holds several runs per master seed. Those runs are repeated measures of one
unit, not independent draws: they share the master seed's initial weights (and whatever else follows it), so
treating the 6 runs of a 3 x 2 crossing as 6 independent scores makes a cell's 95% t-interval cover 69-81% and the
objective x init interaction test reject 18% of true nulls (tests/unit/analysis/test_replication.py simulates both).

The report's choice, everywhere a statistic pools or pairs runs (cells, paired tests and their intervals, the
best-vs-runner-up tests, the interaction, the multi-bootstrap, compare's pairing): average the runs of one unit
first, then treat the unit means as the sample. It is exact for the usual t-based statistics whatever the
correlation within a unit (the unit means are independent given the sub-seed levels), needs no variance model, and
gives the same point estimate as the run mean on a complete crossing. A mixed model would gain only the degrees of
freedom of the within-unit spread, which carries no information about the master seed's variance.

What it covers: the sub-seed values a grid crosses (data orders 1 and 2) are the same for every master seed, so
they are fixed levels, like the teacher and the dev set; an interval says how the score moves with the master seed,
averaged over those sub-seed values. Varying a source with the master seed (the default `seeds` block) puts it
inside the unit's variation instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

UNIT = "seed"  # the scores frame's column naming a run's unit within its task: the master seed


def unit_means(scores_df: pd.DataFrame, keys: Sequence[str], unit: str = UNIT) -> pd.DataFrame:
    """One row per unit: the mean `value` of the runs of each (keys..., unit), with `runs` (how many were averaged)
    and the other columns of the unit's first run (its path, metric). `keys` say what else a unit is in (a table
    row, a task, a metric); `unit` names it (the master seed; Tables 2 and 4: the distilled student). A frame with
    one run per unit comes back with runs = 1 and its values unchanged."""
    by = [*dict.fromkeys([*keys, unit])]
    if scores_df.empty:
        return scores_df.assign(runs=pd.Series(dtype=int))
    grouped = scores_df.groupby(by, sort=False, dropna=False)
    first = grouped.head(1).set_index(by)
    first["value"] = grouped["value"].mean()
    first["runs"] = grouped["value"].count()
    return first.reset_index()[[*scores_df.columns, "runs"]]


def runs_per_unit(scores_df: pd.DataFrame, keys: Sequence[str], unit: str = UNIT) -> int:
    """The most runs any unit of the frame holds (1: one run per master seed, nothing averaged)."""
    if scores_df.empty:
        return 1
    return int(scores_df.groupby([*dict.fromkeys([*keys, unit])], sort=False).size().max())
