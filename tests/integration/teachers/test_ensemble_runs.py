"""Ensemble teachers (MT-DNN): the tests that run a job, a command or processes (its fast tests:
tests/unit/teachers/test_ensemble.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FAST, compose_cfg

from distill_sweep.cli.run_job import run_job
from distill_sweep.errors import ConfigError
from distill_sweep.records.record import Record

pytestmark = pytest.mark.usefixtures("one_thread")


def test_ensemble_kd_job_on_the_toy_task_names_every_member(tmp_path: Path, shared_cache: Path) -> None:
    two = "teacher.ensemble=[{name:tiny,finetune:{seed:1}},{name:tiny,finetune:{seed:2}}]"
    cfg = compose_cfg([*FAST, "teacher=tiny_ensemble", two, "objective=vanilla_kd", "max_steps_per_epoch=2",
                       f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}"])
    record = run_job(cfg)
    assert record["status"] == "completed"
    teacher = record["teacher"]
    assert teacher["name"] == "tiny_ensemble" and teacher["source"] == "ensemble"
    assert [(m["name"], m["seed"]) for m in teacher["members"]] == [("tiny", 1), ("tiny", 2)]
    assert len({m["id"] for m in teacher["members"]} | {teacher["id"]}) == 3
    assert all(m["source"] in ("trained", "cache") and Path(m["path"]).is_dir() for m in teacher["members"])
    assert all(0 <= m["dev"]["accuracy"] <= 1 for m in teacher["members"]) and "accuracy" in teacher["dev"]
    assert Record.from_dict(record).teacher.members == teacher["members"]  # read back as written
    # the guard judges the ensemble's own dev metrics
    strict = compose_cfg([*FAST, "teacher=tiny_ensemble", two, "objective=vanilla_kd", "max_steps_per_epoch=2",
                          "guards.allow_weak_teacher=false", "guards.teacher_margin=1.0",
                          f"results_dir={tmp_path / 's'}", f"cache_dir={shared_cache}"])
    with pytest.raises(ConfigError, match=f"the teacher's dev accuracy is {teacher['dev']['accuracy']:.4f}"):
        run_job(strict)
