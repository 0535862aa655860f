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
from dataclasses import dataclass, field
from typing import Any, Literal

import torch.nn.functional as F

from distill_sweep.context import RunContext
from distill_sweep.early_exit import EarlyExitModel, self_distillation_loss, speed_table
from distill_sweep.errors import ConfigError
from distill_sweep.settings import UNHASHED_AT_DEFAULT
from distill_sweep.teacher import fine_tuned_teacher

from .base import ProcedureSettings, register_procedure
from .common import train_student


@dataclass
class FastBERTSettings(ProcedureSettings):
    branch_width: int = field(default=128, metadata={"ge": 1})  # width of each branch classifier
    branch_heads: int = field(default=2, metadata={"ge": 1})  # self-attention heads of each branch
    epochs: int = field(default=10, metadata={"ge": 1})  # of self-distillation (`epochs=` caps it for smoke runs)
    lr_scale: float = field(default=10.0, metadata={"gt": 0.0})  # x the task's learning rate
    # the speeds evaluated: entropy thresholds in [0, 1], 0 = the full model
    speeds: list[float] = field(default_factory=lambda: [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    eval_speed: float = field(default=0.5, metadata={"ge": 0.0, "le": 1.0})  # the epochs' dev metrics
    # the last layer's classifier, which teaches the branches: the model's own (model) or, as in FastBERT, one
    # like the branches (fastbert), fitted to the labels on the frozen backbone first
    teacher_head: Literal["model", "fastbert"] = field(default="model", metadata=UNHASHED_AT_DEFAULT)
    # dropout while the branches learn: off, or as FastBERT's code trains (the frozen backbone in train mode,
    # the branches' attention weights dropped at the backbone's attention_probs_dropout_prob)
    dropout: bool = field(default=False, metadata=UNHASHED_AT_DEFAULT)

    def validate(self, where: str) -> None:
        if self.branch_width % self.branch_heads:
            raise ConfigError(f"{where}.branch_width={self.branch_width} is not a multiple of "
                              f"{where}.branch_heads={self.branch_heads}")
        bad = [s for s in self.speeds if not 0.0 <= s <= 1.0]
        if bad or not self.speeds:
            raise ConfigError(f"{where}.speeds={self.speeds}: every speed must be in [0, 1] (and at least one)")

    def check_task(self, task: Any, where: str) -> None:
        if task.is_regression:  # one output: no entropy to exit on, nothing for the branches to learn
            raise ConfigError(f"procedure=fastbert exits on the entropy of class probabilities: task={task.name} "
                              "is a regression task")


@register_procedure("fastbert", distils=False, settings=FastBERTSettings, uses_student=False)
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
    ctx.record["early_exit"] = speed_table(model, first_dev, ctx.device, settings.speeds, ctx.metrics)
