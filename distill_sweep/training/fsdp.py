"""FSDP2 (`torch.distributed.fsdp.fully_shard`): the multi-process path of the procedures that declare `shards`
(causal_lm, task_specific, task_agnostic: procedures/__init__.py).

With several ranks (torchrun, or SLURM's nodes x tasks_per_node; distributed.py sets up the group) the student's
parameters, gradients and AdamW state are sharded over the ranks: each transformer block (the model's
`_no_split_modules`) is one FSDP unit, the rest of the model the root unit, and each module of the objective that
holds parameters (projections) one more. The teacher is frozen: replicated on every rank (`fsdp.teacher=replicate`,
the default: it has no gradients or optimizer state, so its copy is a quarter or less of what a student of its
size would hold), or sharded for inference only (`fsdp.teacher=shard`: its weights all-gathered block by block in
each forward). Under `precision=bf16` a MixedPrecisionPolicy computes in bf16 and reduces gradients in float32;
the sharded master weights and the optimizer state stay float32.

Two calls, the rest of the job as on one process: `shard_student`/`shard_teacher`/`shard_modules` when the models
are built (before the optimizer's parameters are listed: sharding replaces them), and `sharded_loss` around the
loss function, which does the gradient step's communication (loop.update_step stays the plain backward, clip and
step). What stays as with one process: each rank reads its slice of every global batch; the non-finite flag is
all-reduced before any backward, so every rank skips (or refuses) the same step; the stop flag (`any_rank`), and
rank 0 alone writes the record; the dropout masks, drawn per row of the global batch (row_dropout.py: the same on
any number of ranks). What changes: FSDP reduce-scatters the gradients in its own order and bucketing,
so a record of N ranks equals the one-process record within float tolerance (tests: 1e-5 relative on the losses
and dev metrics after a few steps), not to the bit as task_agnostic's hand-written all-reduce did before it. The
root unit (embeddings, final norm, heads) of the student stays gathered from its forward to its backward, so the
heads applied outside the forward (task_agnostic's MLM head, the chunked losses) work sharded (`shard_student`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

from distill_sweep.errors import ConfigError
from distill_sweep.models.families import family_of_model
from distill_sweep.records.disk import writing
from distill_sweep.training import distributed, row_dropout
from distill_sweep.training.loop import Batch, LossFn

log = logging.getLogger("distill_sweep")

SHARD, REPLICATE = "shard", "replicate"  # fsdp.teacher
ROWS = "rank_rows"  # the rows of a rank's slice that count (rank_slice; 0: a stand-in row)
FIRST_ROW = "rank_first_row"  # the global batch's index of a rank's first row (rank_slice: row_dropout's masks)
_MESH: dict[tuple[str, int], DeviceMesh] = {}


def active() -> bool:
    """Whether this job runs sharded (several ranks; the procedure declares `shards`)."""
    return distributed.world().size > 1


def mesh(device: torch.device) -> DeviceMesh:
    """One flat mesh over every rank (created once per process)."""
    key = (device.type, distributed.world().size)
    if key not in _MESH:
        _MESH[key] = init_device_mesh(device.type, (distributed.world().size,))
    return _MESH[key]


def precision_policy(precision: str) -> MixedPrecisionPolicy:
    """bf16: parameters all-gathered and computed in bf16, gradients reduced in float32 (the sharded master
    weights stay float32); fp32: no cast."""
    if precision == "bf16":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def blocks(model: nn.Module) -> list[nn.Module]:
    """The model's transformer blocks: the modules of the classes it names in `_no_split_modules` (transformers'
    own list of what must not be split across devices) but those tied to a module outside them, else its family's
    layers; none for a model of neither (then the whole model is one unit)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    found = [m for m in model.modules() if m is not model and type(m).__name__ in names]
    if found:  # (a module tied to one outside it stays in the root: BERT's embeddings, tied to its MLM decoder)
        return [m for m in found if not _tied_outside(model, m)]
    try:
        return list(family_of_model(model).layers(model))
    except (ConfigError, AttributeError, KeyError, TypeError, ValueError):
        return []


def _tied_outside(model: nn.Module, block: nn.Module) -> bool:
    """Whether a parameter of `block` is also a parameter of a module outside it (tied weights): FSDP2 needs both
    in one unit."""
    inside = {id(m) for m in block.modules()}
    mine = {id(p) for p in block.parameters()}
    return any(id(p) in mine for m in model.modules() if id(m) not in inside for p in m.parameters(recurse=False))


def shard_student(model: nn.Module, device: torch.device, precision: str, *, keep_gathered: bool = False
                  ) -> nn.Module:
    """Shard `model` in place (each block, then the root); returns it. List its parameters after this call.

    The root unit (what is in no block: the embeddings, the final norm, the heads) stays gathered from its forward
    to its backward (FSDP2's own default for a root: the backward would gather it again at once). So a head applied
    to the last hidden states outside the model's forward (task_agnostic's MLM head on the masked positions, the
    chunked next-token losses' LM head, objectives/chunked.py) reads whole weights, and its gradient lands on them
    and is reduce-scattered with the rest of the root's at the end of the backward (FSDP's final callback).

    `keep_gathered`: each block's weights stay gathered from its forward to its backward (ZeRO-2's memory for
    the weights; the gradients and optimizer state stay sharded). Needed where a loss reads a block's inner
    activations (attention terms read the q/k/v projections): their gradient reaches the block's weights
    before FSDP's hook on the block's output would gather them again, and a block resharded after its forward
    then has no weights for it."""
    return _shard(model, device, precision, reshard_after_forward=not keep_gathered, root_gathered=True)


