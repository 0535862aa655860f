"""The training loop: one plain PyTorch loop shared by every stage of every procedure.

`train_epoch` runs one epoch of a loss function; the stage driver (stages.py) calls it. Each epoch draws a
fresh shuffle from a generator seeded by (seed, stage, epoch), so an interrupted epoch can be replayed
exactly on resume.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from tqdm.auto import tqdm

from distill_sweep.config.schema import OptimizerSettings
from distill_sweep.errors import NonFiniteLossError  # (raised here; imported from here by callers)
from distill_sweep.models.capture import MODEL_INPUT_KEYS

log = logging.getLogger(__name__)

Batch = dict[str, torch.Tensor]
LossFn = Callable[[Batch], tuple[torch.Tensor, dict[str, float]]]


def seed_everything(seed: int) -> None:
    """Python's, NumPy's and torch's generators seeded from one job seed."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def resolve_device(spec: str) -> torch.device:
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda" and not torch.cuda.is_available():
        log.warning("device=%s requested but CUDA is not available: falling back to CPU", spec)
        return torch.device("cpu")
    return device


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


BF16_SLOW = 1.5  # a bf16 matmul this many times slower than fp32: the CPU emulates bf16, say so


def bf16_cpu_slowdown(size: int = 256, repeats: int = 10) -> float:
    """How many times slower a bf16 matmul runs than an fp32 one on this CPU (a few milliseconds to measure):
    below 1 where the CPU has native bf16 (AVX512-BF16, AMX), several times above where it emulates it."""
    a, b = torch.randn(size, size), torch.randn(size, size)

    def seconds(x: torch.Tensor, y: torch.Tensor) -> float:
        x @ y  # warm-up
        start = time.perf_counter()
        for _ in range(repeats):
            x @ y
        return time.perf_counter() - start

    return seconds(a.bfloat16(), b.bfloat16()) / max(seconds(a, b), 1e-9)


def bf16_cpu_warning(slowdown: float) -> str | None:
    """The start-up warning for precision=bf16 on a CPU that runs bf16 `slowdown` times slower (None: no)."""
    if slowdown < BF16_SLOW:
        return None
    return (f"precision=bf16 on this CPU: a bf16 matmul ran {slowdown:.1f}x slower than fp32 here (no native bf16); "
            "precision=fp32 will be faster")


def to_device(batch: Batch, device: torch.device) -> Batch:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def model_inputs(batch: Batch, model: nn.Module | None = None) -> Batch:
    """The keys `model` reads: its `input_keys` attribute when it declares one (a student with its own
    tokenizer reads its own ids), else those a HF encoder accepts. Labels and example indices stay out of
    the forward, and so do the ids of another model's tokenizer."""
    keys = getattr(model, "input_keys", None) or MODEL_INPUT_KEYS
    return {k: v for k, v in batch.items() if k in keys}


