"""The job's teacher: given (`teacher.finetuned_path`), from the cache, or fine-tuned now by the stage
driver (once per cache key, under a lock, resumable at the step), then frozen in eval mode."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel

from distill_sweep.checkpoint import CHECKPOINT
from distill_sweep.context import RunContext
from distill_sweep.errors import ConfigError
from distill_sweep.loop import cross_entropy_loss, evaluate
from distill_sweep.stages import Stage, fmt_metrics

log = logging.getLogger("distill_sweep")


def fine_tuned_teacher(ctx: RunContext, *, guard: bool) -> PreTrainedModel:
    """The frozen, eval-mode teacher; `guard`: refuse one that does not beat the majority-class baseline."""
    from distill_sweep.metrics import majority_baseline
    from distill_sweep.models import load_teacher
    from distill_sweep.teacher_cache import cached_teacher

    cfg, data = ctx.cfg, ctx.data
    if cfg.teacher.finetuned_path:
        path, source, dev = str(cfg.teacher.finetuned_path), "given", None
    else:
        cached, source, dev = cached_teacher(cfg, ctx.cache_dir, lambda out_dir: _finetune(ctx, out_dir))
        path = str(cached)
    teacher = load_teacher(cfg.teacher, path, data.num_labels, data.label_names, len(ctx.tokenizer))
    teacher.to(ctx.device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    if dev is None:
        dev = evaluate(teacher, ctx.dev_loaders, ctx.metrics, ctx.device, ctx.precision)
    first_dev = next(iter(data.dev.values()))
    baseline = majority_baseline(cfg.task, data.train["labels"], first_dev["labels"])
    ctx.record["teacher"].update(source=source, path=path, dev=dev, majority_baseline=baseline)
    log.info("teacher (%s) dev: %s | majority-class baseline: %s", source, fmt_metrics(dev), fmt_metrics(baseline))
    if guard:
        _check_beats_baseline(ctx, dev, baseline)
    return teacher


def _finetune(ctx: RunContext, out_dir: Path) -> dict[str, float]:
    """Fine-tune the teacher into the cache's unfinished directory `out_dir` (checkpointed there, so a
    killed or preempted fine-tuning continues where it stopped in whichever job takes the lock next)."""
    from distill_sweep.models import load_teacher
    from distill_sweep.teacher_cache import finetune_settings
    from distill_sweep.train import seed_everything

    cfg, data = ctx.cfg, ctx.data
    ft = finetune_settings(cfg)
    seed_everything(ft["seed"])
    model = load_teacher(cfg.teacher, cfg.teacher.name_or_path, data.num_labels, data.label_names,
                         len(ctx.tokenizer)).to(ctx.device)
    stage = Stage("finetune", ft["epochs"], ft["lr"], ft["batch_size"], ft["warmup_ratio"],
                  cross_entropy_loss(model, bool(data.is_regression)), list(model.parameters()),
                  max_steps_per_epoch=ft["max_steps_per_epoch"])
    history: list[dict[str, Any]] = []
    log.info("fine-tuning the teacher %s on %s: %d epochs", cfg.teacher.name, cfg.task.name, stage.epochs)
    driver = ctx.driver(model=model, state={"model": model}, checkpoint=out_dir / CHECKPOINT, key=out_dir.name,
                        history=history, seed=ft["seed"], label="teacher ")
    driver.run([stage])
    model.save_pretrained(out_dir)
    ctx.tokenizer.save_pretrained(out_dir)
    (out_dir / CHECKPOINT).unlink(missing_ok=True)
    return history[-1]["dev"]


def _check_beats_baseline(ctx: RunContext, dev: dict[str, float], baseline: dict[str, float]) -> None:
    key = ctx.job.settings.task.primary_metric
    guards = ctx.job.settings.run.guards
    if dev[key] < baseline[key] + guards.teacher_margin and not guards.allow_weak_teacher:
        raise ConfigError(
            f"the teacher's dev {key} is {dev[key]:.4f}, not clearly better than the majority-class baseline "
            f"{baseline[key]:.4f} (+{guards.teacher_margin}): distilling from it would be meaningless. Check the "
            "teacher, or pass guards.allow_weak_teacher=true to proceed deliberately"
        )