def shard_teacher(model: nn.Module, mode: str, device: torch.device, precision: str) -> nn.Module:
    """The frozen teacher for inference: sharded (`shard`: each block gathered for its forward and freed after)
    or left whole on every rank (`replicate`)."""
    if mode == SHARD:
        _shard(model, device, precision, reshard_after_forward=True)
    log.info("teacher %s over %d ranks", "sharded" if mode == SHARD else "replicated", distributed.world().size)
    return model


def shard_modules(modules: Mapping[str, nn.Module], device: torch.device, precision: str) -> None:
    """The objective's own modules (projections, heads): each submodule that holds parameters is one FSDP unit,
    innermost first, so every trainable parameter is a sharded DTensor (clipping one norm over all of them needs
    that). A module that reads its parameters outside its own forward cannot be sharded this way: it fails at
    its first step naming a DTensor."""
    kwargs = {"mesh": mesh(device), "mp_policy": precision_policy(precision)}
    for module in modules.values():
        for sub in reversed(list(module.modules())):
            if not isinstance(sub, FSDPModule) and any(True for _ in sub.parameters(recurse=False)):
                fully_shard(sub, **kwargs)


def shard_all(student: nn.Module, modules: Mapping[str, nn.Module], teacher: nn.Module | None, teacher_mode: str,
              device: torch.device, precision: str, *, keep_gathered: bool = False) -> dict[str, Any]:
    """A job's models sharded at setup: the student (`keep_gathered`: shard_student's), the objective's `modules`
    and the teacher (`fsdp.teacher`); returns what the record says of it (its `fsdp` key)."""
    units = len(blocks(student)) + 1  # (counted before: sharding renames the blocks' classes)
    shard_student(student, device, precision, keep_gathered=keep_gathered)
    shard_modules(modules, device, precision)
    if teacher is not None:
        shard_teacher(teacher, teacher_mode, device, precision)
    policy = precision_policy(precision)
    return {"ranks": distributed.world().size, "student_units": units,
            "student_resharded_after_forward": not keep_gathered, "teacher": teacher_mode,
            "param_dtype": str(policy.param_dtype or "float32").removeprefix("torch."),
            "reduce_dtype": str(policy.reduce_dtype or "float32").removeprefix("torch.")}


def _shard(model: nn.Module, device: torch.device, precision: str, *, reshard_after_forward: bool,
           root_gathered: bool = False) -> nn.Module:
    kwargs: dict[str, Any] = {"mesh": mesh(device), "mp_policy": precision_policy(precision),
                              "reshard_after_forward": reshard_after_forward}
    for block in blocks(model):
        fully_shard(block, **kwargs)
    fully_shard(model, **{**kwargs, "reshard_after_forward": reshard_after_forward and not root_gathered})
    return model


@contextmanager
def gathered(model: nn.Module) -> Iterator[None]:
    """A sharded frozen model's root unit (embeddings, final norm, heads) whole inside the block, resharded after
    it: for a teacher whose head is applied to its last hidden states outside its forward (task_agnostic's MLM
    head, the chunked losses' LM head), after the forward resharded it (`fsdp.teacher=shard`: one more all-gather
    of the root's weights per loss). Nothing for a model that is not sharded (one process, a replicated teacher).
    A collective: every rank enters it at the same point."""
    if not isinstance(model, FSDPModule):
        yield
        return
    model.unshard()
    try:
        yield
    finally:
        model.reshard()


def whole_state(model: nn.Module) -> dict[str, Tensor] | None:
    """A sharded model's whole state dict on rank 0 (on the CPU; the other ranks get an empty one): what
    `save_pretrained(state_dict=...)` writes. A collective. None for a model that is not sharded (its own state
    dict is whole)."""
    if not any(isinstance(p, DTensor) for p in model.parameters()):
        return None
    whole = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    # a tied weight comes once per name, as copies: only its first name is kept, as save_pretrained keeps of a
    # model's own state dict (BERT's MLM decoder is its word embeddings)
    seen: set[int] = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            whole.pop(name, None)
        seen.add(id(p))
    return whole


def save_student(student: nn.Module, tokenizer: Any, out: Path) -> None:
    """The trained student written to `out` (`save_pretrained`, its tokenizer beside it) by rank 0 alone: a sharded
    student gathered onto it first (a collective: every rank calls this), under one process's names."""
    whole = whole_state(student)  # sharded: gathered onto rank 0, else None
    if distributed.is_main():
        with writing(out, "the job's checkpoint is kept: the next run resumes from it and saves the student"):
            student.save_pretrained(out, state_dict=whole)
            tokenizer.save_pretrained(out)


