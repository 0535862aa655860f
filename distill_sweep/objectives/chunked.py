"""Next-token losses over chunks of positions (procedure.logit_chunk): the full-vocabulary logits of a batch never
exist at once, for the student or the teacher.

The readable formulas stay where they are (causal.py's `causal_kd`, the cross-entropy): each is a mean over the
predicting rows (labels != IGNORE), so over N rows cut into chunks of m_c rows it is sum_c (m_c / N) x the
formula on chunk c. `chunked_mean` makes that sum from a decoder's last hidden states and LM head
(models/lm_head.py `HeadLogits`): chunk c's student logits are made from its rows, the formula applied, and its
gradient with respect to those rows and the head's parameters taken at once (`torch.autograd.grad`) and kept;
then the chunk's logits are freed before the next chunk's are made (Liger's fused-linear losses do the same).
Backward scales the kept gradients by the incoming one. So the logits are made once, never recomputed, and at
most one chunk's logits (and the formula's temporaries over them) exist at a time; what is kept is one gradient
the size of the hidden rows and one the size of the head. The teacher's chunk is made under no_grad from its own
hidden rows (`teacher_rows`). Values and gradients equal the unchunked loss's to float tolerance (the sum runs
in another order): tests/unit/objectives/test_chunked_losses.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from distill_sweep.models.capture import Features
from distill_sweep.models.lm_head import HeadLogits, forward_without_head

__all__ = ["chunked_mean", "lm_features", "mean_over_targets", "teacher_rows"]

IGNORE = -100  # causal.IGNORE's value (causal.py reads this module)

# (logits of a chunk's rows (m, V), their labels (m,), the chunk's slice of the N rows) -> the formula's mean
ChunkLoss = Callable[[Tensor, Tensor, slice], Tensor]


def teacher_rows(teacher: Any, where: Tensor) -> Callable[[slice], Any]:
    """What the formula reads of the teacher at a chunk's rows (the rows `where` selects, in order): its logits
    made from its hidden states under no_grad (HeadLogits), the rows of full logits (a tensor), or the rows of
    stored sparse entries (a (values, ids) tuple)."""
    if isinstance(teacher, HeadLogits):
        hidden = teacher.hidden.detach()[where]

        def made(sl: slice) -> Tensor:
            with torch.no_grad():
                return teacher.rows(hidden[sl])

        return made
    if isinstance(teacher, tuple):
        values, indices = teacher[0][where], teacher[1][where]
        return lambda sl: (values[sl], indices[sl])
    rows = teacher[where]
    return lambda sl: rows[sl]


def chunked_mean(student: HeadLogits, labels: Tensor, loss_of: ChunkLoss, chunk: int, *,
                 empty: str = "zero") -> Tensor:
    """sum_c (m_c / N) loss_of(chunk c's student logits, labels, slice) over the N predicting rows of `labels`
    (B, S) in chunks of `chunk` rows; the gradient reaches the student's hidden states and head. No predicting
    row: a zero that keeps the graph (`empty="zero"`, as the next-token terms), or the formula on no rows
    (`empty="formula"`: the cross-entropy's NaN, which the update step refuses, as unchunked)."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 row, got {chunk}")
    where = labels != IGNORE
    rows, targets = student.hidden[where], labels[where]
    n = int(rows.shape[0])
    params = [p for p in student.head.parameters() if p.requires_grad]
    if n == 0:
        if empty == "formula":
            return loss_of(student.rows(rows), targets, slice(0, 0))
        return sum((p.sum() for p in params), student.hidden.sum()) * 0.0

    def weighted(logits: Tensor, sl: slice) -> Tensor:
        return loss_of(logits, targets[sl], sl) * ((sl.stop - sl.start) / n)

    return _Chunks.apply(rows, student, chunk, weighted, *params)


class _Chunks(torch.autograd.Function):
    """The chunks' summed loss; its gradient, taken chunk by chunk in forward, is replayed in backward."""

    @staticmethod
    def forward(ctx: Any, rows: Tensor, student: HeadLogits, chunk: int,  # type: ignore[override]
                weighted: Callable[[Tensor, slice], Tensor], *params: Tensor) -> Tensor:
        want_rows, want = ctx.needs_input_grad[0], list(ctx.needs_input_grad[4:])
        g_rows = torch.zeros_like(rows) if want_rows else None
        g_params = [torch.zeros_like(p) if w else None for p, w in zip(params, want, strict=True)]
        total = torch.zeros((), dtype=torch.float32, device=rows.device)
        for start in range(0, rows.shape[0], chunk):
            sl = slice(start, min(start + chunk, rows.shape[0]))
            with torch.enable_grad():
                part = rows[sl].detach().requires_grad_(want_rows)
                value = weighted(student.rows(part), sl)
                inputs = ([part] if want_rows else []) + [p for p, w in zip(params, want, strict=True) if w]
                grads = (list(torch.autograd.grad(value, inputs, allow_unused=True))
                         if inputs and value.requires_grad else [])
            total += value.detach().float()
            if grads and want_rows:
                g = grads.pop(0)
                if g is not None:
                    g_rows[sl] = g  # type: ignore[index]
            for i in (i for i, w in enumerate(want) if w):
                g = grads.pop(0) if grads else None
                if g is not None:
                    g_params[i].add_(g)  # type: ignore[union-attr]
        ctx.save_for_backward(*(t for t in (g_rows, *g_params) if t is not None))
        ctx.kept = (want_rows, want)
        return total

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        saved = list(ctx.saved_tensors)
        want_rows, want = ctx.kept
        g_rows = saved.pop(0) * grad if want_rows else None
        g_params = [saved.pop(0) * grad if w else None for w in want]
        return (g_rows, None, None, None, *g_params)


def lm_features(terms: Any | None, model: nn.Module, batch: Mapping[str, Tensor], side: str, chunk: int) -> Features:
    """What the objective's terms read of a decoder (`terms.features`; no terms: the logits alone) or, with
    `chunk` > 0 (procedure.logit_chunk), the same without the logits: its hidden states and head, for the terms
    to make the logits `chunk` rows at a time. Grad mode is the caller's."""
    if chunk <= 0:
        if terms is None:
            return Features(logits=model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits,
                            hidden_states=None)
        return terms.features(model, batch, side)
    hidden = terms is not None and bool(terms.needs_hidden)
    shared = getattr(terms, "forward_without_head", None) if side == "teacher" else None
    if shared is not None:  # a pack member's terms (procedures/decoder_pack.py): the pack's one teacher forward
        return shared(model, batch, hidden=hidden, chunk=chunk)
    return forward_without_head(model, batch, hidden=hidden, chunk=chunk)


def mean_over_targets(features: Features, labels: Tensor, formula: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    """formula(logits, labels), a mean over the targets (labels != IGNORE; the cross-entropy), on the features'
    logits, or from their head a chunk of rows at a time."""
    if features.head is None:
        assert features.logits is not None
        return formula(features.logits, labels)
    return chunked_mean(features.head, labels, lambda z, y, sl: formula(z, y), features.head.chunk, empty="formula")
