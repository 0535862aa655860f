"""analysis/collapse.py under the collapse mixture, by seeded simulation: distillation seeds that collapse to the
majority class (the paper's CoLA cells at 69.1±0.00) make a cell's t-interval miss the cell's mean far more often
than 5%; the rule flags exactly those seeds, and the interval over the others covers the healthy runs' mean
(docs/guide/report.md, "Collapsed runs", keeps the numbers)."""

from __future__ import annotations

import numpy as np
import pytest

from distill_sweep.analysis import collapse, stats

REPLICATIONS = 2000
MAJORITY = 69.1  # percent: the dev split's majority-class accuracy
HEALTHY = (80.0, 1.0)  # a run that learned: mean and std over seeds
P_COLLAPSE = 0.15


def _draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    collapsed = rng.random(n) < P_COLLAPSE
    return np.where(collapsed, MAJORITY, rng.normal(*HEALTHY, n)), collapsed


@pytest.mark.parametrize("n", [3, 4, 5])
def test_the_collapse_mixture_breaks_the_cells_interval_and_the_flag_restores_it(n: int) -> None:
    rng = np.random.default_rng(n)
    mixture_mean = P_COLLAPSE * MAJORITY + (1 - P_COLLAPSE) * HEALTHY[0]
    covered = covered_without = trials_without = 0
    for _ in range(REPLICATIONS):
        scores, truth = _draw(rng, n)
        flagged = np.array([collapse.at_baseline(s / 100, MAJORITY / 100) for s in scores])
        assert (flagged == truth).all()  # the rule flags the collapsed seeds and no healthy one
        lo, hi = stats.t_interval(scores)
        covered += lo <= mixture_mean <= hi
        kept = scores[~flagged]
        if len(kept) >= 2:
            lo, hi = stats.t_interval(kept)
            covered_without += lo <= HEALTHY[0] <= hi
            trials_without += 1
    assert covered / REPLICATIONS < 0.85  # the cell's "95%" interval with the collapsed seeds in it
    assert covered_without / trials_without >= 0.93  # the cell without them, about its healthy runs
