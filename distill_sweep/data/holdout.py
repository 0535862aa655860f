"""The tuning holdout: a seeded share of the training split that a tuning trial is scored on instead of training.

A trial (sweep/tune.py) trains on the training split less these rows and is evaluated on them alone: the
reported dev splits are never read while tuning, so the grid's dev scores stay an honest estimate. (One exception,
which no trial's score depends on: a teacher fine-tuned by a trial, the first job to need it, is scored on the
reported dev splits, `reported_dev`, since its cache keeps that score as the teacher's dev score for every job.) The rows
depend on the split's size, `tune.holdout` and `tune.seed` only, never on the trial or the training seed: every
trial of every arm is scored on the same examples.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from distill_sweep.config.seeds import derived_seed

if TYPE_CHECKING:  # (glue imports datasets and torch, and NumPy is imported where rows are drawn: the sweeper
    # reads holdout_size while it plans, at every start)
    import numpy as np

    from distill_sweep.data.glue import TaskData

HOLDOUT = "tune_holdout"  # the name of a trial's only dev split (records, metrics)


def holdout_size(n_train: int, fraction: float) -> int:
    """How many of `n_train` examples the holdout takes: `fraction` of them, rounded."""
    return int(round(n_train * fraction))


def holdout_rows(n_train: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(the rows a trial trains on, the holdout's rows), both sorted, disjoint, together every row of the split."""
    import numpy as np

    order = np.random.default_rng(derived_seed("tune-holdout", seed)).permutation(n_train)
    size = holdout_size(n_train, fraction)
    return np.sort(order[size:]), np.sort(order[:size])


def is_trial(data: TaskData) -> bool:
    """Whether `data` is a tuning trial's: its one dev split is the holdout, so every score set beside a baseline
    of it (the teacher guard's) must be scored on the holdout too, not read from the real dev splits."""
    return HOLDOUT in data.dev


def tuning_data(data: TaskData, fraction: float, seed: int) -> TaskData:
    """A trial's data: the training split less the holdout, and the holdout as its one dev split. The rows keep
    their `idx` (the row in the whole split), so the teacher-output store of the whole split serves them."""
    whole = data.teacher_train if data.teacher_train is not None else data.train
    if len(whole) != len(data.train):  # an augmented split: its new rows would carry the holdout's examples
        raise ValueError("a tuning trial's holdout is taken from the original training split: not augmented")
    keep, held = holdout_rows(len(whole), fraction, seed)
    return dataclasses.replace(data, train=data.train.select(keep.tolist()), dev={HOLDOUT: whole.select(held.tolist())},
                               tuning_from=data.train, reported_dev=data.dev)


__all__ = ["HOLDOUT", "holdout_rows", "is_trial", "holdout_size", "tuning_data"]
