"""distill_sweep.analysis.example_stats: metrics from example weights, McNemar, the multi-bootstrap (checked
against sklearn/scipy on repeated rows, the binomial and chi-square formulas, and normal theory)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from distill_sweep.analysis import example_stats as ex


@pytest.mark.parametrize("metric", ["accuracy", "f1", "mcc", "pearson"])
def test_weighted_metric_equals_the_metric_on_repeated_rows(metric: str) -> None:
    rng = np.random.default_rng(1)
    n = 60
    if metric == "pearson":
        label = rng.normal(2.5, 1.0, n)
        pred = label + rng.normal(0, 0.7, n)
    else:
        label = rng.integers(0, 2, n)
        pred = np.where(rng.random(n) < 0.7, label, 1 - label)
    weights = rng.multinomial(n, np.full(n, 1 / n), size=5)
    got = ex.weighted_metric(metric, pred, label, weights)
    for w, value in zip(weights, got, strict=True):
        rows = np.repeat(np.arange(n), w)  # the resample itself
        p, y = pred[rows], label[rows]
        if metric == "accuracy":
            ref = accuracy_score(y, p)
        elif metric == "f1":
            ref = f1_score(y, p, zero_division=0.0)
        elif metric == "mcc":
            ref = matthews_corrcoef(y, p)
        else:
            ref = sps.pearsonr(p, y)[0]
        assert value == pytest.approx(ref, abs=1e-12)


def test_weighted_metric_refuses_spearman() -> None:
    with pytest.raises(ValueError, match="no per-example statistics for metric 'spearman'"):
        ex.weighted_metric("spearman", np.zeros(3), np.zeros(3), np.ones((1, 3)))


def test_mcnemar_exact_and_chi_square() -> None:
    labels = np.ones(100, dtype=int)
    a = np.ones(100, dtype=int)
    b = np.ones(100, dtype=int)
    a[:3], b[3:12] = 0, 0  # A wrong on 3 that B gets right, B wrong on 9 that A gets right: 12 discordant
    p, n_ab, n_ba = ex.mcnemar(a, b, labels)
    assert (n_ab, n_ba) == (9, 3)
    assert p == pytest.approx(sps.binomtest(3, 12, 0.5).pvalue)  # exact below 25 discordant
    a2, b2 = np.ones(100, dtype=int), np.ones(100, dtype=int)
    a2[:10], b2[10:40] = 0, 0  # 30 vs 10: chi-square with continuity correction (|30 - 10| - 1)^2 / 40
    p2, _, _ = ex.mcnemar(a2, b2, labels)
    assert p2 == pytest.approx(sps.chi2.sf((20 - 1) ** 2 / 40, df=1))
    assert ex.mcnemar(a, a, labels) == (1.0, 0, 0)  # no discordant example: no evidence


def test_multi_bootstrap_one_seed_matches_normal_theory() -> None:
    """At one seed the multi-bootstrap is the paired bootstrap over examples: for accuracy its interval is
    close to diff +- 1.96 * sd(correct_a - correct_b) / sqrt(N)."""
    rng = np.random.default_rng(2)
    n = 2000
    labels = rng.integers(0, 2, n)
    a = np.where(rng.random(n) < 0.80, labels, 1 - labels)
    b = np.where(rng.random(n) < 0.77, labels, 1 - labels)
    got = ex.multi_bootstrap(a[None], b[None], labels, "accuracy")
    d = (a == labels).astype(float) - (b == labels).astype(float)
    half = 1.959964 * d.std(ddof=1) / math.sqrt(n)
    assert got["diff"] == pytest.approx(d.mean())
    assert got["ci_low"] == pytest.approx(d.mean() - half, abs=0.003)
    assert got["ci_high"] == pytest.approx(d.mean() + half, abs=0.003)
    z = d.mean() / (d.std(ddof=1) / math.sqrt(n))
    assert got["p"] == pytest.approx(2 * sps.norm.sf(abs(z)), abs=0.01)


def test_multi_bootstrap_counts_the_seeds_spread() -> None:
    """Two seeds whose differences disagree (+10 and -6 points): the examples alone would call it clear,
    the seeds do not; identical systems give 0 and p = 1."""
    rng = np.random.default_rng(3)
    n = 1000
    labels = rng.integers(0, 2, n)

    def system(acc: float) -> np.ndarray:
        return np.where(rng.random(n) < acc, labels, 1 - labels)

    a = np.stack([system(0.85), system(0.72)])
    b = np.stack([system(0.75), system(0.78)])
    got = ex.multi_bootstrap(a, b, labels, "accuracy")
    by_seed = [(a[s] == labels).mean() - (b[s] == labels).mean() for s in range(2)]
    assert got["diff"] == pytest.approx(np.mean(by_seed))
    assert got["ci_low"] < 0 < got["ci_high"] and got["p"] > 0.05
    one = ex.multi_bootstrap(a[:1], b[:1], labels, "accuracy")  # seed 0 alone: +10 points, clear
    assert one["ci_low"] > 0 and one["p"] < 0.01
    same = ex.multi_bootstrap(a, a, labels, "mcc")
    assert same == {"diff": 0.0, "ci_low": 0.0, "ci_high": 0.0, "p": 1.0}


def test_one_seed_test_names_its_test() -> None:
    labels = np.array([1, 0, 1, 1, 0, 1, 0, 0, 1, 1] * 10)
    a = labels.copy()
    b = labels.copy()
    b[:20] = 1 - b[:20]
    name, p = ex.one_seed_test(a, b, labels, "accuracy")
    assert name.startswith("McNemar (20 vs 0") and p == pytest.approx(sps.binomtest(0, 20, 0.5).pvalue)
    name, p = ex.one_seed_test(a, b, labels, "f1")
    assert name == "paired bootstrap over examples" and p < 0.01
