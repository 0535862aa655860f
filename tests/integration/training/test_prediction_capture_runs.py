"""distill_sweep.training.prediction_capture: the tests that run a job, a command or processes (its fast tests:
tests/unit/training/test_prediction_capture.py)."""

from __future__ import annotations

from pathlib import Path

from distill_sweep.records.predictions import read_predictions


def test_a_jobs_record_names_the_dev_content_its_predictions_hold(tmp_path: Path, shared_cache: Path) -> None:
    """The record carries its dev splits' content hashes (data.dev_hash), the same as its predictions file's, so
    the report checks each run's predictions against its own record and pools one dev set."""
    from helpers import compose_cfg

    from distill_sweep.cli.run_job import run_job

    base = ["task=toy", "teacher=tiny", "logger=none", "threads=1", "task.recipe.num_train=64",
            "task.recipe.num_dev=32", "teacher.finetune.epochs=1", "epochs=1", "optimizer.batch_size=32",
            "guards.allow_weak_teacher=true", "max_steps_per_epoch=1", "objective=vanilla_kd"]
    record = run_job(compose_cfg([*base, f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}"]))
    (path,) = (tmp_path / "r").rglob("result.json")
    got = read_predictions(path.parent)
    assert got is not None and record["data"]["dev_hash"] == got.dev_hash and set(got.dev_hash) == {"validation"}
