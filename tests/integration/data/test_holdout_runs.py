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
    trial = record["tune_trial"]
    assert {k: trial[k] for k in ("number", "holdout", "seed", "holdout_size")} == \
        {"number": 0, "holdout": 0.25, "seed": 0, "holdout_size": 64}
    # study 0 of the default sampler, the first trial drawn, not pruned
    assert (trial["study"], trial["sampler"], trial["order"], trial["pruned"]) == (0, "tpe", 0, None)
    assert record["data"]["train_size"] == 192 and record["data"]["dev_size"] == 64  # 256 = 192 + 64, not dev's 128


def test_a_teacher_fine_tuned_by_a_trial_caches_its_reported_dev_score(tmp_path, one_thread) -> None:
    """The first job to need the teacher may be a trial (teacher_outputs=live: no store is built first): its
    fine-tuning is scored on the reported dev split, as a grid job's is, not on the holdout (rows the teacher trained
    on), since the cache keeps that score as the teacher's dev score for every job of its key."""
    import json

    from helpers import FAST, compose_cfg

    from distill_sweep.cli.run_job import run_job

    common = [*FAST, "max_steps_per_epoch=2", "tune.trials=2", "tune.holdout=0.25", "teacher_outputs=live",
              "tune.space={objective.temperature:{low:1,high:4}}"]
    trial = run_job(compose_cfg([*common, "+tune_trial=0", f"results_dir={tmp_path / 'a'}",
                                 f"cache_dir={tmp_path / 'trial_cache'}"]))
    grid = run_job(compose_cfg([*common, f"results_dir={tmp_path / 'b'}", f"cache_dir={tmp_path / 'grid_cache'}"]))
    assert trial["status"] == grid["status"] == "completed"
    assert trial["teacher"]["source"] == grid["teacher"]["source"] == "trained"  # each fine-tuned it, same seed
    cached = [json.loads(next((tmp_path / c).rglob("teacher.json")).read_text())["dev"]
              for c in ("trial_cache", "grid_cache")]
    assert cached[0] == cached[1] == grid["teacher"]["dev"]  # the reported dev split's score, wherever it was made
