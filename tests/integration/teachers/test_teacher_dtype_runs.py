"""Teachers are held in the dtype the run computes in (models/loading.py `inference_dtype`): the tests that run a
job, a command or processes (its fast tests: tests/unit/teachers/test_teacher_dtype.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import param_dtypes as dtypes


@pytest.mark.parametrize("student", ["truncated", "fresh"])
def test_a_bf16_causal_lm_job_trains_a_float32_student_from_a_bf16_teacher(student, tmp_path: Path, monkeypatch):
    """The teacher's config says bf16 once it is read in bf16: the student built from it must not be."""
    from helpers import compose_cfg

    from distill_sweep.cli.run_job import run_job
    from distill_sweep.procedures import causal_lm

    seen = {}
    real = causal_lm.train_student

    def spy(ctx, model, stages, modules):
        seen["student"] = dtypes(model)
        return real(ctx, model, stages, modules)

    monkeypatch.setattr(causal_lm, "train_student", spy)
    record = run_job(compose_cfg(["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama",
                                  "procedure.teacher_steps=4", "procedure.epochs=1", "max_steps_per_epoch=2",
                                  f"student={student}", "student.num_layers=2", "objective=fkl", "precision=bf16",
                                  "guards.allow_weak_teacher=true",
                                  f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"]))
    assert seen["student"] == {torch.float32}
    assert all(e["train_loss"] == e["train_loss"] for e in record["epochs"])  # finite: the step ran in bf16


@pytest.mark.parametrize("procedure", ["task_specific", "task_agnostic"])
def test_an_encoder_teacher_is_held_in_bf16_under_bf16(procedure, tmp_path: Path, monkeypatch):
    """The fine-tuned classifier (teachers/finetuned.py `_one_teacher`) and the MLM teacher (`masked_lm_teacher`):
    bf16 under precision=bf16 (fine-tuned in float32 first), the student float32."""
    from helpers import FAST, compose_cfg

    from distill_sweep.cli.run_job import run_job
    from distill_sweep.procedures import common
    from distill_sweep.teachers import finetuned

    seen = {}
    wrap = "_one_teacher" if procedure == "task_specific" else "masked_lm_teacher"
    real_teacher, real_student = getattr(finetuned, wrap), common.build_student

    def teacher_spy(*args):
        out = real_teacher(*args)
        seen["teacher"] = dtypes(out[0] if isinstance(out, tuple) else out)
        return out

    def student_spy(*args):
        seen["student"] = dtypes(student := real_student(*args))
        return student

    monkeypatch.setattr(finetuned, wrap, teacher_spy)
    if procedure == "task_agnostic":
        from distill_sweep.procedures import task_agnostic
        monkeypatch.setattr(task_agnostic, "masked_lm_teacher", teacher_spy)
        overrides = ["procedure=task_agnostic", "teacher=tiny_mlm", "logger=none", "threads=1",
                     "corpus.num_documents=60", "corpus.dev_documents=10", "procedure.epochs=1",
                     "procedure.max_steps=1", "guards.allow_weak_teacher=true", "objective=hid_seq"]
    else:
        from distill_sweep.procedures import task_specific
        monkeypatch.setattr(task_specific, "build_student", student_spy)
        overrides = [*FAST, "teacher.finetune.epochs=1", "max_steps_per_epoch=1", "objective=hid_seq"]
    record = run_job(compose_cfg([*overrides, "precision=bf16", "student.num_layers=2",
                                  f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"]))
    assert record["status"] == "completed", record.get("error")
    assert seen["teacher"] == {torch.bfloat16}
    if procedure == "task_specific":
        assert seen["student"] == {torch.float32}
