"""How `aso_null.THRESHOLDS` is computed: the null distribution of ASO's eps_min at n seeds per side.

ASO's eps_min (aso.aso_both) is not a p-value: under two identical systems it falls below the customary 0.2
far more often than 5% at few seeds (at n = 2, every A above every B happens with probability 1/6 and gives
eps_min = 0). So the report calls A almost stochastically better only when eps_min falls below the `level`
quantile of its distribution under the null, at the pair's n: the verdict then has a false-positive rate of
at most `level` when the seed scores are normal (eps_min is shift- and scale-invariant, so one standard
normal null serves every pair).

    python -m distill_sweep.analysis.aso_calibration > table.txt

prints the table `aso_null.py` holds (about three minutes on one core); tests/unit/analysis/test_verdicts.py
recomputes a few entries with fewer replications and checks they agree within Monte Carlo error.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from distill_sweep.analysis import aso, aso_null


def null_eps(n: int, reps: int, seed: int = 0) -> np.ndarray:
    """eps_min (A better than B, and B better than A: by symmetry both are draws of the same null) of
    `reps` pairs of two independent standard normal samples of n, as the report computes it
    (aso.aso_both at aso_null.ASO_ALPHA, no Bonferroni, aso.ASO_SEED): 2 * reps values."""
    rng = np.random.default_rng(seed)
    out = np.empty(2 * reps)
    for i in range(reps):
        out[2 * i : 2 * i + 2] = aso.aso_both(rng.standard_normal(n), rng.standard_normal(n), aso_null.ASO_ALPHA)
    return out


def thresholds(eps: np.ndarray, levels: Sequence[float]) -> dict[float, float]:
    """Per level, the largest t with P(eps < t) <= level in the sample: the lower `level` quantile (numpy's
    inverted_cdf). eps < t is then a verdict of rate <= level; t = 0 means no verdict is possible."""
    return {lv: float(np.quantile(eps, lv, method="inverted_cdf")) for lv in levels}


def table(ns: Sequence[int] = aso_null.NS, levels: Sequence[float] = aso_null.LEVELS, reps: int = aso_null.REPS,
          seed: int = aso_null.SEED) -> dict[int, dict[float, float]]:
    return {n: thresholds(null_eps(n, reps, seed + n), levels) for n in ns}


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m distill_sweep.analysis.aso_calibration",
                                     description="the null thresholds of ASO's verdict (aso_null.THRESHOLDS)")
    parser.add_argument("--ns", type=int, nargs="+", default=list(aso_null.NS), help="seeds per side")
    parser.add_argument("--reps", type=int, default=aso_null.REPS, help="pairs of null samples per n")
    args = parser.parse_args(argv)
    if args.reps < 1 or any(n < 2 for n in args.ns):
        parser.error("--reps must be >= 1 and every --ns >= 2")
    got = table(args.ns, reps=args.reps)
    sys.stdout.write("THRESHOLDS: dict[int, dict[float, float]] = {\n")
    for n, row in got.items():
        sys.stdout.write(f"    {n}: {{" + ", ".join(f"{lv}: {t:.4f}" for lv, t in row.items()) + "},\n")
    sys.stdout.write("}\n")


if __name__ == "__main__":
    main()
