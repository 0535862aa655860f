"""The one stage driver: epochs, evaluation, checkpoint/resume, preemption and tracking for every stage of
every procedure (the teacher's own fine-tuning included).

A procedure hands it a list of `Stage`s (loss function, trainable parameters, epochs, lr, batch size,
warmup) and the modules whose state a checkpoint holds. The driver runs them in order with
`loop.train_epoch`, evaluates after every epoch, and checkpoints at every epoch and stage end, every
`checkpoint.every_steps` steps, and when SLURM announces preemption; re-running resumes at the step.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from distill_sweep.training import distributed, sharded_checkpoint
from distill_sweep.training.checkpoint import (
    PreemptionSignal,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from distill_sweep.training.cost import CPU_MEASURED, FLOPS_COUNTED, GPU_MEASURED, StepFlops
from distill_sweep.training.loop import (
    EpochProgress,
    LossFn,
    build_optimizer,
    evaluate,
    linear_schedule,
    steps_per_epoch,
    train_epoch,
)
from distill_sweep.training.processes import EVERY_RANK

log = logging.getLogger("distill_sweep")
# Offsets of the data-order seed per stage kind: each stage's epochs see their own shuffles.
STAGE_SEED_OFFSET = {"finetune": 0, "intermediate": 100, "prediction": 200, "combined": 300, "self_distill": 400,
                     "ptp": 500, "pretrain": 600, "distill": 700, "teacher_head": 800}


@dataclass
class Stage:
    name: str  # finetune | intermediate | prediction | combined
    epochs: int
    lr: float
    batch_size: int
    warmup_ratio: float
    loss_fn: LossFn
    params: list[nn.Parameter]
    max_steps_per_epoch: int | None = None
    schedule: str = "linear"  # linear warmup then decay to 0 | constant


class StageClock:
    """The time left in a stage, for the progress lines of logs without a terminal: from the steps per second since
    the first step this process saw (a resumed job starts a new clock; in a pack, the lockstep's wall time)."""

    def __init__(self) -> None:
        self.start: tuple[float, int] | None = None  # (monotonic time, steps done) at the first step seen

    def left(self, done: int, total: int) -> str:
        """`, ~4m05s left in the stage` after the first step seen; "" until a rate can be measured."""
        now = time.monotonic()
        if self.start is None:
            self.start = (now, done)
            return ""
        seconds, steps = now - self.start[0], done - self.start[1]
        if steps <= 0 or seconds <= 0:
            return ""
        return f", ~{duration(max(0, total - done) * seconds / steps)} left in the stage"


def duration(seconds: float) -> str:
    """4m05s, 1h02m, 12s: a time left, to the precision a reader needs."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def epoch_seed(seed: int, stage: str, epoch: int) -> int:
    return seed * 1_000 + STAGE_SEED_OFFSET[stage] + epoch


class StageDriver:
    """Runs stages over one model (evaluated after each epoch), resumable from `checkpoint`.

    `state` names the modules a checkpoint holds (e.g. {"student": ..., "objective": ...}); `history`
    receives one entry per epoch; `tracker` (or None) gets the losses and dev metrics.
    """

    def __init__(self, *, model: nn.Module, state: dict[str, nn.Module], train_size: int,
                 loader: Callable[[Stage, int], Any], dev_loaders: dict[str, Any],
                 metrics: Callable[..., dict[str, float]], device: torch.device, precision: str,
                 optimizer_cfg: Any, checkpoint: Path, key: str, history: list[dict[str, Any]],
                 every_steps: int = 0, log_every: int = 50, skip_nonfinite: bool = False, tracker: Any = None,
                 label: str = "", evaluate_fn: Callable[..., dict[str, float]] = evaluate) -> None:
        self.model, self.state, self.train_size, self.loader = model, state, train_size, loader
        self.dev_loaders, self.metrics, self.device, self.precision = dev_loaders, metrics, device, precision
        self.optimizer_cfg, self.ckpt_path, self.key, self.history = optimizer_cfg, checkpoint, key, history
        self.every, self.log_every, self.skip_nonfinite = every_steps, max(1, log_every), skip_nonfinite
        self.tracker, self.label = tracker, label
        self.clock = StageClock()  # a new one per stage (_run_stage)
        self.evaluate = evaluate_fn  # (model, dev_loaders, metrics, device, precision) -> dev metrics
        # a member of a pack (training/pack.py): hands the turn to the other members after each step; True when
        # the pack was asked to stop
        self.turn: Callable[[], bool] | None = None
        self.scored_on = "dev"  # what the epoch lines call the split it is scored on (a tuning trial's: holdout)
        # a pruned tuning trial's (training/trial_pruning.py): called with each history entry's index and entry
        # once evaluated; what it returns (not None) stops the stages there, kept in `stopped`
        self.after_evaluation: Callable[[int, dict[str, Any]], dict[str, Any] | None] | None = None
        self.stopped: dict[str, Any] | None = None
        # where we are: stage index, epoch (1-based) and steps done in it, plus totals for samples/s
        self.pos = {"stage": 0, "epoch": 1, "step": 0, "global_step": 0, "train_samples": 0.0,
                    "train_seconds": 0.0}
        # the student's driver measures what its training costs (training/cost.py; ctx.driver turns it on): the
        # sums live in the position, so that a resumed job adds to its earlier attempts'
        self.flops: StepFlops | None = None
        # an FSDP job (training/fsdp.py): every rank writes its shards of the checkpoint (sharded_checkpoint.py)
        self.sharded = any(sharded_checkpoint.is_sharded(m) for m in state.values())
        self.resume = sharded_checkpoint.check(load_checkpoint(checkpoint, key), checkpoint)
        if self.resume is not None and "position" not in self.resume:
            log.warning("ignoring %s: written by an older version that kept no step position", checkpoint)
            self.resume = None
        self.resumed = self.resume is not None
        if self.resume is not None:
            self.pos.update(self.resume["position"])
            sharded_checkpoint.load_modules(self.resume, state, checkpoint)
            self.history[:] = self.resume["history"]

    def measure_cost(self) -> None:
        """Measure the training's CPU-seconds and FLOPs into the position (`cost`, training/cost.py)."""
        for key in ("train_cpu_seconds", "train_flops"):
            self.pos.setdefault(key, 0.0)
        self.pos.setdefault("flops_per_step", {})
        self.flops = StepFlops(self.pos["flops_per_step"])

    def cost(self) -> dict[str, Any] | None:
        """What the training cost so far (the record's `cost` block), None where it was not measured."""
        if self.flops is None:
            return None
        known = self.pos.get("flops_complete", True)
        cost: dict[str, Any] = {
            "cpu_seconds": float(self.pos["train_cpu_seconds"]), "cpu_measured": CPU_MEASURED,
            "gpu_seconds": float(self.pos["train_seconds"]) if self.device.type == "cuda" else None,
            "flops": float(self.pos["train_flops"]) if known else None, "steps": int(self.pos["global_step"]),
            "flops_per_step": dict(self.pos["flops_per_step"]), "flops_counted": FLOPS_COUNTED,
            "ranks": distributed.world().size}
        if cost["gpu_seconds"] is not None:
            cost["gpu_measured"] = GPU_MEASURED
        return cost

    @property
    def resumed_wandb_id(self) -> str | None:
        return self.resume.get("wandb_id") if self.resume else None

    def run(self, stages: list[Stage]) -> None:
        if self.resume is not None:
            log.info("%sresuming from %s at %s epoch %d step %d", self.label, self.ckpt_path,
                     stages[min(self.pos["stage"], len(stages) - 1)].name, self.pos["epoch"], self.pos["step"],
                     extra=EVERY_RANK)
        with PreemptionSignal() as self.preempt:
            for index in range(self.pos["stage"], len(stages)):
                self._run_stage(index, stages[index])
                if self.stopped is not None:  # pruned: no more epochs or stages (the record says where)
                    return
                self.pos.update(stage=index + 1, epoch=1, step=0)
                self._snapshot(None, None, None)  # stage boundary: the next stage gets a fresh optimiser

    @property
    def samples_per_s(self) -> float | None:
        """Training samples per second of the job (all ranks: each counts its own slice)."""
        seconds = self.pos["train_seconds"]
        return self.pos["train_samples"] * distributed.world().size / seconds if seconds else None

    def _run_stage(self, index: int, stage: Stage) -> None:
        n_steps = steps_per_epoch(self.train_size, stage.batch_size, stage.max_steps_per_epoch)
        optimizer = build_optimizer(stage.params, self.optimizer_cfg, stage.lr)
        total = n_steps * stage.epochs
        scheduler = linear_schedule(optimizer, total, stage.warmup_ratio if stage.schedule == "linear" else 0.0,
                                    decay=stage.schedule == "linear")
        progress = None
        self.clock = StageClock()
        if self.resume is not None and index == self.resume["position"]["stage"]:
            if self.resume["optimizer"] is not None:
                sharded_checkpoint.load_optimizer(self.resume, self.state, optimizer, self.ckpt_path)
                scheduler.load_state_dict(self.resume["scheduler"])
            if self.resume["progress"] is not None:
                progress = EpochProgress(**self.resume["progress"])
                if not distributed.is_main():  # its token counts are all ranks' (see _snapshot): rank 0 resumes them
                    progress.real_tokens = progress.padded_tokens = 0
            set_rng_state(self.resume["rng"])
            self.resume = None
        for epoch in range(self.pos["epoch"], stage.epochs + 1):
            self.pos["epoch"] = epoch
            for module in self.state.values():
                module.train()
            on_step = functools.partial(self._on_step, stage, n_steps, optimizer, scheduler)
            progress = train_epoch(iter(self.loader(stage, epoch)), stage.loss_fn, stage.params, optimizer,
                                   scheduler, device=self.device, precision=self.precision, num_steps=n_steps,
                                   progress=progress, max_grad_norm=float(self.optimizer_cfg.max_grad_norm),
                                   skip_nonfinite=self.skip_nonfinite, on_step=on_step,
                                   desc=f"{self.label}{stage.name} {epoch}/{stage.epochs}",
                                   step_context=None if self.flops is None else
                                   functools.partial(self.flops.step, stage.name))
            self._end_epoch(stage, epoch, n_steps, progress.summary())
            progress = None
            if self.after_evaluation is not None:
                self.stopped = self.after_evaluation(len(self.history) - 1, self.history[-1])
                if self.stopped is not None:
                    return
            if epoch < stage.epochs:
                self.pos.update(epoch=epoch + 1, step=0)
                self._snapshot(optimizer, scheduler, None)

    def _on_step(self, stage: Stage, n_steps: int, optimizer: Any, scheduler: Any, progress: EpochProgress,
                 loss: float) -> None:
        self.pos["step"] = progress.steps
        if progress.steps % self.log_every == 0:
            step = self.pos["global_step"] + progress.steps
            if self.tracker is not None:
                self.tracker.log({f"{stage.name}/loss": loss, f"{stage.name}/lr": scheduler.get_last_lr()[0]},
                                 step=step)
            if not sys.stderr.isatty():  # SLURM logs: a line now and then instead of a progress bar
                done = (self.pos["epoch"] - 1) * n_steps + progress.steps
                log.info("%s%s epoch %d step %d/%d loss %.4f%s", self.label, stage.name, self.pos["epoch"],
                         progress.steps, n_steps, loss, self.clock.left(done, n_steps * stage.epochs))
        pack_stops = self.turn() if self.turn is not None else False
        # ranks get SLURM's signal at different steps: all stop at the first step where one has it
        stop = distributed.any_rank(self.preempt.requested or pack_stops, self.device)
        if (self.every and progress.steps % self.every == 0 and progress.steps < n_steps) or stop:
            self._snapshot(optimizer, scheduler, progress)
        if stop:
            self.on_preempt()
            if pack_stops:  # the pack's process holds the signal: it hands it on once every member has stopped
                raise SystemExit("stopped with its pack (the pack was signalled); checkpoint saved")
            # submitit requeues the job and exits; the requeued job resumes from here. Its handler requeues on
            # global rank 0 only (on other ranks it returns): rank 0 hands the signal on also when only another
            # rank has it so far, else nobody requeued and the job ended unfinished (its record `running`).
            if self.preempt.requested or distributed.is_main():
                self.preempt.forward()
            raise SystemExit("stopped with the other ranks (one was signalled); rank 0 saved the checkpoint")

    def on_preempt(self) -> None:
        """Called after the preemption checkpoint, before the signal goes on (the job counts requeues)."""

    def _end_epoch(self, stage: Stage, epoch: int, n_steps: int, stats: dict[str, float]) -> None:
        step_flops = self.flops.per_step.get(stage.name) if self.flops is not None else None
        if distributed.world().size > 1:  # each rank counted its slice: the record's padding is the global batches'
            # (and its cost the sum of every rank's)
            stats["real_tokens"], stats["padded_tokens"], stats["cpu_seconds"], summed = distributed.sum_floats(
                [stats["real_tokens"], stats["padded_tokens"], stats["cpu_seconds"], step_flops or 0.0], self.device)
            step_flops = summed if step_flops is not None else None
        if self.flops is not None:
            self.pos["train_cpu_seconds"] += stats["cpu_seconds"]
            if step_flops is None:  # resumed past this epoch's last step, its count lost with an older checkpoint
                self.pos["flops_complete"] = False
            else:
                self.pos["train_flops"] += step_flops * n_steps
            self.pos["flops_per_step"] = dict(self.flops.per_step)  # (this rank's: a resumed rank counts as before)
        self.pos["train_samples"] += stats["samples"]
        self.pos["train_seconds"] += stats["seconds"]
        self.pos["global_step"] += n_steps
        dev = self.evaluate(self.model, self.dev_loaders, self.metrics, self.device, self.precision)
        entry = {"stage": stage.name, "epoch": epoch, "step": self.pos["global_step"], "train_loss": stats["loss"],
                 "dev": dev}
        entry.update({k: v for k, v in stats.items() if k.startswith("loss_")})
        if stats["real_tokens"]:
            entry["padding"] = stats["padded_tokens"] / stats["real_tokens"]  # 1.0 = no padding
        if stats["nonfinite_skipped"]:
            entry["nonfinite_skipped"] = int(stats["nonfinite_skipped"])
        self.history.append(entry)
        if self.tracker is not None:
            self.tracker.log({f"{stage.name}/train_loss": stats["loss"], **{f"dev/{k}": v for k, v in dev.items()},
                              "epoch": len(self.history)}, step=self.pos["global_step"])
        log.info("%s%s epoch %d/%d loss %.4f %s %s", self.label, stage.name, epoch, stage.epochs, stats["loss"],
                 self.scored_on, fmt_metrics(dev))

    def _snapshot(self, optimizer: Any, scheduler: Any, progress: EpochProgress | None) -> None:
        if progress is not None and distributed.world().size > 1:
            # Every rank counted the padding of its own slice: the checkpoint holds all ranks' counts (a
            # collective: every rank snapshots at the same steps). On resume rank 0 takes them and the others
            # start from 0, so the epoch's sum over ranks (_end_epoch) is the global batches' again.
            real, padded = distributed.sum_floats([progress.real_tokens, progress.padded_tokens], self.device)
            progress = dataclasses.replace(progress, real_tokens=int(real), padded_tokens=int(padded))
        plain = {"config_hash": self.key, "position": dict(self.pos), "history": self.history,
                 "scheduler": scheduler.state_dict() if scheduler is not None else None,
                 "progress": dataclasses.asdict(progress) if progress is not None else None,
                 "rng": rng_state(), "wandb_id": getattr(self.tracker, "run_id", None)}
        if self.sharded:  # every rank holds its shards: every rank writes them, rank 0 the rest
            if not sharded_checkpoint.finite(self.state, self.device):
                log.warning("not checkpointing: the model has non-finite weights (keeping the last good checkpoint)")
                return
            sharded_checkpoint.save(self.ckpt_path, plain, self.state, optimizer)
            return
        if not distributed.is_main():  # every rank holds the same state; rank 0 writes it
            return
        if not all(bool(torch.isfinite(p).all()) for p in self.model.parameters()):
            log.warning("not checkpointing: the model has non-finite weights (keeping the last good checkpoint)")
            return
        save_checkpoint(self.ckpt_path, {
            **plain, **{name: module.state_dict() for name, module in self.state.items()},
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
        })
        sharded_checkpoint.remove_shards(self.ckpt_path)  # of a sharded checkpoint this one resumed: none names them


def fmt_metrics(metrics: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4f}" for k, v in metrics.items())
