"""The tuning holdout (data/holdout.py): the tests that run a job, a command or processes (its fast tests:
tests/unit/data/test_holdout.py)."""

from __future__ import annotations


def test_a_trial_job_is_scored_on_the_holdout(tmp_path, shared_cache, one_thread) -> None:
    """A job with tune_trial set trains on the rest and evaluates only the holdout (its record says so)."""
    from helpers import FAST, compose_cfg

    from distill_sweep.cli.run_job import run_job

    cfg = compose_cfg([*FAST, "max_steps_per_epoch=2", "tune.trials=2", "tune.holdout=0.25",
                       "tune.space={objective.temperature:{low:1,high:4}}", "+tune_trial=0",
                       f"results_dir={tmp_path}", f"cache_dir={shared_cache}"])
    record = run_job(cfg)
    assert record["status"] == "completed"
    assert record["tune_trial"] == {"number": 0, "holdout": 0.25, "seed": 0, "holdout_size": 64}
    assert record["data"]["train_size"] == 192 and record["data"]["dev_size"] == 64  # 256 = 192 + 64, not dev's 128
