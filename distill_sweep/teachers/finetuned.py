"""The job's teacher: given (`teacher.finetuned_path`), from the cache, or fine-tuned now by the stage
driver (once per cache key, under a lock, resumable at the step), then frozen in eval mode.

An ensemble teacher (`teacher.ensemble`, MT-DNN's ensemble distillation) is several such teachers, each
fine-tuned once and cached like a single teacher, behind one module (`EnsembleTeacher`) whose logits give the
mean of the members' probabilities; the guard and the record's dev metrics are the ensemble's.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

from distill_sweep.config.schema import TaskSettings, TeacherSettings
from distill_sweep.data.holdout import is_trial
from distill_sweep.errors import ConfigError
from distill_sweep.models.loading import (
    check_label_order,
    inference_dtype,
    load_masked_lm,
    load_teacher,
    read_model_config,
    teacher_config,
    tokenizer_source,
)
from distill_sweep.records.disk import writing
from distill_sweep.teachers.cache import TeacherSpec, cached_teacher, finetune_settings
from distill_sweep.training import distributed
from distill_sweep.training.checkpoint_files import CHECKPOINT
from distill_sweep.training.context import RunContext
from distill_sweep.training.loop import cross_entropy_loss, evaluate, seed_everything
from distill_sweep.training.metrics import majority_baseline
from distill_sweep.training.stages import Stage, fmt_metrics

log = logging.getLogger("distill_sweep")


class EnsembleTeacher(nn.Module):
    """Frozen members behind one classifier whose logits are log mean_m softmax(z_m): the log of the mean of
    the members' probabilities (for regression, the members' mean prediction).

    Every consumer then sees the ensemble's distribution, softmax(logits) = the mean probability; the
    prediction loss at temperature T distils softmax(log p_mean / T), i.e. p_mean^(1/T) renormalised. At T = 1
    (MT-DNN) that is the mean itself; at T != 1 it is the tempered mean, not the mean of the members' tempered
    probabilities. The first member is the ensemble's backbone: its config describes the ensemble, and
    students are built from it (`student_source`).
    """

    def __init__(self, members: list[nn.Module], *, regression: bool) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)
        self.regression = regression

    @property
    def config(self) -> Any:
        return self.members[0].config

    def forward(self, **inputs: Tensor) -> SequenceClassifierOutput:
        logits = torch.stack([member(**inputs).logits.float() for member in self.members])  # (members, B, C)
        if self.regression:
            return SequenceClassifierOutput(logits=logits.mean(0))
        log_mean = torch.logsumexp(F.log_softmax(logits, dim=-1), dim=0) - math.log(len(self.members))
        return SequenceClassifierOutput(logits=log_mean)


def student_source(teacher: nn.Module) -> nn.Module:
    """The model a student is built or copied from: an ensemble's first member, else the teacher."""
    return teacher.members[0] if isinstance(teacher, EnsembleTeacher) else teacher


def fine_tuned_teacher(ctx: RunContext, *, guard: bool) -> PreTrainedModel:
    """The frozen, eval-mode teacher (an `EnsembleTeacher` for `teacher.ensemble`); `guard`: refuse one that
    does not beat the majority-class baseline."""
    job, data = ctx.job, ctx.data
    told = ctx.record.teacher  # what the record says of the teacher
    trial = is_trial(data)
    if not job.members:
        teacher, info = _one_teacher(ctx, job.teacher)
        told.source, told.path, told.dev = info["source"], info["path"], info["dev"]
        dev = info["dev"]
        if trial and info["source"] != "given":  # its cached score is on the real dev splits: scored on the
            # holdout too, so the guard sets it beside the holdout's own baseline (a given one was scored there)
            dev = evaluate(teacher, ctx.dev_loaders, ctx.metrics, ctx.device, ctx.precision)
    else:
        loaded = [_one_teacher(ctx, member) for member in job.members]
        ensemble = EnsembleTeacher([m for m, _ in loaded], regression=bool(data.is_regression))
        dev = evaluate(ensemble, ctx.dev_loaders, ctx.metrics, ctx.device, ctx.precision)
        described = told.members or [{} for _ in loaded]
        for entry, (_, info) in zip(described, loaded, strict=True):
            entry.update(info)
        told.source, told.path, told.dev, told.members = "ensemble", None, dev, described
        for i, (_, info) in enumerate(loaded):
            log.info("ensemble member %d (%s) dev: %s", i, info["source"], fmt_metrics(info["dev"]))
        teacher = ensemble
    first_dev = next(iter(data.dev.values()))  # a trial's: the holdout, which `dev` is then scored on
    baseline = majority_baseline(job.settings.task, first_dev["labels"])  # the split's own majority
    told.majority_baseline = baseline
    split = "holdout" if trial else "dev"
    log.info("teacher (%s) %s: %s | majority-class baseline (%s): %s", told.source, split,
             fmt_metrics(dev), split, fmt_metrics(baseline))
    if guard:
        check_beats_baseline(ctx, dev, baseline, f"the majority-class baseline ({split})", split=split)
    return teacher  # type: ignore[return-value]


