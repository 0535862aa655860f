"""Tuning luck across an arm's independent studies (tune.studies, sweep/studies.py): the median over the studies
of each study's best holdout score, and how far apart the studies' bests lie.

AlgoPerf (MLCommons) splits each arm's tuning budget into S independent studies and scores the arm by the median
over studies of each study's best, so that one lucky study does not make the arm; the studies' spread is the
tuning luck a single study hides. The median study, whose values the grid runs at, is the one whose best is the
lower median: the middle one for an odd S, the lower of the two middle ones for an even S (a real study's values,
and never the luckier of the two).

Two arms tuned with the same S are compared study by study (`study_difference`): study k of each drew its trials
from the same seed (with tune.sampler=qmc, the same points), so the S differences of their bests are paired, and
their t-interval is how far apart the arms are beyond tuning luck, on the holdout.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StudySpread:
    median_best: float  # the median over studies of each study's best
    low: float  # the worst study's best
    high: float  # the best study's best
    std: float | None  # the sample standard deviation of the studies' bests (None for one study)
    median_study: int  # the index (in the sequence given) of the study whose values the grid runs at

    @property
    def spread(self) -> float:
        """The range of the studies' bests: how much the arm's best depends on its tuning luck."""
        return self.high - self.low


def study_spread(bests: Sequence[float]) -> StudySpread:
    """The median of the studies' bests and their spread; ValueError for none, or a best that is not finite."""
    if not bests:
        raise ValueError("no study has a best score")
    values = [float(b) for b in bests]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"a study's best is not finite: {values}")
    low_median = statistics.median_low(values)
    median_study = min(i for i, v in enumerate(values) if v == low_median)
    std = statistics.stdev(values) if len(values) > 1 else None
    return StudySpread(statistics.median(values), min(values), max(values), std, median_study)


@dataclass(frozen=True)
class StudyDifference:
    medians: float  # the difference of the arms' scores: median of A's bests - median of B's bests
    mean: float  # the mean over studies of (A's best - B's best), study k against study k
    low: float  # its t-interval over the S paired differences (NaN for one study)
    high: float


def study_difference(a: Sequence[float], b: Sequence[float]) -> StudyDifference:
    """Arm A against arm B over their studies, in study order (ValueError for counts that differ)."""
    from distill_sweep.analysis.stats import paired_t_ci

    if len(a) != len(b) or not a:
        raise ValueError(f"the arms have {len(a)} and {len(b)} studies: compared study by study, they need as many")
    low, high = paired_t_ci(a, b)
    return StudyDifference(statistics.median(a) - statistics.median(b),
                           statistics.fmean(x - y for x, y in zip(a, b, strict=True)), low, high)


__all__ = ["StudyDifference", "StudySpread", "study_difference", "study_spread"]
