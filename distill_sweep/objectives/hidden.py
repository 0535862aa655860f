"""Hidden-state transfer: Hid-CLS and Hid-Seq (paper Sec. 3, L_hid = MSE(h^S W_h, h^T)).

Pairs: the embedding outputs (0, 0) plus every (student_layer, teacher_layer) of the layer map (the
embeddings pair left out where the procedure says so: task_agnostic's ``procedure.embeddings_pair``); the loss
is the SUM over pairs of a per-pair MSE.  The per-pair MSE has torch ``mse_loss(reduction="mean")``
semantics over the elements it covers: mean over (examples x teacher hidden dims) for Hid-CLS, and over
(valid tokens x teacher hidden dims) for Hid-Seq; padding tokens are excluded unless
``reference_compat: true``, which averages over every position like the reference code.

W_h (the term setting ``projection: linear``) is a bias-free learnable map d_S -> d_T, one per pair or one
shared (``shared_projection: true``).  ``projection_init: identity`` (the default) starts it at the identity when
the widths agree, so at the start the loss equals the projection-free MSE (default nn.Linear init otherwise);
``projection_init: random`` starts it as TinyBERT's code does at any widths (``init_bert_weights``: normal,
std = the student's ``initializer_range``).  ``projection: none`` drops it (refused when the widths differ).

This is the paper's formula.  The reference code has no W_h: its Hid-CLS is a plain MSE of the first-token
states (``F.mse_loss`` over [B, D]), its Hid-Seq an MSE over every position; with equal widths both are ours
with ``projection: none`` (Hid-Seq also with ``reference_compat``, which counts the padding as it does).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable
from torch.distributed.tensor import DTensor

from .inputs import STUDENT, TEACHER, LossInputs
from .spec import TermSpec

__all__ = ["HidCLS", "HidSeq", "HiddenProjections", "projected_mse"]


class HiddenProjections(nn.Module):
    """W_h per hidden pair (or shared); identity when ``projection: none``."""

    def __init__(self, spec: TermSpec) -> None:
        super().__init__()
        d_s, d_t = spec.student_hidden, spec.teacher_hidden
        mode = spec.settings.projection
        self.n_pairs = len(spec.hidden_pairs)
        self.shared = bool(spec.settings.shared_projection)
        if mode == "none":  # equal widths: objectives.check_compatible refused others before building
            self.maps = None
            return
        count = 1 if self.shared else self.n_pairs
        random = spec.settings.projection_init == "random"
        std = float(getattr(spec.student_config, "initializer_range", 0.02))  # (BERT's default)
        maps = []
        for _ in range(count):
            lin = nn.Linear(d_s, d_t, bias=False)
            with torch.no_grad():
                if random:
                    lin.weight.normal_(0.0, std)
                elif d_s == d_t:
                    lin.weight.copy_(torch.eye(d_t))
            maps.append(lin)
        self.maps = nn.ModuleList(maps)

    def weight(self, pair_index: int) -> Tensor | None:
        """W_h (d_T, d_S) of a pair, None without projection."""
        if self.maps is None:
            return None
        return self.maps[0 if self.shared else pair_index].weight

    def mse(self, pair_index: int, h: Tensor, target: Tensor) -> Tensor:
        """mean((h W_h^T - t)^2) of a pair (``projected_mse``). A W_h sharded over several processes (FSDP,
        training/fsdp.py: a DTensor between forwards) is applied by calling its module, whose forward gathers it and
        whose backward reduce-scatters its gradient; the fused function would read the shard itself."""
        weight = self.weight(pair_index)
        if weight is not None and isinstance(weight, DTensor):
            return _pair_mse(self.maps[0 if self.shared else pair_index](h), target)
        return projected_mse(h, weight, target)


class _ProjectedMSE(torch.autograd.Function):
    """mean((h W^T - t)^2) with gradients for h and W (t is a target), as one function: the forward is one
    ``addmm`` that also subtracts the target, the backward two GEMMs on the saved difference (docs/benchmarks/step.md
    has the measurement). A teacher tensor may be an inference tensor (the bench's loss-alone timing): it is
    only read, never saved.
    """

    @staticmethod
    def forward(ctx, h: Tensor, weight: Tensor, target: Tensor) -> Tensor:  # type: ignore[override]
        diff = torch.addmm(target, h, weight.t(), beta=-1)  # h W^T - t
        flat = diff.view(-1)
        ctx.save_for_backward(h, weight, diff)
        return torch.dot(flat, flat) / flat.numel()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        h, weight, diff = ctx.saved_tensors
        g = diff * (2.0 * grad / diff.numel())  # dL/d(h W^T)
        grad_h = g @ weight if ctx.needs_input_grad[0] else None
        grad_w = g.t() @ h if ctx.needs_input_grad[1] else None
        return grad_h, grad_w, None


def _pair_mse(pred: Tensor, target: Tensor) -> Tensor:
    # Written out instead of F.mse_loss: the difference is a fresh tensor, so a teacher tensor that is an
    # inference tensor (the bench's loss-alone timing) is never saved for backward.
    diff = pred - target
    return (diff * diff).mean()


def projected_mse(h: Tensor, weight: Tensor | None, target: Tensor) -> Tensor:
    """mean((h W^T - t)^2), torch ``mse_loss`` semantics; ``weight`` None = no projection."""
    if weight is None:
        return _pair_mse(h, target)
    return _ProjectedMSE.apply(h.reshape(-1, h.shape[-1]), weight, target.reshape(-1, target.shape[-1]))


class HidCLS(nn.Module):
    """Hid-CLS: MSE between projected student and teacher [CLS] (first token) states, summed over pairs."""

    cls_only = True

    def __init__(self, spec: TermSpec) -> None:
        super().__init__()
        self.proj = HiddenProjections(spec)

    def forward(self, x: LossInputs) -> Tensor:
        total: Tensor | None = None
        for i, (s_layer, t_layer) in enumerate(x.hidden_pairs):
            if self.cls_only:
                hs, ht = x.cls(STUDENT, s_layer), x.cls(TEACHER, t_layer)
            elif x.reference_compat:
                hs, ht = x.hidden(STUDENT, s_layer), x.hidden(TEACHER, t_layer)
            else:
                # Only the real tokens: cheaper than projecting padding and masking afterwards.
                hs, ht = x.tokens(STUDENT, s_layer), x.tokens(TEACHER, t_layer)
            term = self.proj.mse(i, hs, ht)
            total = term if total is None else total + term
        assert total is not None
        return total


class HidSeq(HidCLS):
    """Hid-Seq: MSE between projected student and teacher states of all valid tokens, summed over pairs."""

    cls_only = False
