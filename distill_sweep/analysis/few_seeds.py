"""The multi-bootstrap at few seeds: a small-sample guard on its interval and p.

The multi-bootstrap (example_stats.multi_bootstrap; Sellam et al. 2022) resamples the S seeds a pair ran and
the dev examples together. Its seed part is a percentile bootstrap of a mean over S values, which at S = 2 to
5 undercovers as the percentile bootstrap of a cell's mean does (75-83% at n = 3-5, tests/unit/analysis/
test_coverage.py): it cannot show the spread the seeds did not happen to show, and it shrinks their variance
by (S - 1) / S. With a large seed effect it called two equal methods different in 10% of pairs at 2 seeds and
6.8% at 3 (nominal 5%).

The guard takes, with the multi-bootstrap, the Student t-test of the S per-seed differences (each on every
dev example): exact for normal seed effects at any S >= 2, but blind to the sampling of the dev examples,
which the multi-bootstrap covers. The report's p is the larger of the two and its interval the hull of both:
a difference is called only when both the seeds (as the t-test sees them) and the examples with the seeds
(as the multi-bootstrap sees them) carry it. So the seed component is covered at the t-test's rate and the
example component at the bootstrap's; at many seeds the t-interval is the narrower and the multi-bootstrap
decides alone. tests/unit/analysis/test_few_seeds.py checks the type-I error at 2 and 3 seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from distill_sweep.analysis import example_stats


def guarded(multi: dict[str, float], seed_diffs: Sequence[float], confidence: float = 0.95) -> dict[str, float]:
    """The multi-bootstrap's `multi` (diff, ci_low, ci_high, p) with the guard: p = max(its p, the t-test's of
    `seed_diffs`), the interval the hull of its and the t-interval of their mean. Adds p_bootstrap, p_seeds.
    Fewer than 2 seeds: no guard (there is no seed spread; the report does not print it as a multi-bootstrap)."""
    d = np.asarray(seed_diffs, dtype=float)
    out = {**multi, "p_bootstrap": multi["p"], "p_seeds": math.nan}
    if len(d) < 2:
        return out
    sd = float(d.std(ddof=1))
    if sd == 0.0:  # every seed the same difference: the t-test has nothing to say, the bootstrap decides
        return out
    se = sd / math.sqrt(len(d))
    t = float(d.mean()) / se
    p_seeds = float(2.0 * sps.t.sf(abs(t), len(d) - 1))
    half = float(sps.t.ppf(0.5 + confidence / 2.0, len(d) - 1)) * se
    out.update(p=max(multi["p"], p_seeds), p_seeds=p_seeds, ci_low=min(multi["ci_low"], float(d.mean()) - half),
               ci_high=max(multi["ci_high"], float(d.mean()) + half))
    return out


def multi_bootstrap(preds_a: np.ndarray | Sequence[np.ndarray], preds_b: np.ndarray | Sequence[np.ndarray],
                    labels: np.ndarray, metric: str, confidence: float = 0.95, **kwargs: int) -> dict[str, float]:
    """example_stats.multi_bootstrap with the guard (`guarded`): what the report prints for a pair of S >= 2
    seeds. `preds_a`, `preds_b`: [S, N], or per seed its runs' [R, N] (example_stats.as_units). `kwargs`: its
    resamples and seed."""
    return contrast([(1.0, preds_a), (-1.0, preds_b)], labels, metric, confidence, **kwargs)


def contrast(arms: Sequence[tuple[float, np.ndarray | Sequence[np.ndarray]]], labels: np.ndarray, metric: str,
             confidence: float = 0.95, **kwargs: int) -> dict[str, float]:
    """example_stats.contrast_bootstrap with the guard: the same rule for a pair and for any contrast of the
    rows (the objective x init interaction), its per-seed values each unit's contrast on every dev example."""
    units = [(c, example_stats.as_units(p)) for c, p in arms]
    ones = np.ones((1, len(labels)))
    per_seed = [float(sum(c * example_stats.unit_metric(metric, u[s], labels, ones)[0] for c, u in units))
                for s in range(len(units[0][1]))]
    return guarded(example_stats.contrast_bootstrap(arms, labels, metric, confidence, **kwargs), per_seed, confidence)


def pooled_contrast(strata: Sequence[tuple[Sequence[tuple[float, np.ndarray | Sequence[np.ndarray]]], np.ndarray,
                                           str]], confidence: float = 0.95, **kwargs: int) -> dict[str, float]:
    """The guarded multi-bootstrap of a contrast pooled over tasks (example_stats.pooled_contrast_bootstrap), its
    guard the t-test of every (task, seed) unit's contrast: the check a claim pooled over tasks passes before it
    is called (a pair of rows, the objective x init interaction)."""
    multi, units = example_stats.pooled_contrast_bootstrap(strata, confidence, **kwargs)
    return guarded(multi, units, confidence)