def on_ranks(loss_fn: LossFn, params: list[nn.Parameter], modules: list[nn.Module]) -> LossFn:
    """`loss_fn` as a sharded job's gradient step needs it (`sharded_loss`, no micro-batches), or on one process as
    one piece of its global batch (row_dropout.whole_batch: the same dropout masks as the ranks draw). `modules`:
    all that FSDP may leave gradients on (a stage that trains some of their parameters)."""
    if not active():
        return row_dropout.whole_batch(loss_fn, params)
    return sharded_loss(loss_fn, params, None, [p for m in modules for p in m.parameters()])


def sharded_loss(loss_fn: LossFn, params: list[nn.Parameter], micro_batch: int | None,
                 clear: list[nn.Parameter] | None = None) -> LossFn:
    """`loss_fn` over this rank's slice of a global batch (micro-batches of `micro_batch` rows), its gradient
    reduced by FSDP: returns the global batch's loss value and a surrogate whose gradient is the reduced one.

    Each micro-batch runs forward and backward here (FSDP's hooks reduce-scatter the gradients into each
    parameter's shard); the shards are then taken off the parameters and handed back through a surrogate
    (sum_p <p, g_p>, its own value removed) so that the driver's one plain update step (zero, backward, clip,
    step) applies them, as `sequences.accumulated` does on one process. A rank's loss is weighed by its share of
    the global batch's rows (FSDP averages over ranks), so uneven slices (a last partial batch) weigh each row
    the same. Before each backward the ranks agree on whether some rank's loss is not finite: then every rank
    returns NaN, and the update step refuses (or skips) the step on every rank."""
    trainable = [p for p in params if p.requires_grad]
    clear = trainable + [p for p in clear or [] if all(p is not q for q in trainable)]

    def loss(batch: Batch) -> tuple[Tensor, dict[str, float]]:
        device = trainable[0].device
        size = distributed.world().size
        batch = dict(batch)
        n = int(batch["input_ids"].shape[0])
        real = float(batch.pop(ROWS)) / n if ROWS in batch else 1.0  # the share of the slice's rows that count
        first = int(batch.pop(FIRST_ROW)) if FIRST_ROW in batch else 0
        mask_key = row_dropout.batch_key()  # the dropout masks: per row of the global batch, as one process draws them
        step = micro_batch or n
        (rows,) = distributed.sum_floats([n * real], device)  # the global batch's rows
        value, parts = 0.0, {}
        for p in clear:  # the last step's gradient is still there (update_step clears it before its backward), and
            p.grad = None  # FSDP leaves one on the parameters this stage does not train
        for start in range(0, n, step):
            piece = {k: v[start:start + step] for k, v in batch.items()}
            count = int(piece["input_ids"].shape[0])
            weight = count * real * size / rows  # FSDP divides by `size`: the rows' share
            with row_dropout.piece(mask_key, first + start, count):  # its forward and backward
                part, micro_parts = loss_fn(piece)
                part = part * weight
                if distributed.any_rank(not bool(torch.isfinite(part.detach())), device):
                    for p in clear:
                        p.grad = None
                    return torch.full((), float("nan"), device=device), {k: 0.0 for k in micro_parts}
                part.backward()
            value += float(part.detach())
            for key, v in micro_parts.items():
                parts[key] = parts.get(key, 0.0) + v * weight
        keys = sorted(parts)
        sums = distributed.sum_floats([value, *(parts[k] for k in keys)], device)
        value, parts = sums[0] / size, {k: s / size for k, s in zip(keys, sums[1:], strict=True)}
        grads = [p.grad for p in trainable]
        for p in clear:
            p.grad = None
        surrogate = torch.zeros((), device=device)
        for p, g in zip(trainable, grads, strict=True):
            if g is not None:  # (a parameter the loss does not reach keeps no gradient, on every rank)
                surrogate = surrogate + (_local(p) * _local(g)).sum()
        return surrogate - surrogate.detach() + value, parts

    return loss


def _local(t: Tensor) -> Tensor:
    """This rank's shard of a DTensor (differentiable: the gradient comes back as the same DTensor's)."""
    return t.to_local() if isinstance(t, DTensor) else t


def rank_slice(batch: Mapping[str, Tensor], world: Any) -> dict[str, Tensor]:
    """This rank's rows of a global batch: as equal as can be (the first n % size ranks one row more), so a last
    partial batch is split too; `sharded_loss` weighs each slice by its rows (`ROWS`). A rank left without a row
    (a last batch of fewer rows than ranks) gets the batch's first row weighed 0: every rank must run the same
    forwards and backwards (FSDP's collectives), and that row adds nothing."""
    n = int(batch["input_ids"].shape[0])
    per, extra = divmod(n, world.size)
    start = world.rank * per + min(world.rank, extra)
    stop = start + per + (1 if world.rank < extra else 0)
    rows = stop - start
    if rows == 0:
        start, stop = 0, 1
    return {**{k: v[start:stop] for k, v in batch.items()}, ROWS: torch.tensor(rows), FIRST_ROW: torch.tensor(start)}
