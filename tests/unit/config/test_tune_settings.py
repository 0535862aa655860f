"""The `tune` block (config/tune.py): typed and range-checked like every key, one line per bad value, and off at
its defaults without changing any config hash."""

from __future__ import annotations

import pytest
from helpers import TUNE_SPACE as SPACE
from helpers import tune_ident as _ident

from distill_sweep.config.tune import Range
from distill_sweep.errors import ConfigError


@pytest.mark.parametrize(("overrides", "line"), [
    (["tune.trials=-1"], r"^tune\.trials=-1: must be >= 0$"),
    (["tune.parallel=0"], r"^tune\.parallel=0: must be >= 1$"),
    (["tune.holdout=0"], r"^tune\.holdout=0: must be > 0\.0$"),
    (["tune.holdout=1.0"], r"^tune\.holdout=1\.0: must be < 1\.0$"),
    (["tune.sampler=grid"], r"^tune\.sampler='grid': expected one of 'tpe', 'random', 'qmc'$"),
    (["tune.trials=4"], r"^tune\.trials=4 with an empty tune\.space"),
    (["tune.space={objective.temperature:{low:8,high:1}}"], r"low=8 >= high=1"),
    (["tune.space={objective.temperature:{low:2,high:2}}"], r"low=2 >= high=2"),
    (["tune.space={optimizer.lr:{low:0,high:0.1,log:true}}"], r"^tune\.space\.optimizer\.lr: a log range must stay "
                                                              r"above 0, got low=0"),
    (["tune.space={optimizer.lr:{low:-1e-3,high:0.1,log:true}}"], r"a log range must stay above 0"),
    (["tune.space={objective.alpha:{low:0,hi:1}}"], r"^tune\.space\.objective\.alpha\.hi: unknown setting"),
    (["tune.space={objective.alpha:[]}"], r"give at least one choice"),
    (["tune.space={objective.alpha:{low:0,high:inf}}"], r"high=inf: expected a finite number"),
    (["tune.metric=bleu"], r"^tune\.metric='bleu' is not a metric of task toy"),
    (["tune.seed=-3"], r"^tune\.seed=-3: must be >= 0$"),
    (["tune.trials=2", "+tune.frobnicate=1"], r"^tune\.frobnicate: unknown setting"),
])
def test_a_bad_tune_value_is_one_line(overrides: list[str], line: str) -> None:
    with pytest.raises(ConfigError, match=line) as err:
        _ident(*overrides)
    assert "\n" not in str(err.value)


def test_ranges_and_choices_are_parsed() -> None:
    ident = _ident("tune.trials=3", "tune.space={optimizer.lr:{low:1e-5,high:1e-3,log:true},"
                   "objective.alpha:[0.1,0.5,0.9],optimizer.batch_size:{low:8,high:32}}")
    domains = ident.settings.run.tune.domains()
    assert domains["optimizer.lr"] == Range(1e-5, 1e-3, log=True)
    assert domains["objective.alpha"] == [0.1, 0.5, 0.9]
    assert domains["optimizer.batch_size"] == Range(8, 32, integer=True)


def test_the_block_at_its_defaults_leaves_the_config_hash_as_without_it() -> None:
    """Every job hashed before the block existed keeps its hash (its directory, its completed record)."""
    assert _ident().digest == _ident("~tune").digest
    assert _ident().digest == _ident("tune.holdout=0.3", "tune.seed=5", "tune.sampler=random").digest  # off: ignored


def test_tuning_makes_other_jobs_but_the_budget_does_not() -> None:
    """On, the block changes the job (its trials' holdout, its grid's chosen values); the budget alone does not, so
    a larger tune.trials continues the same studies and keeps the grid jobs whose chosen values did not change."""
    off, eight = _ident(), _ident("tune.trials=8", SPACE)
    assert eight.digest != off.digest
    assert _ident("tune.trials=16", SPACE).digest == eight.digest
    assert _ident("tune.trials=8", SPACE, "tune.holdout=0.2").digest != eight.digest
    assert _ident("tune.trials=8", SPACE, "+tune_trial=0").digest != eight.digest
    assert _ident("tune.trials=8", SPACE, "+tune_trial=0").digest != _ident("tune.trials=8", SPACE,
                                                                             "+tune_trial=1").digest
