"""The no-distillation baseline: the student trained on the task with cross-entropy only.

The student is built exactly as the distillation procedures build it (a truncated student is copied from
the same fine-tuned teacher's layers), so a row of this procedure differs from a KD row only in the loss.
The teacher never runs a forward here; a student that copies nothing from it (student=pretrained) needs
no teacher at all.
"""

from __future__ import annotations

from distill_sweep.teachers.finetuned import fine_tuned_teacher
from distill_sweep.training.context import RunContext
from distill_sweep.training.loop import cross_entropy_loss

from .common import build_student, train_student


def run(ctx: RunContext) -> None:
    job = ctx.job
    teacher = fine_tuned_teacher(ctx, guard=False) if job.student_kind.needs_teacher_weights else None
    student = build_student(ctx, teacher)
    del teacher  # only its weights were needed
    stage = ctx.stage("finetune", cross_entropy_loss(student, ctx.data.is_regression), list(student.parameters()))
    train_student(ctx, student, [stage])