def check_ensemble(teacher: TeacherSettings, members: list[TeacherSpec], task: TaskSettings, procedure: Any,
                   objective: Any | None, teacher_arch: Any) -> None:
    """Refuse, from the configs alone (config.json files, never weights), an ensemble teacher this job cannot
    use: one `ConfigError` line. `teacher_arch`: the teacher block's architecture config."""
    if not members:
        return
    if not getattr(procedure, "uses_student", True):
        raise ConfigError(f"procedure={procedure.name} trains the teacher itself: it takes one teacher, not "
                          "teacher.ensemble")
    if objective is not None and objective.terms and {"intermediate", "combined"} & set(objective.stages):
        raise ConfigError(f"objective={objective.name} has intermediate-layer terms ({', '.join(objective.terms)}): "
                          "an ensemble teacher distils its averaged predictions only; use a prediction-stage "
                          "objective (e.g. vanilla_kd) or one teacher")
    tokenizer = tokenizer_source(teacher)
    shape = ("model_type", "num_hidden_layers", "hidden_size", "num_attention_heads")
    for i, member in enumerate(members):
        key, block = f"teacher.ensemble[{i}]", member.settings
        if tokenizer_source(block) != tokenizer:
            raise ConfigError(f"{key} uses the tokenizer {tokenizer_source(block)!r}, the teacher "
                              f"{tokenizer!r}: the data is tokenised once, so members share the tokenizer (set "
                              f"its tokenizer: {tokenizer})")
        if block.finetuned_path:  # a given classifier: its own head must predict the task's labels
            saved = read_model_config(str(block.finetuned_path), f"{key}.finetuned_path", bool(block.trust_remote_code))
            if int(saved.num_labels) != int(task.num_labels):
                raise ConfigError(f"{key}.finetuned_path={block.finetuned_path!r} predicts {saved.num_labels} labels "
                                  f"and the task has {task.num_labels}: ensemble members share the task's label set")
            try:
                check_label_order(saved, list(task.label_names), str(block.finetuned_path))
            except ConfigError as err:
                raise ConfigError(f"{key}: {err}; ensemble members share the task's label set") from None
        arch = teacher_config(block, task.num_labels)
        if i == 0 and [getattr(arch, k, None) for k in shape] != [getattr(teacher_arch, k, None) for k in shape]:
            raise ConfigError(f"{key} must have the teacher's architecture: students are built from the first "
                              "member, and the teacher block describes them (put the member with another "
                              "backbone later in the list)")


