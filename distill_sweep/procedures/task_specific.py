"""Task-specific distillation (the paper's first half): the teacher fine-tuned on the task (cached), a
student built per `student=`, then the objective's stages (intermediate -> prediction, or combined)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel

from distill_sweep.objectives.core import Objective, build_objective
from distill_sweep.teachers.finetuned import fine_tuned_teacher
from distill_sweep.training import distributed, fsdp
from distill_sweep.training.context import RunContext
from distill_sweep.training.stages import Stage

from .common import build_student, teacher_view, train_student


def run(ctx: RunContext) -> None:
    with distributed.main_first():  # several ranks: rank 0 fine-tunes the teacher (cached), the others read it
        teacher = fine_tuned_teacher(ctx, guard=True)
    student = build_student(ctx, teacher)
    stages, modules = distillation_stages(ctx, teacher, student)
    train_student(ctx, student, stages, modules)


def distillation_stages(ctx: RunContext, teacher: PreTrainedModel, student: PreTrainedModel
                        ) -> tuple[list[Stage], dict[str, nn.Module]]:
    """The objective's stages of `student` (on the job's device) and the objective's modules to checkpoint."""
    job, data = ctx.job, ctx.data
    assert job.objective is not None
    train_labels = None if data.is_regression else torch.as_tensor(np.asarray(data.train["labels"]))
    terms = build_objective(job.objective, student_config=student.config, teacher_config=teacher.config,
                        layer_map=job.layer_map, train_labels=train_labels, num_labels=data.num_labels)
    objective = Objective(job.objective, terms, regression=data.is_regression)
    for module in objective.modules().values():
        module.to(ctx.device)
    with distributed.main_first():  # several ranks: rank 0 builds the teacher-output store, the others read it
        view = teacher_view(ctx, teacher, terms)
    if fsdp.active():  # several ranks: FSDP2 (training/fsdp.py), before the stages list their parameters
        ctx.record.fsdp = fsdp.shard_all(student, objective.modules(), teacher, job.settings.run.fsdp.teacher,
                                            ctx.device, ctx.precision,
                                            keep_gathered=bool(terms is not None and terms.student_qkv_layers))
    stages = [ctx.stage(kind, fsdp.on_ranks(objective.loss_fn(kind, student, view), objective.trainable(kind, student),
                                            [student, *objective.modules().values()]),
                        objective.trainable(kind, student))
              for kind in objective.stages]
    for stage in stages:  # e.g. TinyBERT's constant-lr intermediate stage
        stage.schedule = job.objective.schedules.get(stage.name, stage.schedule)
    return stages, objective.modules()
