"""FastBERT (Liu et al. 2020): self-distillation into early-exit branches of the fine-tuned teacher.

The teacher is fine-tuned on the task (cached, as for every procedure), then frozen; a branch after each
of its layers but the last learns from the last classifier, without labels
(`early_exit.self_distillation_loss`), 10 epochs at 10x the task's learning rate. The last classifier is the
model's own (`teacher_head: model`) or, as in FastBERT, a classifier like the branches (`teacher_head:
fastbert`), fitted to the labels on the frozen backbone first (stage `teacher_head`, the same epochs and rate).
`dropout: true` trains as FastBERT's code does (the backbone in train mode, dropout in the branches). The record holds, per
`speeds` value, the dev metrics, the mean exit layer and the mean FLOPs per example (`early_exit` key); the
epochs' dev metrics are those of the early-exit predictions at `eval_speed`.
"""

from __future__ import annotations

import dataclasses

import torch.nn.functional as F

from distill_sweep.students.early_exit import EarlyExitModel, self_distillation_loss, speed_table
from distill_sweep.teachers.finetuned import fine_tuned_teacher
from distill_sweep.training.context import RunContext

from .common import train_student
from .fastbert_settings import FastBERTSettings


def run(ctx: RunContext) -> None:
    settings: FastBERTSettings = ctx.job.procedure_settings
    teacher = fine_tuned_teacher(ctx, guard=True)
    model = EarlyExitModel(teacher, settings.branch_width, settings.branch_heads, settings.eval_speed,
                           settings.teacher_head, settings.dropout)
    model.to(ctx.device)

    def loss_fn(batch):  # no labels needed: the last classifier teaches the branches
        return self_distillation_loss(model.all_logits(batch)), {}

    def head_loss(batch):  # FastBERT's teacher classifier learns the labels
        return F.cross_entropy(model.last_logits(batch), batch["labels"]), {}

    epochs = min(settings.epochs, ctx.job.settings.run.epochs or settings.epochs)
    stages, state = [], {"branches": model.branches}
    if model.head is not None:
        stages.append(ctx.stage("teacher_head", head_loss, list(model.head.parameters())))
        state["head"] = model.head
    stages.append(ctx.stage("self_distill", loss_fn, list(model.branches.parameters())))
    stages = [dataclasses.replace(s, epochs=epochs, lr=s.lr * settings.lr_scale) for s in stages]
    train_student(ctx, model, stages, state=state)
    first_dev = next(iter(ctx.dev_loaders.values()))
    ctx.record.early_exit = speed_table(model, first_dev, ctx.device, settings.speeds, ctx.metrics)
