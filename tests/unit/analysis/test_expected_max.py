"""Dodge et al.'s expected best score after n trials (analysis/expected_max.py), against hand computations."""

from __future__ import annotations

import math

import pytest

from distill_sweep.analysis.expected_max import expected_best, expected_best_curve


def test_three_scores_by_hand() -> None:
    """Scores 0.6, 0.8, 0.7, sorted 0.6 <= 0.7 <= 0.8, N = 3. For n = 2 the weights (i/3)^2 - ((i-1)/3)^2 are 1/9,
    3/9, 5/9: E = (0.6 + 3*0.7 + 5*0.8) / 9 = 6.7/9; E[max^2] = (0.36 + 3*0.49 + 5*0.64) / 9 = 5.03/9."""
    scores = [0.6, 0.8, 0.7]
    two = expected_best(scores, 2)
    assert two.mean == pytest.approx(6.7 / 9, abs=1e-12)
    assert two.std == pytest.approx(math.sqrt(5.03 / 9 - (6.7 / 9) ** 2), abs=1e-12)
    one = expected_best(scores, 1)  # weights 1/3 each: the mean, with the scores' population spread
    assert one.mean == pytest.approx(0.7, abs=1e-12)
    assert one.std == pytest.approx(math.sqrt(((-0.1) ** 2 + 0 + 0.1 ** 2) / 3), abs=1e-12)
    # n = 3: weights 1/27, 7/27, 19/27
    assert expected_best(scores, 3).mean == pytest.approx((0.6 + 7 * 0.7 + 19 * 0.8) / 27, abs=1e-12)


def test_four_scores_with_a_tie_by_hand() -> None:
    """0.5, 0.9, 0.5, 0.7 sorted 0.5, 0.5, 0.7, 0.9; n = 2: weights (i^2 - (i-1)^2)/16 = 1, 3, 5, 7 (/16)."""
    assert expected_best([0.5, 0.9, 0.5, 0.7], 2).mean == pytest.approx((0.5 + 3 * 0.5 + 5 * 0.7 + 7 * 0.9) / 16,
                                                                         abs=1e-12)


def test_the_curve_rises_from_the_mean_towards_the_max() -> None:
    scores = [0.61, 0.74, 0.58, 0.70, 0.66]
    curve = expected_best_curve(scores, max_n=50)
    assert [c.n for c in curve[:3]] == [1, 2, 3] and len(expected_best_curve(scores)) == 5
    assert curve[0].mean == pytest.approx(sum(scores) / 5, abs=1e-12)
    assert all(b.mean >= a.mean for a, b in zip(curve, curve[1:]))
    assert curve[-1].mean == pytest.approx(0.74, abs=1e-4) and curve[-1].std < 0.01


@pytest.mark.parametrize(("scores", "n", "line"), [([], 1, "no scores"), ([0.5], 0, "n=0"),
                                                   ([0.5, float("nan")], 1, "finite")])
def test_bad_input_is_refused(scores: list[float], n: int, line: str) -> None:
    with pytest.raises(ValueError, match=line):
        expected_best(scores, n)


def test_the_unbiased_estimator_is_the_mean_max_over_every_subset() -> None:
    """Tang et al.'s estimator equals brute force over every n-subset (with ties), and ends at the max at n = N."""
    from itertools import combinations

    from distill_sweep.analysis.expected_max import unbiased_expected_best

    scores = [0.61, 0.7, 0.7, 0.55, 0.82, 0.64]
    for n in range(1, len(scores) + 1):
        brute = [max(c) for c in combinations(scores, n)]
        assert unbiased_expected_best(scores, n) == pytest.approx(sum(brute) / len(brute), abs=1e-12)
    assert unbiased_expected_best(scores, len(scores)) == max(scores)
    with pytest.raises(ValueError, match="1 <= n <= 6"):
        unbiased_expected_best(scores, 7)


def test_the_unbiased_estimator_is_unbiased_and_dodges_is_not() -> None:
    """N = 5 uniform trials, n = 3: E[best of 3] = 3/4. Over 20,000 seeded sets the unbiased estimator averages
    0.75 (its Monte Carlo error about 0.0007: within 4 of them); Dodge's reads low by more than 0.02."""
    import numpy as np

    from distill_sweep.analysis.expected_max import unbiased_expected_best

    sets = np.random.default_rng(7).random((20_000, 5))
    unbiased = np.array([unbiased_expected_best(s, 3) for s in sets])
    dodge = np.array([expected_best(s, 3).mean for s in sets])
    error = unbiased.std() / math.sqrt(len(sets))
    assert abs(unbiased.mean() - 0.75) < 4 * error
    assert 0.75 - dodge.mean() > 0.02
