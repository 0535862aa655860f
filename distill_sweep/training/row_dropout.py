"""Dropout masks drawn per row of the global batch, so that they do not depend on how the batch is split: one
process, micro-batches, or N ranks each holding a slice (fsdp.py) draw the same mask for the same row.

torch's own dropout draws one mask for the tensor it is given from the process's generator: 2 ranks each draw a
mask for their half of a batch from the same generator state (the same seeds), so the two halves get the same
masks, and a record of 2 ranks is another job than one process's (measured: dev accuracy 0.722 against 0.618 on
the toy task at the default dropout 0.1). Here, inside a student's loss on one piece of a global batch (`piece`),
each dropout call draws one number from torch's generator, seeded at the piece's start from a key the global batch
drew (`batch_key`), so every piece of a batch sees the same sequence of calls' numbers; an element's mask is then a
hash of that number, the row's index in the global batch and the element's position in the row. Gradient
checkpointing recomputes a layer under the generator state of its forward, so its recompute draws the same masks.

`torch.nn.functional.dropout` (what `nn.Dropout` and transformers' eager attention call) and
`scaled_dot_product_attention` with a dropout (transformers' sdpa attention: its dropout is drawn inside the
kernel, so a piece computes that attention itself, softmax(q k^T) v, with the mask drawn here) are replaced once,
process-wide; outside a piece, in eval mode or at p = 0 they are torch's own. The masks' cost: a few int64 ops
per element of each dropped tensor (the attention's probabilities included).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

_LOCAL = threading.local()  # per thread: a pack's members train in threads (training/pack.py)
_TORCH_DROPOUT = F.dropout
_TORCH_SDPA = F.scaled_dot_product_attention
_M32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B1
_KEEP_BITS = 24  # an element's uniform draw: 24 bits of its hash


def _mix(x: Tensor) -> Tensor:
    """A 32-bit integer hash (values in [0, 2^32) held in int64, so no product overflows)."""
    x = x ^ (x >> 16)
    x = (x * 0x45D9F3B) & _M32
    x = x ^ (x >> 16)
    x = (x * 0x45D9F3B) & _M32
    return x ^ (x >> 16)


def keep_mask(shape: torch.Size, rows: Tensor, call: int, p: float) -> Tensor:
    """Which elements of a tensor of `shape` (its first dimension the rows, `rows` their indices in the global
    batch) a call numbered `call` keeps, each with probability 1 - p: a function of the row, the call and the
    element's position within the row only (not of the padded lengths either: each dimension is hashed in turn)."""
    h = _mix((_mix(rows.to(torch.int64) & _M32) ^ call) & _M32)
    h = h.view(-1, *([1] * (len(shape) - 1)))
    for dim in range(1, len(shape)):
        coords = torch.arange(shape[dim], device=rows.device, dtype=torch.int64)
        coords = coords.view(*([1] * dim), -1, *([1] * (len(shape) - dim - 1)))
        h = _mix(h ^ ((coords * _GOLDEN) & _M32))
    return (h >> (32 - _KEEP_BITS)) >= int(round(p * (1 << _KEEP_BITS)))


def _rows_here(x: Tensor) -> Tensor | None:
    """The global indices of `x`'s rows inside a piece (None outside one, or where `x`'s first dimension is not
    the piece's rows: torch's own dropout then)."""
    state = getattr(_LOCAL, "piece", None)
    if state is None or x.dim() == 0 or x.shape[0] != state[1]:
        return None
    return torch.arange(state[0], state[0] + state[1], device=x.device)


def _call_number() -> int:
    # from torch's generator, which the piece seeded and a gradient checkpoint's recompute restores
    return int(torch.randint(0, 1 << 31, (), dtype=torch.int64))


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """`torch.nn.functional.dropout`, its mask drawn per row of the global batch inside a piece."""
    rows = _rows_here(input) if training and 0.0 < p < 1.0 else None
    if rows is None:
        return _TORCH_DROPOUT(input, p, training, inplace)
    scale = keep_mask(input.shape, rows, _call_number(), p).to(input.dtype) * (1.0 / (1.0 - p))
    return input.mul_(scale) if inplace else input * scale


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False, **kwargs: Any) -> Tensor:
    """`torch.nn.functional.scaled_dot_product_attention`; with a dropout inside a piece, computed here (the math
    of torch's reference implementation) with the probabilities' mask drawn per row."""
    if dropout_p == 0.0 or kwargs or _rows_here(query) is None:
        return _TORCH_SDPA(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                           scale=scale, enable_gqa=enable_gqa, **kwargs)
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        repeat = query.shape[-3] // key.shape[-3]
        key, value = key.repeat_interleave(repeat, dim=-3), value.repeat_interleave(repeat, dim=-3)
    scores = (query @ key.transpose(-2, -1)) * (1.0 / math.sqrt(query.shape[-1]) if scale is None else scale)
    if is_causal:
        causal = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return dropout(scores.softmax(dim=-1), dropout_p, True) @ value


def _install() -> None:
    """Replace torch's two functions by the row-keyed ones, once per process (idempotent)."""
    F.dropout = dropout  # type: ignore[assignment]
    F.scaled_dot_product_attention = scaled_dot_product_attention  # type: ignore[assignment]


def batch_key() -> int:
    """The key of a global batch: one draw from torch's generator, the same on every rank (the same seeds and the
    same draws before it) and in one process; restored with the generator on resume."""
    _install()
    return int(torch.randint(0, 1 << 62, (), dtype=torch.int64))


@contextmanager
def piece(key: int, first_row: int, rows: int) -> Iterator[None]:
    """Around the forward and backward of a piece of a global batch: `rows` rows, the first of them the global
    batch's row `first_row`. torch's generators are seeded from `key` inside and restored after, so the global
    stream goes on as if the piece drew nothing."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    before = getattr(_LOCAL, "piece", None)
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(key)
        _LOCAL.piece = (first_row, rows)
        try:
            yield
        finally:
            _LOCAL.piece = before


def whole_batch(loss_fn: Any, params: list[nn.Parameter]) -> Any:
    """`loss_fn` over a global batch in one process as one piece: its forward and backward inside `piece` (the
    backward here, by `torch.autograd.grad`, so a gradient checkpoint's recompute is inside it too), handed to the
    driver's plain update step as a surrogate whose gradient is that gradient (sum_p <p, g_p>, its own value
    removed), as fsdp.sharded_loss and sequences.accumulated do."""
    trainable = [p for p in params if p.requires_grad]

    def loss(batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        key = batch_key()
        with piece(key, 0, int(batch["input_ids"].shape[0])):
            value, parts = loss_fn(batch)
            if not bool(torch.isfinite(value.detach())):
                return value, parts  # the update step refuses it (or skips it, skip_nonfinite)
            grads = torch.autograd.grad(value, trainable, allow_unused=True)
        return surrogate(trainable, grads, value.detach()), parts

    return loss


def surrogate(params: list[nn.Parameter], grads: Any, value: Tensor | float) -> Tensor:
    """A scalar equal to `value` whose gradient with respect to each of `params` is its entry of `grads` (None:
    none)."""
    total = torch.zeros((), device=params[0].device) if params else torch.zeros(())
    for p, g in zip(params, grads, strict=True):
        if g is not None:
            total = total + (p * g).sum()
    return total - total.detach() + value
