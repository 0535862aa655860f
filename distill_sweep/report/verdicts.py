"""The words under a tests table: what each column covers, and which verdicts the seeds can carry.

A verdict is printed only where its false-positive rate under two identical systems is at most its nominal
level at the pair's n (tests/unit/analysis/test_verdicts.py simulates it): the t-test's "significant" (Holm),
ASO's "almost stochastically better" (its calibrated threshold, analysis/aso_null.py). Below that n the report
prints the statistic and says why there is no verdict. One verdict per pair: ASO's is given only beside a pair the
t-test calls (stats.aso_verdicts; tests/unit/analysis/test_one_verdict.py), and a called pair also passes the
multi-bootstrap's check where its runs keep dev predictions (report/checks.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from distill_sweep.analysis import aso, aso_null, seed_plan, stats


def family_level(testable: int, alpha: float) -> float:
    """Holm's first-step level alpha / m over the m testable pairs of a table (Bonferroni's per-pair level):
    the level seeds needed are planned at, and ASO's verdict's (split over its two directions)."""
    return alpha / max(1, testable)


def tests_legend(tests: pd.DataFrame, alpha: float, also: int = 0) -> list[str]:
    """The lines under a tests table's heading that say what its columns are (`also`: the table's other verdict
    tests in the same family, which ASO's Bonferroni and the seeds' level count too)."""
    m = int(tests["testable"].sum()) + also
    level = family_level(m, alpha)
    first = (f"{100 * (1 - alpha):g}% CI: the Student t-interval of mean(A-B) over the matched pairs that the paired "
             f"t-test inverts (it excludes 0 exactly when p < {alpha}); d: Cohen's d_z (mean / std of the differences); "
             "untestable pairs (fewer than 2 matched pairs, or differences of zero variance) get no CI, d, t, p, ASO "
             "or seeds (—)")
    if m == 0:  # no level to plan seeds at nor to calibrate ASO against (alpha/m would divide by none)
        return [first, "ASO and seeds: not computed, since no pair here can be tested; differences of zero variance "
                       "mean every matched seed gave the same difference, which no test can weigh"]
    return [
        first,
        f"ASO A>B, B>A: eps_min of almost stochastic order (Dror et al. 2019; deepsig's algorithm at confidence "
        f"{1 - aso_null.ASO_ALPHA:g}, on scores centred per task). eps_min is not a p-value: two identical systems give "
        f"eps_min < {aso.ASO_THRESHOLD} in a third of the pairs at 2 seeds, so the verdict takes eps_min below the "
        f"threshold calibrated under the null at the pair's n, at alpha / (2m) = {alpha}/(2 x {m}) per direction "
        f"(Bonferroni over the family's {m} testable tests and both directions; never above {aso.ASO_THRESHOLD}), and only "
        "beside a pair the t-test calls, in its direction: one verdict per pair, the t-test's, so two identical "
        f"systems are named a winner by any of them at most {alpha} of the time (pooled over tasks too)",
        f"seeds: the seeds per row a two-sided paired t-test needs for {stats.POWER:.0%} power at Holm's first-step "
        f"level alpha/m = {alpha}/{m} = {level:.3g}, over the {100 * (1 - alpha):g}% interval of d (noncentral t): "
        "from the interval's end farthest from 0 to its end nearest 0 (\u221e: d may be 0); not one integer, because "
        "a few seeds' d is itself uncertain",
    ]


def aso_verdict_text(records: Sequence[dict[str, Any]], within: Sequence[str], testable: int, alpha: float) -> str:
    """The line after a tests table: the pairs ASO calls almost stochastically better, and why others get none."""
    level = family_level(testable, alpha) / 2.0
    better = []
    for r in records:
        if r.get("aso_better"):
            prefix = " ".join(f"{r[w]}:" for w in within)
            win, lose = (r["a"], r["b"]) if r["aso_better"] == "A" else (r["b"], r["a"])
            better.append(f"{prefix} {win} over {lose}".strip())
    none_possible = [r for r in records if r.get("testable") and not (r.get("aso_limit", 0.0) > 0.0)]
    text = ("almost stochastically better (ASO, calibrated threshold, beside a pair the t-test calls): "
            + (", ".join(better) or "none"))
    if none_possible:
        first = aso_null.min_n(level)
        need = (f"at least {first} matched pairs" if first is not None else "more matched pairs than calibrated")
        text += (f"; no ASO verdict for {len(none_possible)} pair(s) with too few matched pairs: at this level "
                 f"({level:.3g} per direction) a verdict needs {need}, below that two identical systems are called "
                 "different too often; their eps_min is shown without a verdict")
    return text


fmt_seeds_range = seed_plan.seeds_range_text  # one home: the seed plan's text of a seeds-needed range
