"""Task-specific distillation (the paper's first half): the teacher fine-tuned on the task (cached), a
student built per `student=`, then the objective's stages (intermediate -> prediction, or combined)."""

from __future__ import annotations

import numpy as np
import torch

from distill_sweep.context import RunContext
from distill_sweep.objectives import Objective, build_objective
from distill_sweep.teacher import fine_tuned_teacher

from . import register_procedure
from .common import build_student, train_student


@register_procedure("task_specific", distils=True)
def run(ctx: RunContext) -> None:
    job, data = ctx.job, ctx.data
    teacher = fine_tuned_teacher(ctx, guard=True)
    student = build_student(ctx, teacher)
    assert job.objective is not None
    train_labels = None if data.is_regression else torch.as_tensor(np.asarray(data.train["labels"]))
    terms = build_objective(job.objective, student_config=student.config, teacher_config=teacher.config,
                        layer_map=job.layer_map, train_labels=train_labels, num_labels=data.num_labels)
    objective = Objective(job.objective, terms, regression=data.is_regression)
    for module in objective.modules().values():
        module.to(ctx.device)
    stages = [ctx.stage(kind, objective.loss_fn(kind, student, teacher), objective.trainable(kind, student))
              for kind in objective.stages]
    train_student(ctx, student, stages, objective.modules())
