"""One Holm family per table for every verdict on its rows: bold in each task column and the Avg, the difference
map's stars against the baseline, and the pooled paired t-test. Each at its own 5% (bold and the map in families of
their own, the pooled test in another) named a winner between two identical systems 8-9% of the time; in one
family, at most alpha.

A seeded simulation of two identical systems on the 7 GLUE tasks (seed sd 0.2-2.0 points by task), the second the
difference map's baseline: raw p-values as stats.paired_ttest computes them (scipy's paired t-test, vectorised),
corrected by the report's own functions (tables.holm_with_twins with tables.twin_columns' twins, stats.holm) in the
family tables.join_family builds; a few replications go through the report's table, join_family, paired_tests and
figures.baseline_tests themselves to show they compose so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from distill_sweep.analysis import stats
from distill_sweep.analysis.paper import GLUE_TASKS
from distill_sweep.report import figures
from distill_sweep.report.tables import Cell, Row, Table, holm_with_twins, join_family, others, score_lookup

ALPHA = 0.05
SPREADS = np.linspace(0.2, 2.0, len(GLUE_TASKS))  # the seed sd of each task, in points
COLUMNS = [*GLUE_TASKS, "avg"]


def _scores(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two identical systems: [reps, tasks, n] scores each, a task's seeds around the task's own level."""
    level = 80.0 + 5.0 * rng.standard_normal((reps, len(GLUE_TASKS), 1))
    noise = SPREADS[None, :, None]
    return (level + noise * rng.standard_normal((reps, len(GLUE_TASKS), n)),
            level + noise * rng.standard_normal((reps, len(GLUE_TASKS), n)))


