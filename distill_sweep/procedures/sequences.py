"""What the procedures that train on packed sequences share (task_agnostic on a corpus, causal_lm on a corpus or
instructions): gradient accumulation over micro-batches, the stage driver over sequence batches with each rank
reading its slice, and the stage plan of a step budget."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from distill_sweep.training import distributed
from distill_sweep.training.context import RunContext
from distill_sweep.training.loop import LossFn
from distill_sweep.training.stages import Stage, StageDriver, epoch_seed


class StepBudget(Protocol):
    """A procedure's training length: whole epochs, or a step budget spread over them."""

    epochs: int
    max_steps: int | None


def accumulated(loss_fn: LossFn, params: list[nn.Parameter], micro_batch: int) -> LossFn:
    """`loss_fn` over a global batch as the mean over its micro-batches of `micro_batch` rows, one
    forward/backward each (memory of one micro-batch).

    Each micro-batch's gradient is taken at once (`torch.autograd.grad`) and summed; what is returned is the
    mean loss as a value whose gradient is exactly that mean gradient (sum_p <p, g_p>, its own value removed),
    so the driver's one plain update step (backward, clip, step) applies it. A global batch of one
    micro-batch is `loss_fn` itself. With several ranks each receives its slice of the global batch and the
    gradients and loss values are averaged over ranks (distributed.sum_over_ranks): every micro-batch of
    the global batch weighs the same, on one process or many, so the update does not depend on the number of
    processes (tested: 2 ranks x 1 micro-batch = 1 process x 2 micro-batches).
    """
    trainable = [p for p in params if p.requires_grad]

    def loss(batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        n = int(batch["input_ids"].shape[0])
        ranks = distributed.world().size
        if n <= micro_batch and ranks == 1:
            return loss_fn(batch)
        starts = range(0, n, micro_batch)
        share = len(starts) * ranks  # micro-batches of the global batch, over all ranks
        grads: list[Tensor | None] = [None] * len(trainable)
        value, parts, nonfinite = 0.0, {}, False
        for start in starts:
            part, micro_parts = loss_fn({k: v[start:start + micro_batch] for k, v in batch.items()})
            part = part / share
            if not bool(torch.isfinite(part)):
                if ranks == 1:
                    return part, micro_parts  # the update step refuses it (or skips it, skip_nonfinite)
                nonfinite, parts = True, {k: parts.get(k, 0.0) for k in micro_parts}
                break  # the other ranks still wait for this rank's gradients
            for i, g in enumerate(torch.autograd.grad(part, trainable, allow_unused=True)):
                if g is not None:
                    grads[i] = g if grads[i] is None else grads[i] + g
            value += float(part.detach())
            for key, v in micro_parts.items():
                parts[key] = parts.get(key, 0.0) + v / share
        if ranks > 1:
            full = [g if g is not None else torch.zeros_like(p) for g, p in zip(grads, trainable, strict=True)]
            keys = sorted(parts)
            full, scalars, nonfinite = distributed.sum_over_ranks(
                full, [value, *(parts[k] for k in keys)], nonfinite, trainable[0].device)
            if nonfinite:  # some rank's loss was not finite: every rank refuses (or skips) this update
                return torch.full((), float("nan"), device=trainable[0].device), parts
            # a parameter the loss does not reach (the same on every rank) keeps no gradient: AdamW then leaves
            # it alone, as on one process (a zero gradient would still apply weight decay)
            grads = [None if g is None else r for g, r in zip(grads, full, strict=True)]
            value, parts = scalars[0], dict(zip(keys, scalars[1:], strict=True))
        surrogate = sum(((p * g).sum() for p, g in zip(trainable, grads, strict=True) if g is not None),
                        torch.zeros(()))
        return surrogate - surrogate.detach() + value, parts

    return loss


def sequence_driver(ctx: RunContext, data: Any, batch: int, evaluate_fn: Callable[..., Any], *, model: nn.Module,
                    state: dict[str, nn.Module], checkpoint: Path, key: str, history: list[dict[str, Any]], seed: int,
                    tracker: Any = None, label: str = "") -> StageDriver:
    """The stage driver over packed sequences (`data`: train/dev batches of a corpus or decoder data): global
    batches of `batch` sequences, each rank reading its slice; dev scored by `evaluate_fn`."""
    run, world = ctx.job.settings.run, distributed.world()

    def batches(stage: Stage, epoch: int) -> Iterator[dict[str, Tensor]]:
        global_batches = data.train_batches(stage.batch_size, epoch_seed(seed, stage.name, epoch))
        return global_batches if world.size == 1 else (rank_slice(b, world) for b in global_batches)

    return StageDriver(model=model, state=state, train_size=len(data.train) // batch * batch, loader=batches,
                       dev_loaders={"validation": lambda: data.dev_batches(run.eval_batch_size)},
                       metrics=None, device=ctx.device, precision=ctx.precision,
                       optimizer_cfg=ctx.job.settings.optimizer, checkpoint=checkpoint, key=key, history=history,
                       every_steps=run.checkpoint.every_steps, log_every=run.log_every,
                       skip_nonfinite=run.skip_nonfinite, tracker=tracker, label=label, evaluate_fn=evaluate_fn)


def rank_slice(batch: dict[str, Tensor], world: Any) -> dict[str, Tensor]:
    """This rank's rows of a global batch (ranks take equal consecutive slices)."""
    per = int(batch["input_ids"].shape[0]) // world.size
    return {k: v[world.rank * per:(world.rank + 1) * per] for k, v in batch.items()}


def stage_plan(settings: StepBudget, batches_per_epoch: int, run: Any) -> tuple[int, int | None]:
    """(epochs, steps per epoch cap): `max_steps` spread over whole epochs, then the top-level caps."""
    epochs, cap = settings.epochs, None
    if settings.max_steps is not None:
        epochs = math.ceil(settings.max_steps / batches_per_epoch)
        cap = math.ceil(settings.max_steps / epochs)
    if run.epochs:
        epochs = min(epochs, run.epochs)
    if run.max_steps_per_epoch:
        cap = min(cap or run.max_steps_per_epoch, run.max_steps_per_epoch)
    return epochs, cap


