"""One verdict per pair: the chance that the report names a winner between two identical systems by any of its
verdicts for that pair (the Holm t-test, which also sets bold, and ASO's "almost stochastically better") is at
most alpha, on one task and pooled over 7 tasks with unequal seed spreads.

Seeded simulations through the functions paired_tests composes (scipy's paired t-test as stats.paired_ttest runs
it, aso.aso_both on stats' centred_by_task scores, aso.aso_limit at the pair's n and alpha / 2 per direction,
stats.aso_verdicts); a few replications go through paired_tests itself to show it composes them so. Beside each
rate, ASO's verdict as it was (at its own level, whatever the t-test says), which the test shows over the limit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from distill_sweep.analysis import aso, aso_null, stats

ALPHA = 0.05
SPREADS = np.linspace(0.2, 2.0, 7)  # the seed sd of each of 7 tasks, in points


def _scores(rng: np.random.Generator, reps: int, n: int, spreads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two identical systems: [reps, tasks, n] scores each, task t's seeds with sd spreads[t] around its own level."""
    level = 80.0 + 5.0 * rng.standard_normal((reps, len(spreads), 1))
    noise = spreads[None, :, None]
    return (level + noise * rng.standard_normal((reps, len(spreads), n)),
            level + noise * rng.standard_normal((reps, len(spreads), n)))


def _verdicts(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per replication: the t-test's verdict, ASO's under the report's rule, and ASO's alone (the old rule)."""
    reps, tasks, n = a.shape
    x, y = a.reshape(reps, -1), b.reshape(reps, -1)
    p = sps.ttest_rel(x, y, axis=1).pvalue  # a family of one pair: Holm's p is p
    called = p < ALPHA
    limit = aso.aso_limit(tasks * n, ALPHA / 2.0)
    codes = np.repeat(np.arange(tasks), n)
    eps = np.array([aso.aso_both(*aso.centred_by_task(codes, x[r], y[r]), aso_null.ASO_ALPHA) for r in range(reps)])
    diff = (x - y).mean(axis=1)
    ruled = np.array(stats.aso_verdicts(eps[:, 0], eps[:, 1], [limit] * reps, diff, called)) != ""
    alone = np.array(stats.aso_verdicts(eps[:, 0], eps[:, 1], [limit] * reps, diff, [True] * reps)) != ""
    return called, ruled, alone


def test_paired_tests_composes_the_rule() -> None:
    """The verdict columns of paired_tests equal the composition above (20 replications, 7 tasks x 4 seeds)."""
    rng = np.random.default_rng(1)
    a, b = _scores(rng, 20, 4, SPREADS)
    called, ruled, _ = _verdicts(a, b)
    for r in range(20):
        rows = [(system, t, s, v[r, t, s]) for system, v in (("A", a), ("B", b)) for t in range(7) for s in range(4)]
        got = stats.paired_tests(pd.DataFrame(rows, columns=["system", "task", "seed", "value"])).iloc[0]
        assert bool(got["significant_holm"]) == called[r] and (got["aso_better"] != "") == ruled[r]


@pytest.mark.parametrize(("tasks", "n", "reps"), [(1, 4, 2000), (1, 5, 2000), (7, 2, 2000), (7, 3, 2000),
                                                  (7, 4, 2000), (7, 5, 2000)])
def test_any_verdict_per_pair_at_most_alpha(tasks: int, n: int, reps: int) -> None:
    """2,000 seeded replications each: Monte Carlo error sqrt(0.05 x 0.95 / 2000) = 0.49 points. Measured rates of
    any verdict (the t-test's; ASO adds none): one task 5.05% (n = 4), 5.25% (n = 5); 7 tasks 4.45%, 3.85%,
    4.15%, 4.7% at 2-5 seeds per task; pooled ASO's own verdict 3.8%, 3.4%, 3.25%, 3.4%. ASO at its own level
    beside the t-test (the old rule): 8.1%, 7.75%; 11.65%, 9.15%, 7.65%, 7.0%."""
    rng = np.random.default_rng(50 + 10 * tasks + n)
    a, b = _scores(rng, reps, n, SPREADS[:tasks] if tasks > 1 else np.array([1.0]))
    called, ruled, alone = _verdicts(a, b)
    any_verdict = float((called | ruled).mean())
    assert not (ruled & ~called).any()  # ASO names no winner the t-test does not
    limit = 0.055 if tasks == 1 else 0.06  # the bounds: one task 5.5%; pooled ASO over 7 tasks 6%
    assert any_verdict <= limit, any_verdict
    assert float(ruled.mean()) <= limit  # pooled ASO's own verdict
    old = float((called | alone).mean())  # ASO at its own level beside the t-test, as before
    assert old >= any_verdict
    if (tasks, n) in ((1, 4), (7, 2), (7, 3)):  # the issue measured 8.6%, 10.4% and 10.1% there
        assert old > limit, old
