"""Every verdict the report prints holds its false-positive rate at the seed counts it is printed for.

Seeded simulations of two identical systems (normal seed scores) through the report's own functions: the
paired t-test's "significant", ASO's "almost stochastically better" with its calibrated threshold, the tables'
bold "best". A verdict's rate may exceed its nominal level only by Monte Carlo error (3 standard errors).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from distill_sweep.analysis import aso, aso_calibration, aso_null, stats
from distill_sweep.report import tables

ALPHA = 0.05
REPS = 2_000


def _limit(rate: float, reps: int = REPS, nominal: float = ALPHA) -> float:
    return nominal + 3.0 * math.sqrt(nominal * (1.0 - nominal) / reps)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_aso_verdict_false_positive_rate_at_most_alpha(n: int) -> None:
    """Two identical systems: the ASO verdict (either direction) in at most alpha of the pairs. Before the
    calibration, eps_min < 0.2 called one better in 33% of them at 2 seeds, 20% at 3, 15% at 4, 10% at 5."""
    rng = np.random.default_rng(100 + n)
    limit = aso.aso_limit(n, ALPHA / 2.0)  # one pair (m = 1), per direction, as paired_tests asks
    called = 0
    old = 0
    for _ in range(REPS):
        ab, ba = aso.aso_both(rng.standard_normal(n), rng.standard_normal(n), aso_null.ASO_ALPHA)
        called += (ab < limit) or (ba < limit)
        old += (ab < 0.2) or (ba < 0.2)
    assert called / REPS <= _limit(called / REPS)
    assert old / REPS > 0.08  # the uncalibrated rule was wrong here: the test would catch it


def test_paired_tests_apply_the_calibrated_rule() -> None:
    """paired_tests' verdict is eps_min < aso_limit(n, alpha / (2 m)); at 2 and 3 seeds no verdict is possible
    even when every A is above every B (eps_min = 0)."""
    for n in (2, 3):
        rows = [("A", "rte", s, 90.0 + s) for s in range(n)] + [("B", "rte", s, 70.0 + s + 0.1 * s * s)
                                                                  for s in range(n)]
        got = stats.paired_tests(pd.DataFrame(rows, columns=["system", "task", "seed", "value"])).iloc[0]
        assert got["aso_ab"] == 0.0 and got["aso_limit"] == 0.0 and got["aso_better"] == ""
    rows = [("A", "rte", s, 90.0 + s) for s in range(6)] + [("B", "rte", s, 70.0 + s + 0.1 * s * s) for s in range(6)]
    got = stats.paired_tests(pd.DataFrame(rows, columns=["system", "task", "seed", "value"])).iloc[0]
    assert got["aso_limit"] == pytest.approx(min(0.2, aso_null.THRESHOLDS[6][0.025]))
    assert got["aso_better"] == "A"


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_t_test_significance_false_positive_rate(n: int) -> None:
    rng = np.random.default_rng(200 + n)
    seed_effect = rng.standard_normal((REPS, n)) * 2.0  # a seed moves both systems alike (paired)
    a = seed_effect + rng.standard_normal((REPS, n))
    b = seed_effect + rng.standard_normal((REPS, n))
    rate = np.mean([stats.paired_ttest(x, y)[1] < ALPHA for x, y in zip(a, b, strict=True)])
    assert rate <= _limit(rate)


def _rows(means: list[float]) -> list[tables.Row]:
    return [tables.Row((f"r{i}",), "", {"rte": tables.Cell(m, 1.0, 3)}, system=f"r{i}") for i, m in enumerate(means)]


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
@pytest.mark.parametrize("n", [2, 3, 5])
def test_bold_best_false_positive_rate(n: int) -> None:
    """Two identical rows: the best of a column is bold in at most alpha of the tables (before: always)."""
    rng = np.random.default_rng(300 + n)
    reps = 600
    bold = 0
    for _ in range(reps):
        values = rng.standard_normal((2, n))
        scores = pd.DataFrame([(f"r{i}", "rte", s, values[i, s]) for i in range(2) for s in range(n)],
                              columns=["system", "task", "seed", "value"])
        rows = _rows([float(values[0].mean()), float(values[1].mean())])
        lookup = tables.score_lookup(scores, lambda r: (r.system,), ("system",), ("rte",))
        tables.mark_best(rows, ["rte"], lookup, ALPHA)
        bold += any(r.cells["rte"].bold for r in rows)
    assert bold / reps <= _limit(bold / reps, reps)


def test_bold_only_when_the_best_beats_the_runner_up() -> None:
    """A clear winner on matched seeds is bold; a 0.1-point lead over a noisy runner-up is not; the footnote
    names the test and the family."""
    scores = pd.DataFrame([("r0", "rte", s, v) for s, v in enumerate([90.0, 91.0, 92.0, 93.0])]
                          + [("r1", "rte", s, v) for s, v in enumerate([80.0, 81.2, 81.9, 83.1])]
                          + [("r2", "rte", s, v) for s, v in enumerate([70.0, 71.0, 72.0, 73.0])],
                          columns=["system", "task", "seed", "value"])
    rows = _rows([91.5, 81.55, 71.5])
    note = tables.mark_best(rows, ["rte"], tables.score_lookup(scores, lambda r: (r.system,), ("system",), ("rte",)))
    assert [r.cells["rte"].bold for r in rows] == [True, False, False]
    assert "runner-up" in note and "Holm over the table's 1" in note
    close = pd.DataFrame([("r0", "rte", s, v) for s, v in enumerate([90.0, 95.0, 85.0])]
                         + [("r1", "rte", s, v) for s, v in enumerate([89.9, 94.0, 86.0])],
                         columns=["system", "task", "seed", "value"])
    rows = _rows([90.0, 89.97])
    tables.mark_best(rows, ["rte"], tables.score_lookup(close, lambda r: (r.system,), ("system",), ("rte",)))
    assert not any(r.cells["rte"].bold for r in rows)
    rows = _rows([90.0, 89.97])
    assert "no best marked" in tables.mark_best(rows, ["rte"])  # no scores: no test, nothing bold
    assert not any(r.cells["rte"].bold for r in rows)


def test_calibrated_thresholds_reproduce() -> None:
    """The stored table is what aso_calibration computes: a few entries again with fewer replications, equal
    within Monte Carlo error (the quantile's own spread, from the binomial); n = 2 is exactly 0 (P(every A above
    every B) = 1/6 > 0.05, where eps_min = 0)."""
    eps = aso_calibration.null_eps(4, 3_000, seed=7)
    got = aso_calibration.thresholds(eps, [0.05])[0.05]
    se = math.sqrt(0.05 * 0.95 / eps.size)
    lo, hi = np.quantile(eps, [max(0.0, 0.05 - 3 * se), 0.05 + 3 * se], method="inverted_cdf")
    assert lo <= aso_null.THRESHOLDS[4][0.05] <= hi
    assert got == pytest.approx(aso_null.THRESHOLDS[4][0.05], abs=hi - lo)
    assert all(v == 0.0 for v in aso_null.THRESHOLDS[2].values())
    assert aso_null.min_n(0.025) == 4 and aso_null.min_n(0.0025) == 6
    assert aso_null.threshold(30, 0.05) == aso_null.THRESHOLDS[20][0.05]  # beyond the table: its largest n
    assert aso_null.threshold(9, 0.004) == aso_null.THRESHOLDS[8][0.0025]  # the next stricter entry


def test_dz_interval_covers_the_true_effect() -> None:
    """The noncentral-t interval of d_z holds the true d in about 95% of 3-seed pilots (seeded, 400 draws)."""
    rng = np.random.default_rng(11)
    reps, n, d = 400, 3, 0.5
    hits = 0
    for _ in range(reps):
        diffs = d + rng.standard_normal(n)
        lo, hi = stats.dz_interval(n, float(diffs.mean() / diffs.std(ddof=1)))
        hits += lo <= d <= hi
    assert abs(hits / reps - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / reps)


def _power(d: float, n: int, alpha: float) -> float:
    from scipy import stats as sps

    crit = sps.t.ppf(1 - alpha / 2, n - 1)
    return float(sps.nct.sf(crit, n - 1, d * math.sqrt(n)) + sps.nct.cdf(-crit, n - 1, d * math.sqrt(n)))


def test_paired_tests_seeds_are_a_range_at_holms_first_step() -> None:
    """Three rows, three testable pairs: seeds needed at alpha / 3, from the far end of d's interval (fewest) to
    the near end (inf when the interval holds 0); the table prints the range, never one integer."""
    from distill_sweep.report.render import tests_rows

    rng = np.random.default_rng(12)
    rows = [(name, "rte", s, 80.0 + shift + rng.normal()) for name, shift in (("A", 2.0), ("B", 0.0), ("C", 1.0))
            for s in range(4)]
    tests = stats.paired_tests(pd.DataFrame(rows, columns=["system", "task", "seed", "value"]), levels=["A", "B", "C"])
    for r in tests.to_dict("records"):
        lo, hi = stats.dz_interval(4, r["d"], 0.95)
        far = max(abs(lo), abs(hi))
        assert r["seeds_low"] == next(k for k in range(2, 10_000) if _power(far, k, 0.05 / 3) >= 0.8)
        if lo <= 0 <= hi:
            assert r["seeds_high"] == math.inf
    _, printed = tests_rows(tests, [])
    assert all("\u2013" in line[-2] or line[-2] in ("never", "\u2014") for line in printed)


@pytest.mark.parametrize("argv", [["--reps", "0"], ["--ns", "1"], ["--reps", "x"]])
def test_the_calibration_command_refuses_bad_sizes_in_one_line(argv: list[str],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from distill_sweep.analysis import aso_calibration

    with pytest.raises(SystemExit) as exit_:
        aso_calibration.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and err[-1].startswith("python -m distill_sweep.analysis.aso_calibration: error:")
