"""The multi-bootstrap's small-sample guard (analysis/few_seeds.py): type-I error at 2 and 3 seeds with a large
seed effect, and the guard worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from distill_sweep.analysis import example_stats, few_seeds


@pytest.mark.slow  # thousands of simulated grids, seconds each
@pytest.mark.parametrize("seeds", [2, 3])
def test_type_one_error_at_few_seeds_with_a_large_seed_effect(seeds: int) -> None:
    """Two equal methods whose runs' accuracy varies by seed (sd 6 points) on 300 dev examples: the raw
    multi-bootstrap calls them different in about 19% (2 seeds) / 12% (3 seeds) of 400 pairs; the guarded one,
    which the report prints, at most 5.5% + Monte Carlo error."""
    rng = np.random.default_rng(40 + seeds)
    n, reps = 300, 400
    labels = rng.integers(0, 2, n)

    def run() -> np.ndarray:
        acc = np.clip(0.8 + 0.06 * rng.standard_normal(), 0.5, 0.99)
        return np.where(rng.random(n) < acc, labels, 1 - labels)

    raw = guarded = 0
    for _ in range(reps):
        a, b = np.stack([run() for _ in range(seeds)]), np.stack([run() for _ in range(seeds)])
        seed = int(rng.integers(1 << 30))
        got = few_seeds.multi_bootstrap(a, b, labels, "accuracy", resamples=300, seed=seed)
        raw += got["p_bootstrap"] < 0.05
        guarded += got["p"] < 0.05
    limit = 0.055 + 3 * math.sqrt(0.055 * 0.945 / reps)
    assert guarded / reps <= limit
    assert raw / reps > limit  # the unguarded multi-bootstrap fails here


def test_guard_by_hand() -> None:
    """p = max(bootstrap p, the t-test's of the per-seed differences); interval = hull of both."""
    multi = {"diff": 0.02, "ci_low": 0.01, "ci_high": 0.03, "p": 0.004}
    diffs = [0.01, 0.03]  # mean 0.02, sd 0.01414, se 0.01, t = 2 on 1 df
    got = few_seeds.guarded(multi, diffs)
    p_t = 2 * sps.t.sf(2.0, 1)
    half = sps.t.ppf(0.975, 1) * 0.01
    assert got["p_seeds"] == pytest.approx(p_t) and got["p"] == pytest.approx(p_t)
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((0.02 - half, 0.02 + half))
    assert got["p_bootstrap"] == 0.004
    one = few_seeds.guarded(multi, [0.02])  # one seed: nothing to guard with
    assert one["p"] == 0.004 and math.isnan(one["p_seeds"])


def test_guarded_multi_bootstrap_keeps_the_bootstrap_at_many_seeds() -> None:
    """Ten seeds of a steady +8-point difference: the t-test is far below the bootstrap p, which decides."""
    rng = np.random.default_rng(5)
    n = 400
    labels = rng.integers(0, 2, n)

    def run(acc: float) -> np.ndarray:
        return np.where(rng.random(n) < acc, labels, 1 - labels)

    a = np.stack([run(0.85) for _ in range(10)])
    b = np.stack([run(0.77) for _ in range(10)])
    got = few_seeds.multi_bootstrap(a, b, labels, "accuracy")
    plain = example_stats.multi_bootstrap(a, b, labels, "accuracy")
    assert got["p"] == plain["p"] and got["p_seeds"] < plain["p"]


def test_a_units_score_is_the_mean_of_its_runs() -> None:
    """A grid crossing another source's seed: each master seed holds several runs; the multi-bootstrap's unit score
    is the mean of its runs' (analysis/replication.py). With one run per unit it is the [S, N] form; its observed
    difference and its guard's per-seed t-test follow from the runs' accuracies by hand."""
    rng = np.random.default_rng(3)
    n = 200
    labels = rng.integers(0, 2, n)

    def run(acc: float) -> np.ndarray:
        return np.where(rng.random(n) < acc, labels, 1 - labels)

    a = [np.stack([run(0.8), run(0.7)]) for _ in range(3)]  # 3 master seeds x 2 runs
    b = [np.stack([run(0.7), run(0.7)]) for _ in range(3)]
    got = few_seeds.multi_bootstrap(a, b, labels, "accuracy", resamples=500)
    per_seed = [np.mean([np.mean(r == labels) for r in ua]) - np.mean([np.mean(r == labels) for r in ub])
                for ua, ub in zip(a, b, strict=True)]
    assert got["diff"] == pytest.approx(np.mean(per_seed))
    assert got["p_seeds"] == pytest.approx(sps.ttest_1samp(per_seed, 0.0).pvalue)
    one = [u[:1] for u in a], [u[:1] for u in b]  # one run per unit: the same as the [S, N] arrays
    stacked = np.stack([u[0] for u in a]), np.stack([u[0] for u in b])
    assert few_seeds.multi_bootstrap(*one, labels, "accuracy", resamples=500) == \
        few_seeds.multi_bootstrap(*stacked, labels, "accuracy", resamples=500)


def test_the_pooled_contrast_is_the_mean_over_every_tasks_units() -> None:
    """Pooled over tasks as the seed-level tests pool them: the observed contrast is the mean over all (task, seed)
    units, the guard the t-test of those units' contrasts; one task is `contrast` itself."""
    rng = np.random.default_rng(4)

    def task(n: int, seeds: int, acc_a: float) -> tuple[list, np.ndarray, str]:
        labels = rng.integers(0, 2, n)
        runs = [np.stack([np.where(rng.random(n) < acc, labels, 1 - labels) for _ in range(seeds)])
                for acc in (acc_a, 0.7)]
        return [(1.0, runs[0]), (-1.0, runs[1])], labels, "accuracy"

    strata = [task(150, 3, 0.75), task(90, 2, 0.8)]
    got = few_seeds.pooled_contrast(strata, resamples=400)
    units = [float(np.mean(a == labels) - np.mean(b == labels))
             for arms, labels, _ in strata for a, b in zip(arms[0][1], arms[1][1], strict=True)]
    assert len(units) == 5 and got["diff"] == pytest.approx(np.mean(units))
    assert got["p_seeds"] == pytest.approx(sps.ttest_1samp(units, 0.0).pvalue)
    assert got["p"] >= got["p_seeds"] and got["ci_low"] <= got["diff"] <= got["ci_high"]
    alone = few_seeds.pooled_contrast(strata[:1], resamples=400)
    assert alone == few_seeds.contrast(strata[0][0], strata[0][1], "accuracy", resamples=400)
