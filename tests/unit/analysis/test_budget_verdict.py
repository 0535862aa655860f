"""Budget-vs-verdict (analysis/budget_verdict.py): the crossover finder on hand-made curves, and the comparison's
expected-best values against a brute-force enumeration of a tiny example."""

from __future__ import annotations

import itertools
import statistics

import pytest

from distill_sweep.analysis.budget_verdict import by_cost, by_trials, crossovers, leader, verdict_text


@pytest.mark.parametrize(("differences", "flips"), [
    ([0.3, 0.2, 0.1], []),  # A ahead throughout
    ([-0.2, -0.1, 0.1, 0.2], [3]),  # B, then A from n = 3
    ([0.1, -0.1, 0.1], [2, 3]),  # twice
    ([0.1, 0.0, 0.0, -0.1], [4]),  # a tie neither leads nor flips: the flip is where B leads
    ([0.1, 0.0, 0.2], []),  # a tie between two A leads is no crossover
    ([0.0, 0.0, -0.1], []),  # no leader before B: nothing flips
    ([], []),
])
def test_crossovers_on_hand_made_curves(differences: list[float], flips: list[int]) -> None:
    assert crossovers(differences) == flips


def test_crossovers_are_named_by_their_budget() -> None:
    assert crossovers([1.0, -1.0], [2.5e9, 5e9]) == [5e9]
    assert leader(1e-15) == 0 and leader(-0.2) == -1 and leader(0.2) == 1


def _dodge_brute(scores: list[float], n: int) -> float:
    """The mean max over every n-tuple drawn with replacement (equally likely)."""
    return statistics.fmean(max(t) for t in itertools.product(scores, repeat=n))


def _tang_brute(scores: list[float], n: int) -> float:
    """The mean max over every n-subset of the trials (by position: ties kept)."""
    return statistics.fmean(max(scores[i] for i in c) for c in itertools.combinations(range(len(scores)), n))


def test_the_values_equal_a_brute_force_enumeration() -> None:
    a = [0.50, 0.80, 0.60, 0.80]  # a tie at the top
    b = [0.70, 0.55, 0.72, 0.40]
    points = by_trials(a, b)
    assert [p.budget for p in points] == [1, 2, 3, 4]
    for p in points:
        n = int(p.budget)
        assert p.dodge_a == pytest.approx(_dodge_brute(a, n), abs=1e-12)
        assert p.dodge_b == pytest.approx(_dodge_brute(b, n), abs=1e-12)
        assert p.tang_a == pytest.approx(_tang_brute(a, n), abs=1e-12)
        assert p.tang_b == pytest.approx(_tang_brute(b, n), abs=1e-12)
    # n = 1: the means (A 0.675, B 0.5925); n = 4: Tang's is each arm's max
    assert points[0].difference("tang") == pytest.approx(0.675 - 0.5925)
    assert points[-1].difference("tang") == pytest.approx(0.80 - 0.72)


def test_a_crossover_in_the_estimates() -> None:
    """A: steady (0.70 every trial); B: mostly worse, one lucky trial (0.9): B's mean is lower, its best higher."""
    a, b = [0.70] * 4, [0.60, 0.62, 0.61, 0.90]
    points = by_trials(a, b)
    tang = [p.difference("tang") for p in points]
    # Tang at n: B's mean best of an n-subset = 0.9 * C(3, n-1)/C(4, n) + the rest; n = 1: 0.6825, n = 4: 0.9
    assert tang[0] == pytest.approx(0.70 - statistics.fmean(b))
    assert tang[-1] == pytest.approx(0.70 - 0.90)
    # n = 2: half the pairs hold 0.9, the others' best is 0.62, 0.61, 0.62: B's (2.7 + 1.85) / 6 = 0.758 > 0.70
    assert tang[1] == pytest.approx(0.70 - 4.55 / 6)
    assert crossovers(tang) == [2]
    words = verdict_text(points, "A", "B")
    assert words["tang"] == "B ahead at n = 4; the winner flips at n = 2"
    steady = verdict_text(by_trials([0.9] * 3, [0.1, 0.2, 0.3]), "A", "B")
    assert steady["dodge"] == "A ahead at n = 3; no crossover up to n = 3"
    assert verdict_text(by_trials([0.5, 0.5], [0.5, 0.5]), "A", "B")["tang"] == "a tie at n = 2; no crossover up to n = 2"


def test_by_cost_each_arm_affords_cost_over_its_mean_trial_cost() -> None:
    a, b = [0.5, 0.6, 0.7, 0.8], [0.55, 0.65]
    points = by_cost(a, b, cost_a=1.0, cost_b=2.0)  # B's trials cost twice A's
    # steps of 1 up to min(4 * 1, 2 * 2) = 4: A affords 1..4, B 0 (skipped), 1, 1, 2
    assert [(p.budget, p.n_a, p.n_b) for p in points] == [(2.0, 2, 1), (3.0, 3, 1), (4.0, 4, 2)]
    assert points[-1].tang_a == pytest.approx(0.8) and points[-1].tang_b == pytest.approx(0.65)
    assert by_cost(a, b, cost_a=0.0, cost_b=1.0) == []