def _raw_p(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[reps, 8]: each task's paired t-test on its seeds, then the test over every (task, seed) pair (the Avg's,
    and the pooled test's: the same pairs)."""
    per_task = sps.ttest_rel(a, b, axis=2).pvalue
    reps = a.shape[0]
    pooled = sps.ttest_rel(a.reshape(reps, -1), b.reshape(reps, -1), axis=1).pvalue
    return np.column_stack([per_task, pooled])


def _any_verdict(p: np.ndarray) -> tuple[bool, bool]:
    """One replication's (any verdict in one family, any verdict in the three families as they were)."""
    twin = [False] * len(GLUE_TASKS) + [True]  # the Avg over every task: the pooled test's twin
    counted = list(p[:-1])
    bold = holm_with_twins(list(p), twin, [*counted, p[-1]])  # the others: the map's cells and the pooled test
    heat = holm_with_twins(list(p), twin, [*counted, p[-1]])  # the others: bold's and the pooled test
    pooled = stats.holm([p[-1], *counted, *counted])[0]
    one = min(bold) < ALPHA or min(heat) < ALPHA or pooled < ALPHA
    before = min(stats.holm(list(p))) < ALPHA or p[-1] < ALPHA  # bold's and the map's own family (the same
    # tests here), and the pooled test alone
    return one, before


def test_any_verdict_on_a_pair_at_most_alpha() -> None:
    """2,000 seeded replications at 4 seeds per task (Monte Carlo error sqrt(0.05 x 0.95 / 2000) = 0.49 points):
    any verdict in one family 2.95%; in the families as they were 8.45% (20,000 replications each at 2 / 3 / 5 seeds:
    2.4 / 2.5 / 2.5% against 8.2 / 8.6 / 9.0%)."""
    rng = np.random.default_rng(2050)
    raw = _raw_p(*_scores(rng, 2000, 4))
    got = np.array([_any_verdict(p) for p in raw])
    one, before = got.mean(axis=0)
    assert one <= 0.055, one
    assert before > 0.055, before  # the issue's ~2 alpha: each family at its level, their union above it


def _table(a: np.ndarray, b: np.ndarray) -> Table:
    """Table 1 of the two systems (B the baseline), cells and scores as build_table makes them."""
    frame = pd.DataFrame([(system, task, seed, v[t, seed]) for system, v in (("A", a), ("B", b))
                          for t, task in enumerate(GLUE_TASKS) for seed in range(v.shape[1])],
                         columns=["system", "task", "seed", "value"])
    rows = []
    for system, v in (("A", a), ("B", b)):
        cells = {task: Cell(float(v[t].mean()), float(v[t].std(ddof=1)), v.shape[1])
                 for t, task in enumerate(GLUE_TASKS)}
        cells["avg"] = Cell(float(v.mean()), np.nan, 1)
        rows.append(Row(labels=(system,), group="", cells=cells, init="1", system=system))
    table = Table(key="table1", title="t", row_headers=["Objective"], tasks=list(GLUE_TASKS),
                  metrics=dict.fromkeys(GLUE_TASKS, "accuracy"), rows=rows)
    table.scores = score_lookup(frame.assign(init_label="1"), lambda r: (r.system, r.init), ("system", "init_label"),
                                table.avg_tasks)
    return table, frame


def test_the_report_composes_the_family() -> None:
    """Replications with and without a verdict, through the report's functions: bold, the map's stars and the
    pooled test's Holm p agree with the composition above."""
    rng = np.random.default_rng(7)
    a, b = _scores(rng, 400, 4)
    raw = _raw_p(a, b)
    verdict = np.array([_any_verdict(p)[0] for p in raw])
    picked = [*np.flatnonzero(verdict)[:3], *np.flatnonzero(~verdict)[:2]]
    assert len(picked) == 5
    for r in picked:
        table, frame = _table(a[r], b[r])
        join_family(table, "B", ALPHA, True, pooled=[])
        tests = stats.paired_tests(frame, "system", (), ALPHA, levels=["A", "B"], family_extra=others(table, "pooled"))
        join_family(table, "B", ALPHA, True, pooled=tests["p"].tolist())
        assert len([p for p in others(table, "pooled") if not np.isnan(p)]) == 14  # 7 bold and 7 map cells
        assert tests["p"].iloc[0] == np.float64(raw[r, -1]).item() or abs(tests["p"].iloc[0] - raw[r, -1]) < 1e-12
        bold = any(c.bold for row in table.rows for c in row.cells.values())
        base = {row.init: row for row in table.rows if row.system == "B"}
        stars, _ = figures.baseline_tests(table, base, COLUMNS, ALPHA)
        reported = bold or bool(tests["significant_holm"].iloc[0]) or any(any(line) for line in stars)
        assert reported == bool(verdict[r])


def test_a_layouts_bold_and_its_tests_in_one_family() -> None:
    """A layout (report/layout_table.py) as the BiLSTM one on a task: 2 students x 3 KD rows, all identical, each
    row tested against its student's vanilla KD row (4 pairs) and bold per student (best vs runner-up, 2 tests).
    4,000 seeded replications at 4 seeds (Monte Carlo error 0.35 points): in one family with no twins (the
    layout tests only its pairs: join_family's pooled_every_pair=False) any verdict 3.8%; bold and the tests in
    families of their own, 6.5%."""
    rng = np.random.default_rng(49)
    reps, n = 4000, 4
    x = 80.0 + rng.standard_normal((reps, 2, 3, n))  # [rep, student, KD row (0: vanilla KD), seed]
    pairs = np.stack([sps.ttest_rel(x[:, g, k], x[:, g, 0], axis=-1).pvalue for g in (0, 1) for k in (1, 2)], axis=1)
    order = np.argsort(-x.mean(axis=3), axis=2)  # [rep, student, rows by mean, best first]
    pick = np.take_along_axis(x, order[..., None], axis=2)
    bold = sps.ttest_rel(pick[:, :, 0], pick[:, :, 1], axis=-1).pvalue  # [rep, student]
    one = [min(holm_with_twins(list(b), [False, False], list(p))) < ALPHA
           or min(stats.holm([*p, *b])[:4]) < ALPHA for p, b in zip(pairs, bold, strict=True)]
    apart = [min(stats.holm(list(b))) < ALPHA or min(stats.holm(list(p))) < ALPHA
             for p, b in zip(pairs, bold, strict=True)]
    assert np.mean(one) <= 0.05, np.mean(one)
    assert np.mean(apart) > 0.055, np.mean(apart)
