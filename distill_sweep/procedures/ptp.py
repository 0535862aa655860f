"""PEA-KD's PTP (Pretraining with Teacher's Predictions, seed 003 Sec. 3.3), then the objective's stages.

Before distillation the student learns, with cross-entropy, four labels that the fine-tuned teacher gives
the training set (the paper's Table 1; `ptp_labels`):

  0 confidently correct    the teacher's argmax is the gold label, its max probability > `correct`
  1 unconfidently correct  the argmax is the gold label, max probability <= `correct`
  2 confidently wrong      the argmax is another label, max probability > `wrong`
  3 unconfidently wrong    the argmax is another label, max probability <= `wrong`

Two thresholds per task, as in the paper's code (its text has one t in (0.5, 1)). The `ptp` stage trains
the student's body with a temporary 4-class head (the task head's layout, 4 outputs, freshly initialised)
put in the task head's place by a forward hook. The task head is not trained there, so the distillation
stages start from a fresh task head, as the paper's code swaps in a new classifier. `ptp` is not a
scored stage: the dev metrics of its epochs are those of the untrained task head.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PreTrainedModel

from distill_sweep.data.batching import make_loader
from distill_sweep.records.blocks import PTPInfo
from distill_sweep.teachers.finetuned import fine_tuned_teacher
from distill_sweep.training.context import RunContext
from distill_sweep.training.loop import Batch, LossFn, model_inputs, predict

from .common import build_student, train_student
from .ptp_settings import PTPSettings, Thresholds
from .task_specific import distillation_stages

PTP_CLASSES = ("confidently_correct", "unconfidently_correct", "confidently_wrong", "unconfidently_wrong")


def ptp_labels(teacher_logits: Tensor, gold: Tensor, correct: float, wrong: float) -> Tensor:
    """The PTP label (index into PTP_CLASSES) of each example from the teacher's logits (N, C)."""
    confidence, prediction = torch.softmax(teacher_logits.float(), dim=-1).max(dim=-1)
    right = prediction == gold
    confident = torch.where(right, confidence > correct, confidence > wrong)
    return 2 * (~right).long() + (~confident).long()


def ptp_head(task_head: nn.Module, std: float) -> nn.Module:
    """A fresh head of `task_head`'s layout whose last Linear has one output per PTP class."""
    head = copy.deepcopy(task_head)
    linears = [name for name, m in head.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise TypeError(f"the student's task head {type(task_head).__name__} has no Linear output layer")
    parent, _, child = linears[-1].rpartition(".")
    out = nn.Linear(head.get_submodule(linears[-1]).in_features, len(PTP_CLASSES))
    if child:
        setattr(head.get_submodule(parent), child, out)
    else:  # the head is one Linear (BERT)
        head = out
    for module in head.modules():  # BERT's initialisation: N(0, initializer_range), zero bias
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    return head


def task_head(student: PreTrainedModel) -> nn.Module:
    head = getattr(student, "classifier", None)
    if not isinstance(head, nn.Module):
        raise TypeError(f"procedure=ptp needs a student with a `classifier` task head; {type(student).__name__} "
                        "has none")
    return head


def ptp_loss(student: PreTrainedModel, head: nn.Module, labels: Tensor) -> LossFn:
    """CE of the PTP head's logits against `labels[batch["idx"]]`."""
    classifier = task_head(student)

    def loss_fn(batch: Batch) -> tuple[Tensor, dict[str, float]]:
        # the PTP head reads what the task head would (BERT: the pooled output after dropout)
        handle = classifier.register_forward_hook(lambda _mod, args, _out: head(*args))
        try:
            logits = student(**model_inputs(batch)).logits
        finally:
            handle.remove()
        return F.cross_entropy(logits.float(), labels[batch["idx"]]), {}

    return loss_fn


def teacher_ptp_labels(ctx: RunContext, teacher: PreTrainedModel, thresholds: Thresholds) -> Tensor:
    """The PTP label of every training example, at its `idx`, on the job's device (the teacher in eval
    mode, without grad)."""
    train = ctx.data.train
    loader = make_loader(train, ctx.job.settings.run.eval_batch_size, shuffle=False, seed=0,
                         pad_token_id=int(ctx.tokenizer.pad_token_id))
    logits, gold = predict(teacher, loader, ctx.device, ctx.precision)  # in the training set's row order
    labels = ptp_labels(torch.from_numpy(logits), torch.from_numpy(gold), thresholds.correct, thresholds.wrong)
    idx = torch.as_tensor(np.asarray(train["idx"]), dtype=torch.long)
    table = torch.full((int(idx.max()) + 1,), -1, dtype=torch.long)  # -1: an index no example has (CE refuses it)
    table[idx] = labels
    return table.to(ctx.device)


def run(ctx: RunContext) -> None:
    job = ctx.job
    settings: PTPSettings = job.procedure_settings
    thresholds = settings.thresholds[job.task]
    teacher = fine_tuned_teacher(ctx, guard=True)
    student = build_student(ctx, teacher)
    labels = teacher_ptp_labels(ctx, teacher, thresholds)
    counts = torch.bincount(labels[labels >= 0], minlength=len(PTP_CLASSES)).tolist()
    ctx.record.ptp = PTPInfo(thresholds=dataclasses.asdict(thresholds), labels=dict(zip(PTP_CLASSES, counts)))
    head = ptp_head(task_head(student), float(student.config.initializer_range)).to(ctx.device)
    frozen = {id(p) for p in task_head(student).parameters()}
    body = [p for p in student.parameters() if id(p) not in frozen]
    pre = ctx.stage("ptp", ptp_loss(student, head, labels), body + list(head.parameters()))
    if settings.epochs is not None:  # the top-level `epochs=` still caps it (smoke runs)
        pre = dataclasses.replace(pre, epochs=min(settings.epochs, job.settings.run.epochs or settings.epochs))
    stages, modules = distillation_stages(ctx, teacher, student)
    train_student(ctx, student, [pre, *stages], {"ptp_head": head, **modules})
