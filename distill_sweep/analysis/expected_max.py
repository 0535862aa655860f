"""Expected best score after n trials (Dodge et al., EMNLP 2019, "Show Your Work": expected validation performance).

From the N scores of an arm's trials, the best of n trials drawn with replacement from their empirical
distribution has the closed form

    E[max_n] = sum_i v_(i) * ((i/N)^n - ((i-1)/N)^n)

over the scores sorted ascending, v_(1) <= ... <= v_(N): the weight of v_(i) is the chance that the largest of
n draws is the i-th. Its spread is the standard deviation of that same distribution,
sqrt(E[max_n^2] - E[max_n]^2). n = 1 gives the mean of the scores; as n grows it tends to their max. The report
plots it against n, so a reader sees whether a ranking of arms depends on the tuning budget.

Drawing with replacement makes it biased for the best of n fresh trials (Tang et al., ACL 2020, "Showing Your
Work Doesn't Always Work"): it counts one trial's score several times, so below n = N it reads low, and at n = N it
is not the max of the N trials that were run. Their unbiased estimator draws without replacement, the mean over
every n-subset of the N scores of its max:

    U_n = sum_i v_(i) * C(i - 1, n - 1) / C(N, n)      (n <= N)

the weight of v_(i) being the chance that it is the largest of a random n-subset. It is unbiased for the expected
best of n independent trials whenever the N trials are independent draws, as a random search's or TPE's random
start-up trials are; a TPE trial after them depends on the earlier ones, and then neither estimator is a
best-of-n of independent trials.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ExpectedBest:
    n: int  # trials
    mean: float  # E[max of n draws]
    std: float  # its standard deviation


def _weights(count: int, n: int) -> list[float]:
    return [(i / count) ** n - ((i - 1) / count) ** n for i in range(1, count + 1)]


def expected_best(scores: Sequence[float], n: int) -> ExpectedBest:
    """E[max of n draws with replacement from `scores`] and its spread (ValueError: no scores, a non-finite one,
    n < 1)."""
    if n < 1:
        raise ValueError(f"n={n}: the number of trials must be >= 1")
    values = sorted(float(s) for s in scores)
    if not values:
        raise ValueError("no scores: the expected best needs at least one trial")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"scores {values}: every score must be a finite number")
    weights = _weights(len(values), n)
    mean = sum(w * v for w, v in zip(weights, values, strict=True))
    second = sum(w * v * v for w, v in zip(weights, values, strict=True))
    return ExpectedBest(n, mean, math.sqrt(max(second - mean * mean, 0.0)))  # max: rounding below 0


def unbiased_expected_best(scores: Sequence[float], n: int) -> float:
    """Tang et al.'s unbiased estimator of the expected best of n independent trials: the mean, over every n-subset
    of `scores`, of its max (ValueError: no scores, a non-finite one, n < 1 or n > the number of scores)."""
    values = sorted(float(s) for s in scores)
    if not values:
        raise ValueError("no scores: the expected best needs at least one trial")
    if not 1 <= n <= len(values):
        raise ValueError(f"n={n}: the unbiased estimator needs 1 <= n <= {len(values)} (the trials run)")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"scores {values}: every score must be a finite number")
    total = math.comb(len(values), n)
    return sum(v * math.comb(i, n - 1) for i, v in enumerate(values)) / total  # i = (rank - 1)


def expected_best_curve(scores: Sequence[float], max_n: int | None = None) -> list[ExpectedBest]:
    """`expected_best` for n = 1 .. max_n (default: the number of scores, the budget that was spent)."""
    return [expected_best(scores, n) for n in range(1, (max_n or len(scores)) + 1)]


__all__ = ["ExpectedBest", "expected_best", "expected_best_curve", "unbiased_expected_best"]
