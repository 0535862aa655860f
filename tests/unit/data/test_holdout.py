"""The tuning holdout (data/holdout.py): a trial trains on the training split less a seeded share and is scored on
that share alone, never on a reported dev split."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import task_settings

from distill_sweep.data.glue import load_raw, load_task_data
from distill_sweep.data.holdout import HOLDOUT, holdout_rows, tuning_data
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer


def test_the_rows_split_the_training_split_by_seed() -> None:
    keep, held = holdout_rows(200, 0.25, seed=3)
    assert len(held) == 50 and len(keep) == 150
    assert set(keep).isdisjoint(held) and set(keep) | set(held) == set(range(200))
    again, _ = holdout_rows(200, 0.25, seed=3)
    other, _ = holdout_rows(200, 0.25, seed=4)
    assert np.array_equal(again, keep) and not np.array_equal(other, keep)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory):
    cache = tmp_path_factory.mktemp("cache")
    task = task_settings("toy", **{"recipe.num_train": 120, "recipe.num_dev": 40})
    return task, load_task_data(task, build_toy_tokenizer(cache), cache)


def test_a_trial_never_reads_the_dev_split(data) -> None:
    """By example ids: the holdout's rows are training rows the trial does not train on, and none of them is a
    row of the reported dev split."""
    task, whole = data
    trial = tuning_data(whole, 0.25, seed=7)
    assert list(trial.dev) == [HOLDOUT]  # the reported dev splits are not there to be evaluated
    held, trained = list(trial.dev[HOLDOUT]["idx"]), list(trial.train["idx"])
    assert len(held) == 30 and len(trained) == 90
    assert set(held).isdisjoint(trained) and set(held) | set(trained) == set(range(120))
    # the held-out rows are those training examples (idx = their row in the whole training split)
    assert [list(r) for r in trial.dev[HOLDOUT]["input_ids"]] == [list(whole.train[i]["input_ids"]) for i in held]
    assert [list(r) for r in trial.train["input_ids"]] == [list(whole.train[i]["input_ids"]) for i in trained]
    assert len(load_raw(task)["validation"]) == 40  # the reported split, untouched by the trial's data
    assert trial.tuning_from is whole.train  # the teacher-output store is still the whole split's
