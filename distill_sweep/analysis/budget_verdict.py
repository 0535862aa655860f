"""Budget-vs-verdict: which of two tuned arms is ahead at each tuning budget, by both expected-best estimators, and
the budgets at which the winner flips (Dodge et al. 2019, 2021; Tang et al. 2020: A beats B at 5 trials and loses
at 50).

For arms A and B with N_A and N_B completed trials, at each budget n = 1 .. min(N_A, N_B) the comparison is the
difference of their expected best after n trials, E_A(n) − E_B(n), by Dodge et al.'s estimator (analysis/
expected_max.py's `expected_best`: drawn with replacement, biased low below N) and by Tang et al.'s unbiased one
(`unbiased_expected_best`: every n-subset). "Paired": both arms at the same budget n. The leader at n is the arm
with the higher estimate (none on a tie); a *crossover* is a budget n whose leader differs from the leader at the
last budget before it that had one.

With budgets in measured cost (tune.budget_by seconds or flops), the budget axis is cost instead: at cost c each
arm affords n(c) = floor(c / its mean trial cost) trials, and the comparison is E_A(n_A(c)) − E_B(n_B(c)); the cost
steps are the multiples of the cheaper arm's mean trial cost, up to the cost at which an arm runs out of the trials
it ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from distill_sweep.analysis.expected_max import expected_best, unbiased_expected_best

ESTIMATORS = ("dodge", "tang")


@dataclass(frozen=True)
class BudgetPoint:
    """The comparison at one budget."""

    budget: float  # trials n, or the cost c
    n_a: int  # the trials each arm has at that budget
    n_b: int
    dodge_a: float
    dodge_b: float
    tang_a: float
    tang_b: float

    def difference(self, estimator: str) -> float:
        """E_A − E_B by `estimator` (dodge or tang)."""
        return self.dodge_a - self.dodge_b if estimator == "dodge" else self.tang_a - self.tang_b


def leader(difference: float, tolerance: float = 1e-12) -> int:
    """+1: A ahead, −1: B ahead, 0: a tie (within `tolerance`)."""
    return 0 if abs(difference) <= tolerance else (1 if difference > 0 else -1)


def crossovers(differences: Sequence[float], budgets: Sequence[float] | None = None) -> list[float]:
    """The budgets at which the leader differs from the leader at the last earlier budget that had one (a tie
    neither leads nor flips). `budgets` default to 1, 2, ... (the trials)."""
    budgets = list(budgets) if budgets is not None else list(range(1, len(differences) + 1))
    out, last = [], 0
    for budget, diff in zip(budgets, differences, strict=True):
        now = leader(diff)
        if now != 0:
            if last != 0 and now != last:
                out.append(budget)
            last = now
    return out


def _point(budget: float, a: Sequence[float], b: Sequence[float], n_a: int, n_b: int) -> BudgetPoint:
    return BudgetPoint(budget, n_a, n_b, expected_best(a, n_a).mean, expected_best(b, n_b).mean,
                       unbiased_expected_best(a, n_a), unbiased_expected_best(b, n_b))


def by_trials(a: Sequence[float], b: Sequence[float]) -> list[BudgetPoint]:
    """The comparison at n = 1 .. min(N_A, N_B) trials ([] where an arm has none)."""
    return [_point(n, a, b, n, n) for n in range(1, min(len(a), len(b)) + 1)]


def by_cost(a: Sequence[float], b: Sequence[float], cost_a: float, cost_b: float) -> list[BudgetPoint]:
    """The comparison at cost steps (the multiples of the cheaper arm's mean trial cost `cost_a`/`cost_b`) while both
    arms afford at least one trial and at most the trials they ran ([] where a cost is not positive)."""
    if not (a and b) or not (cost_a > 0 and cost_b > 0 and math.isfinite(cost_a) and math.isfinite(cost_b)):
        return []
    step, top = min(cost_a, cost_b), min(len(a) * cost_a, len(b) * cost_b)
    out = []
    for k in range(1, int(top / step + 1e-9) + 1):
        c = k * step
        n_a, n_b = int(c / cost_a + 1e-9), int(c / cost_b + 1e-9)
        if n_a >= 1 and n_b >= 1:
            out.append(_point(c, a, b, min(n_a, len(a)), min(n_b, len(b))))
    return out


def verdict_text(points: Sequence[BudgetPoint], name_a: str, name_b: str, unit: str = "trials") -> dict[str, str]:
    """Per estimator, in words: the leader at the largest budget and the crossovers ("no crossover up to n")."""
    out = {}
    for estimator in ESTIMATORS:
        diffs = [p.difference(estimator) for p in points]
        if not points:
            out[estimator] = "no budget to compare at"
            continue
        flips = crossovers(diffs, [p.budget for p in points])
        last = points[-1]
        ahead = {1: f"{name_a} ahead", -1: f"{name_b} ahead", 0: "a tie"}[leader(diffs[-1])]
        where = (f"the winner flips at {', '.join(_budget(f, unit) for f in flips)}" if flips
                 else f"no crossover up to {_budget(last.budget, unit)}")
        out[estimator] = f"{ahead} at {_budget(last.budget, unit)}; {where}"
    return out


def _budget(value: float, unit: str) -> str:
    return f"n = {int(value)}" if unit == "trials" else f"{value:.4g} {unit}"


__all__ = ["ESTIMATORS", "BudgetPoint", "by_cost", "by_trials", "crossovers", "leader", "verdict_text"]
