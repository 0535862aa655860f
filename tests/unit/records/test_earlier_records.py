"""Records, checkpoints and shared-store keys written by the code before the typed-settings redesign are
still found, resumed and named the same (tests/fixtures/v2/README.md says how they were written)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers import V2_BASE as BASE
from helpers import V2_KEYS as KEYS
from helpers import compose_cfg

from distill_sweep.job.identity import identify
from distill_sweep.teachers.cache import TeacherSpec
from distill_sweep.teachers.output_plan import group_id


def as_before(teacher: TeacherSpec) -> TeacherSpec:
    """The teacher's key as that code computed it: without the toy data's size and seed (task.recipe's num_train,
    num_dev, seed), which the teacher is fine-tuned on and which entered its key with the declared kinds (issue 48: a
    toy teacher of 256 examples had shared the key of one of 4000). The one change to these keys; nothing else."""
    task = {k: v for k, v in teacher.key["task"].items() if k != "recipe"}
    assert set(teacher.key["task"].get("recipe", {})) <= {"num_train", "num_dev", "seed"}
    return dataclasses.replace(teacher, key={**teacher.key, "task": task})


@pytest.mark.parametrize("job", KEYS["jobs"], ids=lambda job: " ".join(job["overrides"]))
def test_config_hashes_and_store_keys_are_unchanged(job: dict, tmp_path: Path) -> None:
    ident = identify(compose_cfg([*BASE, *job["overrides"], f"results_dir={tmp_path}"]))
    assert ident.digest == job["config_hash"]
    assert str(ident.out_dir.relative_to(tmp_path)) == job["out_dir"]
    assert as_before(ident.teacher).directory(tmp_path, ident.task).name == job["teacher_dir"]
    assert group_id(as_before(ident.teacher)) == job["group_id"]
    assert [as_before(m).directory(tmp_path, ident.task).name for m in ident.members] == job["members"]