def build_optimizer(params: Iterable[nn.Parameter], opt_cfg: OptimizerSettings, lr: float) -> torch.optim.Optimizer:
    """AdamW with the fairseq recipe's betas/eps; no weight decay on biases and LayerNorm weights."""
    decay, no_decay = [], []
    for p in params:
        if p.requires_grad:
            (no_decay if p.ndim < 2 else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": float(opt_cfg.weight_decay)},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(opt_cfg.betas), eps=float(opt_cfg.eps))


def linear_schedule(optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float,
                    decay: bool = True) -> LambdaLR:
    """Linear warmup over `warmup_ratio` of the updates, then linear decay to 0 (or constant: decay=False)."""
    warmup = int(round(warmup_ratio * total_steps))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if not decay:
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return LambdaLR(optimizer, factor)


def steps_per_epoch(num_examples: int, batch_size: int, max_steps: int | None) -> int:
    steps = math.ceil(num_examples / batch_size)
    return min(steps, max_steps) if max_steps else steps


@dataclass
class EpochProgress:
    """Sums over the steps of one epoch so far (checkpointed, so a resumed epoch reports the same mean)."""

    steps: int = 0
    loss_sum: float = 0.0
    samples: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # the process's CPU time over the steps (training/cost.py)
    nonfinite_skipped: int = 0
    parts: dict[str, float] = field(default_factory=dict)
    real_tokens: int = 0  # attention-mask ones of the batches
    padded_tokens: int = 0  # batch x width of the batches (real tokens plus padding)

    def summary(self) -> dict[str, float]:
        n = max(1, self.steps - self.nonfinite_skipped)
        out = {"loss": self.loss_sum / n, "samples": float(self.samples), "seconds": self.seconds,
               "cpu_seconds": self.cpu_seconds,
               "nonfinite_skipped": float(self.nonfinite_skipped), "real_tokens": float(self.real_tokens),
               "padded_tokens": float(self.padded_tokens)}
        out.update({f"loss_{k}": v / n for k, v in self.parts.items()})
        return out


def update_step(loss: torch.Tensor, params: list[nn.Parameter], optimizer: torch.optim.Optimizer,
                max_grad_norm: float = 0.0) -> str | None:
    """Backward, gradient-norm clip (0 = no clipping, the norm is still measured) and optimizer step, unless
    the loss or the gradient is not finite: then no step, gradients cleared, and "loss" or "gradient"
    returned."""
    optimizer.zero_grad(set_to_none=True)
    if not bool(torch.isfinite(loss)):
        return "loss"
    loss.backward()
    clip = max_grad_norm if max_grad_norm > 0 else float("inf")
    if not bool(torch.isfinite(torch.nn.utils.clip_grad_norm_(params, clip))):
        optimizer.zero_grad(set_to_none=True)
        return "gradient"
    optimizer.step()
    return None


def train_epoch(
    batches: Iterator[Batch],
    loss_fn: LossFn,
    params: list[nn.Parameter],
    optimizer: torch.optim.Optimizer,
    scheduler: LambdaLR,
    *,
    device: torch.device,
    precision: str,
    num_steps: int,
    progress: EpochProgress | None = None,
    max_grad_norm: float = 0.0,
    skip_nonfinite: bool = False,
    on_step: Callable[[EpochProgress, float], None] | None = None,
    desc: str = "train",
    step_context: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> EpochProgress:
    """Run the epoch's remaining steps (from `progress.steps` on, replaying the skipped batches). `step_context`:
    what each step's forward and backward run inside (the FLOP count of training/cost.py; it watches, never
    changes, what the step computes)."""
    progress = progress or EpochProgress()
    for _ in range(progress.steps):  # batches already consumed before an interruption
        next(batches)
    bar = tqdm(total=num_steps, initial=progress.steps, desc=desc, leave=False, disable=not sys.stderr.isatty())
    try:
        while progress.steps < num_steps:
            start, cpu_start = time.perf_counter(), time.process_time()
            batch = next(batches)
            if "attention_mask" in batch:  # counted on the host copy: no device sync
                progress.real_tokens += int(batch["attention_mask"].sum())
                progress.padded_tokens += batch["attention_mask"].numel()
            batch = to_device(batch, device)
            with step_context() if step_context is not None else contextlib.nullcontext():
                with autocast(device, precision):
                    loss, parts = loss_fn(batch)
                what = update_step(loss, params, optimizer, max_grad_norm)
            progress.steps += 1
            if what is not None:
                if not skip_nonfinite:
                    raise NonFiniteLossError(f"non-finite {what} at {desc} step {progress.steps} "
                                             f"(loss={float(loss.detach())}, {parts})")
                progress.nonfinite_skipped += 1
                log.warning("skipping step %d: non-finite %s (%d skipped so far)", progress.steps, what,
                            progress.nonfinite_skipped)
            else:
                progress.loss_sum += float(loss.detach())
                for key, part in parts.items():
                    progress.parts[key] = progress.parts.get(key, 0.0) + float(part)
            scheduler.step()
            progress.samples += int(batch["input_ids"].shape[0])
            progress.seconds += time.perf_counter() - start
            progress.cpu_seconds += time.process_time() - cpu_start
            bar.update(1)
            if on_step is not None:
                on_step(progress, float(loss.detach()))
    finally:
        bar.close()
    return progress


def predict(
    model: nn.Module, loader: Iterable[Batch], device: torch.device, precision: str
) -> tuple[np.ndarray, np.ndarray]:
    """Logits and labels over a loader (model in eval mode; its mode is restored afterwards)."""
    logits, labels, _ = predict_rows(model, loader, device, precision)
    return logits, labels


@torch.no_grad()
def predict_rows(
    model: nn.Module, loader: Iterable[Batch], device: torch.device, precision: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Logits, labels and row indices (`idx`, None where the batches carry none) over a loader, in its order."""
    was_training = model.training
    model.eval()
    logits, labels, rows = [], [], []
    try:
        for batch in loader:
            batch = to_device(batch, device)
            with autocast(device, precision):
                out = model(**model_inputs(batch, model)).logits
            logits.append(out.float().cpu().numpy())
            labels.append(batch["labels"].cpu().numpy())
            if "idx" in batch:
                rows.append(batch["idx"].cpu().numpy())
    finally:
        model.train(was_training)
    return np.concatenate(logits), np.concatenate(labels), np.concatenate(rows) if rows else None


def evaluate(
    model: nn.Module,
    dev_loaders: dict[str, Any],
    metric_fn: Callable[[np.ndarray, np.ndarray], dict[str, float]],
    device: torch.device,
    precision: str,
) -> dict[str, float]:
    """Dev metrics; the first dev split gives plain keys, others a suffix (MNLI mismatched: `_mm`)."""
    metrics: dict[str, float] = {}
    for i, (split, loader) in enumerate(dev_loaders.items()):
        logits, labels = predict(model, loader, device, precision)
        suffix = "" if i == 0 else ("_mm" if split.endswith("mismatched") else f"_{split}")
        metrics.update({f"{k}{suffix}": float(v) for k, v in metric_fn(logits, labels).items()})
    return metrics


def cross_entropy_loss(model: nn.Module, regression: bool) -> LossFn:
    """Plain supervised loss (the teacher's fine-tuning, and the no-distillation baseline)."""

    def loss_fn(batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        logits = model(**model_inputs(batch, model)).logits.float()
        if regression:
            loss = nn.functional.mse_loss(logits.squeeze(-1), batch["labels"].float())
        else:
            loss = nn.functional.cross_entropy(logits, batch["labels"])
        return loss, {}

    return loss_fn
