"""Almost stochastic order (ASO): whether one row's scores over seeds are almost stochastically better than
another's, for the report's paired tests (stats.paired_tests). Pure functions: no printing, no files.

ASO (Dror et al. 2019, as deepsig 1.2 computes it, vectorised): eps_min that A is better than B, at
deepsig's default confidence 0.95 (aso_null.ASO_ALPHA). eps_min is not a p-value: under two identical
systems it is below the customary 0.2 in a third of the pairs at 2 seeds and 6% at 10. So the verdict
"almost stochastically better" takes eps_min < the threshold calibrated under the null at the pair's n and
at level alpha / m over the family's m testable pairs (Bonferroni; analysis/aso_null.py, computed by
analysis/aso_calibration.py), never above 0.2; where that threshold is 0 no verdict is possible at that n.
`aso_both(..., comparisons=m)` still gives deepsig's Bonferroni-corrected eps_min for callers that want it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from distill_sweep.analysis import aso_null

ASO_THRESHOLD = 0.2  # eps_min below this: A almost stochastically better than B (Ulmer et al. 2022's advice)
ASO_ITERATIONS = 1000  # deepsig's default bootstrap iterations
ASO_DT = 0.005  # deepsig's default integration step over the quantiles
ASO_SEED = 0  # the bootstrap resamples' random seed: the same store gives the same report


def bonferroni_alpha(alpha: float, comparisons: int) -> float:
    """The per-comparison level of a Bonferroni family of `comparisons` (statsmodels' `multipletests`, its
    `alphacBonf`): what ASO's confidence level is corrected with."""
    if comparisons <= 1:
        return alpha
    from statsmodels.stats.multitest import multipletests  # a second to import: only the report needs it

    return float(multipletests(np.ones(comparisons), alpha=alpha, method="bonferroni")[3])


def aso_limit(n: int, level: float) -> float:
    """The eps_min below which a pair of n matched seeds is called almost stochastically better at `level`
    (aso_null: the null's calibrated threshold, never above ASO_THRESHOLD); 0 = no verdict possible."""
    return min(ASO_THRESHOLD, aso_null.threshold(n, level))


def aso_min_n(level: float) -> int | None:
    """The fewest matched pairs at which ASO can give a verdict at `level` (None: not within the table)."""
    return aso_null.min_n(level)


@functools.lru_cache(maxsize=256)
def _segments(n_a: int, n_b: int, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """deepsig's integration grid t = dt, 2 dt, ... < 1, grouped: its empirical quantile functions
    (sorted[ceil(n t) - 1]) are constant between jumps, so the grid's sums are sums over the (index in A,
    index in B) pairs it visits, each weighted by dt times its grid points (the violation part leaves the first
    grid point out, as deepsig does). Returns (A's indices, B's indices, total weights, violation weights)."""
    grid = np.arange(dt, 1, dt)
    ia = np.clip(np.ceil(n_a * grid).astype(int) - 1, 0, n_a - 1)
    ib = np.clip(np.ceil(n_b * grid).astype(int) - 1, 0, n_b - 1)
    keys, inverse = np.unique(ia * n_b + ib, return_inverse=True)
    total = np.bincount(inverse, minlength=len(keys)) * dt
    violation = np.bincount(inverse[1:], minlength=len(keys)) * dt
    return keys // n_b, keys % n_b, total, violation


def _violation_ratio(f: np.ndarray, g: np.ndarray, total_w: np.ndarray, violation_w: np.ndarray) -> np.ndarray:
    """deepsig's e_W2 from the quantiles at the grid's segments: the share of the squared Wasserstein
    distance where A's quantile is below B's (0.5 when the distance is 0)."""
    diff2 = (g - f) ** 2
    total = diff2 @ total_w
    part = np.where(f >= g, 0.0, diff2) @ violation_w
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total == 0.0, 0.5, part / np.where(total == 0.0, 1.0, total))


def aso_both(a: Sequence[float], b: Sequence[float], alpha: float = 0.05, comparisons: int = 1,
             iterations: int = ASO_ITERATIONS, dt: float = ASO_DT, seed: int = ASO_SEED) -> tuple[float, float]:
    """Almost stochastic order both ways: (eps_min that A is better than B, eps_min that B is better than A),
    at confidence 1 - alpha / comparisons (Bonferroni: `bonferroni_alpha`), higher scores better. deepsig
    1.2's algorithm in numpy: the violation ratio of the empirical quantile functions, its spread over
    `iterations` bootstrap resamples (the same resamples for both ways),
    eps_min = clip(ratio - sigma / c * Phi^-1(alpha'), 0, 1) with c = sqrt(n_a n_b / (n_a + n_b)). NaNs without scores on either side."""
    x = np.sort(np.asarray(a, dtype=float))
    y = np.sort(np.asarray(b, dtype=float))
    if len(x) == 0 or len(y) == 0:
        return math.nan, math.nan
    ia, ib, total_w, violation_w = _segments(len(x), len(y), dt)
    rng = np.random.default_rng(seed)
    xs = np.sort(x[rng.integers(0, len(x), size=(iterations, len(x)))], axis=1)[:, ia]
    ys = np.sort(y[rng.integers(0, len(y), size=(iterations, len(y)))], axis=1)[:, ib]
    const = math.sqrt(len(x) * len(y) / (len(x) + len(y)))
    margin = sps.norm.ppf(bonferroni_alpha(alpha, comparisons)) / const  # Phi^-1(1 - level) < 0
    out = []
    for f, g, fs, gs in ((x[ia], y[ib], xs, ys), (y[ib], x[ia], ys, xs)):
        ratio = float(_violation_ratio(f, g, total_w, violation_w))
        sigma = float(np.std(const * (_violation_ratio(fs, gs, total_w, violation_w) - ratio)))
        out.append(float(np.clip(ratio - sigma * margin, 0.0, 1.0)))
    return out[0], out[1]


def aso(a: Sequence[float], b: Sequence[float], alpha: float = 0.05, comparisons: int = 1,
        iterations: int = ASO_ITERATIONS, dt: float = ASO_DT, seed: int = ASO_SEED) -> float:
    """eps_min that A is almost stochastically better than B (see `aso_both`); below ASO_THRESHOLD: better."""
    return aso_both(a, b, alpha, comparisons, iterations, dt, seed)[0]


def centred_by_task(codes: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Matched scores x, y with each task's mean over both subtracted (`codes`: the pairs' task codes): pooled
    over tasks, ASO then compares the two rows and not the tasks' different levels (one task: no change, ASO is
    shift-invariant)."""
    _, codes = np.unique(codes, return_inverse=True)
    centre = (np.bincount(codes, x + y) / (2.0 * np.bincount(codes)))[codes]
    return x - centre, y - centre
