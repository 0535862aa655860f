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

from distill_sweep.training import distributed, fsdp, row_dropout
from distill_sweep.training.context import RunContext
from distill_sweep.training.loop import LossFn
from distill_sweep.training.stages import Stage, StageDriver, epoch_seed


class StepBudget(Protocol):
    """A procedure's training length: whole epochs, or a step budget spread over them."""

    epochs: int
    max_steps: int | None


def accumulated(loss_fn: LossFn, params: list[nn.Parameter], micro_batch: int) -> LossFn:
    """`loss_fn` over a global batch as the mean over its micro-batches of `micro_batch` rows, one
    forward/backward each (memory of one micro-batch), on one process (several: fsdp.sharded_loss); each
    micro-batch a piece of the global batch for its dropout masks (training/row_dropout.py).

    Each micro-batch's gradient is taken at once (`torch.autograd.grad`) and summed; what is returned is the
    mean loss as a value whose gradient is exactly that mean gradient (sum_p <p, g_p>, its own value removed),
    so the driver's one plain update step (backward, clip, step) applies it (a global batch of one micro-batch
    too: its backward inside its piece, where a gradient checkpoint's recompute draws the forward's masks).
    """
    trainable = [p for p in params if p.requires_grad]

    def loss(batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        n = int(batch["input_ids"].shape[0])
        mask_key = row_dropout.batch_key()  # the dropout masks: per row of the global batch, as the ranks draw them
        starts = range(0, n, micro_batch)
        share = len(starts)
        grads: list[Tensor | None] = [None] * len(trainable)
        value, parts = 0.0, {}
        for start in starts:
            piece = {k: v[start:start + micro_batch] for k, v in batch.items()}
            with row_dropout.piece(mask_key, start, int(piece["input_ids"].shape[0])):  # its forward and backward
                part, micro_parts = loss_fn(piece)
                part = part / share
                if not bool(torch.isfinite(part)):
                    return part, micro_parts  # the update step refuses it (or skips it, skip_nonfinite)
                micro_grads = torch.autograd.grad(part, trainable, allow_unused=True)
            for i, g in enumerate(micro_grads):
                if g is not None:
                    grads[i] = g if grads[i] is None else grads[i] + g
            value += float(part.detach())
            for key, v in micro_parts.items():
                parts[key] = parts.get(key, 0.0) + v / share
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
    """This rank's rows of a global batch (ranks take equal consecutive slices), and where they start in it
    (fsdp.FIRST_ROW: the rows' dropout masks)."""
    per = int(batch["input_ids"].shape[0]) // world.size
    return {**{k: v[world.rank * per:(world.rank + 1) * per] for k, v in batch.items()},
            fsdp.FIRST_ROW: torch.tensor(world.rank * per)}


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


