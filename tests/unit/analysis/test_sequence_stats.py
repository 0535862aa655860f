"""analysis.example_stats over a decoder's dev sequences: the weighted metrics and the (multi-)bootstrap against
a plain numpy computation on the drawn sequences themselves."""

from __future__ import annotations

import math

import numpy as np
import pytest

from distill_sweep.analysis import example_stats


def _summaries(rng: np.random.Generator, seeds: int, n: int) -> np.ndarray:
    targets = rng.integers(1, 9, size=(seeds, n))
    nll = targets * rng.uniform(1.0, 2.0, size=(seeds, n))
    correct = rng.binomial(targets, 0.4)
    return np.stack([nll, targets, correct], axis=-1).astype(np.float64)


def _ppl(summary: np.ndarray, rows: np.ndarray) -> float:
    return float(np.exp(summary[rows, 0].sum() / summary[rows, 1].sum()))


def test_weighted_metrics_equal_the_metric_on_repeated_sequences():
    rng = np.random.default_rng(1)
    summary = _summaries(rng, 1, 12)[0]
    weights = rng.integers(0, 3, size=(4, 12))
    rows = [np.repeat(np.arange(12), w) for w in weights]
    ppl = example_stats.weighted_sequence_metric("perplexity", summary, weights)
    acc = example_stats.weighted_sequence_metric("token_accuracy", summary, weights)
    for i, r in enumerate(rows):
        assert ppl[i] == pytest.approx(_ppl(summary, r), rel=1e-12)
        assert acc[i] == pytest.approx(summary[r, 2].sum() / summary[r, 1].sum(), rel=1e-12)


@pytest.mark.parametrize("seeds", [1, 3])
def test_the_bootstrap_equals_a_numpy_computation_on_the_drawn_sequences(seeds: int):
    """Same draws (seed 0: the examples' counts, then the seeds' counts), then each resample scored by repeating
    the drawn sequences and seeds: mean over drawn seeds of ppl(A) - ppl(B)."""
    rng = np.random.default_rng(2)
    n, resamples = 15, 300
    b = _summaries(rng, seeds, n)
    a = b.copy()
    a[..., 0] += 0.2 * a[..., 1] + rng.uniform(0.0, 0.5, size=(seeds, n))  # worse on every sequence
    got = example_stats.multi_bootstrap_sequences(a, b, "perplexity", resamples=resamples, seed=0)

    draws = np.random.default_rng(0)
    counts = draws.multinomial(n, np.full(n, 1.0 / n), size=resamples)
    seed_counts = draws.multinomial(seeds, np.full(seeds, 1.0 / seeds), size=resamples)
    diffs = []
    for w, sc in zip(counts, seed_counts, strict=True):
        rows = np.repeat(np.arange(n), w)
        drawn_seeds = np.repeat(np.arange(seeds), sc)
        diffs.append(np.mean([_ppl(a[s], rows) - _ppl(b[s], rows) for s in drawn_seeds]))
    diffs = np.array(diffs)
    every = np.arange(n)
    assert got["diff"] == pytest.approx(np.mean([_ppl(a[s], every) - _ppl(b[s], every) for s in range(seeds)]))
    assert got["ci_low"] == pytest.approx(np.quantile(diffs, 0.025), rel=1e-9)
    assert got["ci_high"] == pytest.approx(np.quantile(diffs, 0.975), rel=1e-9)
    p = min(1.0, 2 * min((np.sum(diffs <= 0) + 1) / (resamples + 1), (np.sum(diffs >= 0) + 1) / (resamples + 1)))
    assert got["p"] == pytest.approx(p)
    assert got["diff"] > 0 and got["ci_low"] > 0  # A's NLL per target is higher on every sequence


def test_perplexity_is_capped_as_the_dev_metric():
    summary = np.array([[1000.0, 2.0, 0.0]])
    assert example_stats.weighted_sequence_metric("perplexity", summary, np.ones((1, 1)))[0] == pytest.approx(
        np.exp(50.0))
    with pytest.raises(ValueError, match="no per-sequence statistics"):
        example_stats.weighted_sequence_metric("f1", summary, np.ones((1, 1)))


def test_a_nan_nll_gives_no_p_beside_its_nan_difference() -> None:
    """A NaN in one run's per-sequence NLL made the difference NaN while the resamples' comparisons with 0 still
    gave a p (0.001 in the review): now neither an interval nor a p."""
    a = np.array([[[2.0, 2, 1], [np.nan, 3, 1], [1.5, 2, 2]]])
    b = np.array([[[1.0, 2, 1], [2.0, 3, 1], [1.0, 2, 2]]])
    got = example_stats.multi_bootstrap_sequences(a, b, "perplexity", resamples=200)
    assert math.isnan(got["diff"]) and math.isnan(got["p"]) and math.isnan(got["ci_low"]) and math.isnan(got["ci_high"])
