"""Token-level distillation terms for causal (decoder) LMs: forward KL, reverse KL, generalised JSD(beta).

Each compares the teacher's and the student's next-token distributions at the positions that predict a
token: the batch's `labels` (B, S) hold, at position t, the token t+1 that the logits at t predict (already
shifted) and IGNORE (-100) where nothing is predicted (padding, a prompt, a sequence's last position), so a
term reads only positions whose label is not IGNORE and averages over them (per token, as TRL's GKD trainer
does). With temperature T, p = softmax(z / T), and every divergence is multiplied by T^2 (Hinton et al.'s
scaling, as the encoders' KD term), so T = 1 gives the plain divergence:

  fkl    T^2 KL(p_T || p_S)                                    (mass-covering; the usual KD)
  rkl    T^2 KL(p_S || p_T)                                    (mode-seeking; MiniLLM's direction)
  gjsd   T^2 [beta KL(p_T || M) + (1 - beta) KL(p_S || M)],  M = beta p_T + (1 - beta) p_S
         (Agarwal et al. 2024, eq. 1; beta = 0 is taken as fkl and beta = 1 as rkl, as TRL's
         `generalized_jsd_loss` does, since the mixture form vanishes there)

Top-k teacher logits (`procedure.teacher_top_k`, from the teacher-output store): the teacher is known only
on its k most likely tokens, so both distributions are restricted to those k tokens and renormalised over
them before the divergence is taken (TRL's GOLD trainer's rule for `top_k`); the batch then carries
`teacher_topk_values` / `teacher_topk_indices` (B, S, k) and the teacher's logits are not needed.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from distill_sweep.models.families import is_causal_type
from distill_sweep.models.model_info import ModelInfo

from ..errors import ConfigError
from .inputs import LossInputs, as_target

__all__ = ["IGNORE", "causal_kd", "divergence"]

IGNORE = -100  # a position that predicts nothing (corpus.IGNORE's value; objectives sit beside corpus.py)
TOPK_VALUES, TOPK_INDICES = "teacher_topk_values", "teacher_topk_indices"


def divergence(logp_s: Tensor, logp_t: Tensor, kind: Literal["fkl", "rkl", "gjsd"], beta: float = 0.5) -> Tensor:
    """Per-row divergence (N,) between row-wise log-distributions (N, V) (no temperature, no scaling)."""
    if kind == "gjsd" and beta == 0.0:
        kind = "fkl"
    elif kind == "gjsd" and beta == 1.0:
        kind = "rkl"
    if kind == "fkl":
        return (logp_t.exp() * (logp_t - logp_s)).sum(-1)
    if kind == "rkl":
        return (logp_s.exp() * (logp_s - logp_t)).sum(-1)
    # log M without materialising M (its small entries would underflow); logaddexp is one fused pass
    log_m = torch.logaddexp(logp_t + math.log(beta), logp_s + math.log1p(-beta))
    kl_t = (logp_t.exp() * (logp_t - log_m)).sum(-1)
    kl_s = (logp_s.exp() * (logp_s - log_m)).sum(-1)
    return beta * kl_t + (1.0 - beta) * kl_s


def causal_kd(student_logits: Tensor, teacher: Tensor | tuple[Tensor, Tensor], labels: Tensor, *,
              kind: Literal["fkl", "rkl", "gjsd"], temperature: float = 1.0, beta: float = 0.5) -> Tensor:
    """T^2 x the mean divergence over the predicting positions (labels != IGNORE). `student_logits` (B, S, V);
    `teacher`: its logits (B, S, V), or its top-k (values, indices), each (B, S, k)."""
    where = labels != IGNORE
    s_rows = student_logits[where].float() / temperature
    if isinstance(teacher, tuple):
        values, indices = teacher
        idx = indices[where].long()
        s_rows = s_rows.gather(-1, idx)  # both restricted to the teacher's k tokens, renormalised there
        t_rows = as_target(values[where]) / temperature
    else:
        t_rows = as_target(teacher[where]) / temperature
    if s_rows.shape[0] == 0:  # no predicting position in the batch: a zero that keeps the graph
        return student_logits.sum() * 0.0
    per_row = divergence(F.log_softmax(s_rows, -1), F.log_softmax(t_rows, -1), kind, beta)
    return per_row.mean() * (temperature * temperature)


def _teacher(x: LossInputs) -> Tensor | tuple[Tensor, Tensor]:
    if TOPK_INDICES in x.batch:
        return x.batch[TOPK_VALUES], x.batch[TOPK_INDICES]
    logits = x.teacher.logits
    if logits is None:
        raise RuntimeError("a next-token term needs the teacher's logits (or its stored top-k)")
    return logits


def _term(x: LossInputs, kind: Literal["fkl", "rkl", "gjsd"], temperature: float, beta: float = 0.5) -> Tensor:
    assert x.student.logits is not None
    return causal_kd(x.student.logits, _teacher(x), x.batch["labels"], kind=kind, temperature=temperature, beta=beta)


class ForwardKL(torch.nn.Module):
    """Forward KL(teacher || student) of the next-token distributions (causal LMs), x T^2."""

    @staticmethod
    def check_compatible(settings: object, student: ModelInfo, teacher: ModelInfo, layer_map: object) -> None:
        for side, info in (("student", student), ("teacher", teacher)):
            if not is_causal_type(info.model_type):
                raise ConfigError(f"objective terms fkl/rkl/gjsd compare next-token distributions of decoder LMs: the "
                                  f"{side} is a {info.model_type} model (use procedure=causal_lm with a decoder teacher)")

    def __init__(self, spec: object) -> None:
        super().__init__()
        self.temperature = float(spec.settings.temperature)  # type: ignore[attr-defined]

    def forward(self, x: LossInputs) -> Tensor:
        return _term(x, "fkl", self.temperature)


class ReverseKL(ForwardKL):
    """Reverse KL(student || teacher) of the next-token distributions (causal LMs), x T^2."""

    def forward(self, x: LossInputs) -> Tensor:
        return _term(x, "rkl", self.temperature)


class GeneralizedJSD(ForwardKL):
    """Generalised Jensen-Shannon divergence (beta) of the next-token distributions (causal LMs), x T^2."""

    def __init__(self, spec: object) -> None:
        super().__init__(spec)
        self.beta = float(spec.settings.beta)  # type: ignore[attr-defined]

    def forward(self, x: LossInputs) -> Tensor:
        return _term(x, "gjsd", self.temperature, self.beta)