def _one_teacher(ctx: RunContext, spec: TeacherSpec) -> tuple[PreTrainedModel, dict[str, Any]]:
    """The frozen teacher of `spec` (one teacher, or one member) and its source, path and dev metrics."""
    data = ctx.data
    if spec.settings.finetuned_path:
        path, source, dev = str(spec.settings.finetuned_path), "given", None
    else:
        cached, source, dev = cached_teacher(spec, ctx.job.task, ctx.cache_dir,
                                             lambda out_dir: _finetune(ctx, out_dir, spec.settings))
        path = str(cached)
    teacher = load_teacher(spec.settings, path, data.num_labels, data.label_names, len(ctx.tokenizer))
    # the run's compute dtype, cast before it moves: no float32 copy on the device (models/loading.py)
    teacher.to(inference_dtype(ctx.precision)).to(ctx.device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    if dev is None:
        dev = evaluate(teacher, ctx.dev_loaders, ctx.metrics, ctx.device, ctx.precision)
    return teacher, {"source": source, "path": path, "dev": dev}


def _finetune(ctx: RunContext, out_dir: Path, settings: TeacherSettings) -> dict[str, float]:
    """Fine-tune the teacher `settings` (the job's, or an ensemble member's) into the cache's unfinished
    directory `out_dir` (checkpointed there, so a killed or preempted fine-tuning continues where it stopped in
    whichever job takes the lock next)."""
    data = ctx.data
    ft = finetune_settings(settings.finetune, ctx.job.settings.task.recipe)
    seed_everything(ft["seed"])
    model = load_teacher(settings, settings.name_or_path, data.num_labels, data.label_names,
                         len(ctx.tokenizer)).to(ctx.device)
    stage = Stage("finetune", ft["epochs"], ft["lr"], ft["batch_size"], ft["warmup_ratio"],
                  cross_entropy_loss(model, bool(data.is_regression)), list(model.parameters()),
                  max_steps_per_epoch=ft["max_steps_per_epoch"])
    history: list[dict[str, Any]] = []
    log.info("fine-tuning the teacher %s (seed %d) on %s: %d epochs", settings.name, ft["seed"], ctx.job.task,
             stage.epochs)
    driver = ctx.driver(role="teacher", model=model, state={"model": model}, checkpoint=out_dir / CHECKPOINT,
                        key=out_dir.name, history=history, seed=ft["seed"], label="teacher ", train=data.teacher_train,
                        teacher_optimizer=settings.finetune.optimizer())
    with distributed.alone():  # several ranks: rank 0 alone fine-tunes (main_first), the others wait for the cache
        driver.run([stage])
    with writing(out_dir, f"its {CHECKPOINT} is kept: the next run saves the teacher from it"):
        model.save_pretrained(out_dir)
        ctx.tokenizer.save_pretrained(out_dir)
    (out_dir / CHECKPOINT).unlink(missing_ok=True)
    return history[-1]["dev"]


def check_beats_baseline(ctx: RunContext, dev: dict[str, float], baseline: dict[str, float], what: str, *,
                         split: str = "dev") -> None:
    """Refuse a teacher whose score on `split` is not clearly above `what` (a baseline that reads no input, on
    the same split), unless guards.allow_weak_teacher: then the record's teacher entry says `weak_allowed`."""
    key = ctx.job.settings.task.primary_metric
    guards = ctx.job.settings.run.guards
    if dev[key] >= baseline[key] + guards.teacher_margin:
        return
    if guards.allow_weak_teacher:
        ctx.record.teacher.weak_allowed = True
        log.warning("the teacher's %s %s %.4f is not clearly above %s %.4f: distilling anyway "
                    "(guards.allow_weak_teacher=true)", split, key, dev[key], what, baseline[key])
        return
    raise ConfigError(
        f"the teacher's {split} {key} is {dev[key]:.4f}, not clearly better than {what} {baseline[key]:.4f} "
        f"(+{guards.teacher_margin}): distilling from it would be meaningless. Check the teacher, or pass "
        "guards.allow_weak_teacher=true to proceed deliberately"
    )


def masked_lm_teacher(ctx: RunContext) -> PreTrainedModel:
    """The frozen, eval-mode teacher with its MLM head (task-agnostic distillation: never fine-tuned). One
    built from `config` gets random weights seeded by `teacher.finetune.seed`, the same for every student."""
    settings = ctx.job.settings.teacher
    seed_everything(int(settings.finetune.seed))
    teacher = load_masked_lm(settings, len(ctx.tokenizer))
    # in the run's compute dtype (models/loading.py), and it stays in eval mode: dropout off throughout (unlike the
    # reference)
    teacher.to(inference_dtype(ctx.precision)).to(ctx.device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    source = "random" if settings.name_or_path is None else "given"
    ctx.record.teacher.source, ctx.record.teacher.path = source, settings.name_or_path
    return teacher
