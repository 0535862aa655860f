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

Sparse teacher logits (`procedure.teacher_logits`, k entries per position from the teacher-output store: token
ids and the teacher's log-probabilities of them at T = 1), one estimator each:

  top_k       both distributions restricted to the teacher's k most likely tokens and renormalised there (TRL's
              GOLD rule): any T, but biased: the tail's mass is dropped and the head's share inflated, so the
              student's gradient is not full KD's (zero outside the k; Anshumann et al., ACL 2025), and the student's
              mass outside the k is unconstrained (DistillKit's top-k keeps the student's full softmax instead). At
              k = 1 both sides are 1 and the loss is 0: refused (procedures/causal_lm_settings.py)
  top_k_full  the teacher renormalised over its k tokens, the student's full softmax read at them (DistillKit's
              top-k): forward KL only, loss sum_j p_T,j [log p_T,j - log p_S(x_j)], gradient p_S - p_T with p_T zero
              off the k, so the student's mass outside the k is pushed down; any T. Biased still (the teacher's
              tail is dropped and its head's share inflated)
  top_k_tail  the k tokens plus one more class holding the rest of each distribution's mass (the teacher's
              1 - sum of its k probabilities, the student's own tail): exact on the k, the tail as one lump; T = 1
              (the teacher's tail at another T needs its whole vocabulary)
  sampled     k tokens x_1..x_k drawn from the teacher's distribution, loss (1/k) sum_j [log p_T(x_j) - log p_S(x_j)]
              with the student's full softmax: its expectation is KL(p_T || p_S) and its gradient's expectation
              p_S - p_T, forward KL's exactly (random-sampling KD, after Anshumann et al. 2025, with the teacher as
              the proposal). Forward KL at T = 1 only: reverse KL and JSD are not linear in p_T.

The batch then carries the entries under the mode's keys (`SPARSE_KEYS`) and the teacher's logits are not needed.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from distill_sweep.models.families import is_causal_type
from distill_sweep.models.lm_head import HeadLogits
from distill_sweep.models.model_info import ModelInfo

from ..errors import ConfigError
from .chunked import chunked_mean, teacher_rows
from .inputs import LossInputs, as_target

__all__ = ["IGNORE", "SPARSE_KEYS", "causal_kd", "divergence"]

IGNORE = -100  # a position that predicts nothing (corpus.IGNORE's value; objectives sit beside corpus.py)
TOP_K, TOP_K_FULL, TOP_K_TAIL, SAMPLED = "top_k", "top_k_full", "top_k_tail", "sampled"
Sparse = Literal["top_k", "top_k_full", "top_k_tail", "sampled"]
TOPK_VALUES, TOPK_INDICES = "teacher_topk_values", "teacher_topk_indices"
# the batch keys of each sparse mode's (log-probabilities, ids): the mode is told by which keys the batch has
SPARSE_KEYS: dict[str, tuple[str, str]] = {
    TOP_K: (TOPK_VALUES, TOPK_INDICES),
    TOP_K_FULL: ("teacher_topk_full_values", "teacher_topk_full_indices"),
    TOP_K_TAIL: ("teacher_topk_tail_values", "teacher_topk_tail_indices"),
    SAMPLED: ("teacher_sampled_values", "teacher_sampled_indices"),
}


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
              kind: Literal["fkl", "rkl", "gjsd"], temperature: float = 1.0, beta: float = 0.5,
              sparse: Sparse = TOP_K) -> Tensor:
    """T^2 x the mean divergence over the predicting positions (labels != IGNORE). `student_logits` (B, S, V);
    `teacher`: its logits (B, S, V), or k stored entries (log-probabilities or logits, ids), each (B, S, k), read
    by the estimator `sparse` (the module's docstring)."""
    where = labels != IGNORE
    s_rows = student_logits[where].float() / temperature
    if s_rows.shape[0] == 0:  # no predicting position in the batch: a zero that keeps the graph
        return student_logits.sum() * 0.0
    if not isinstance(teacher, tuple):
        t_rows = as_target(teacher[where]) / temperature
        per_row = divergence(F.log_softmax(s_rows, -1), F.log_softmax(t_rows, -1), kind, beta)
        return per_row.mean() * (temperature * temperature)
    values, indices = teacher
    idx, t_rows = indices[where].long(), as_target(values[where])
    if sparse == TOP_K:  # both restricted to the teacher's k tokens, renormalised there
        logp_s, logp_t = F.log_softmax(s_rows.gather(-1, idx), -1), F.log_softmax(t_rows / temperature, -1)
        return divergence(logp_s, logp_t, kind, beta).mean() * (temperature * temperature)
    if sparse == TOP_K_FULL:  # the teacher renormalised over its k, the student's whole softmax
        if kind != "fkl":
            raise ValueError(f"teacher_logits=top_k_full reads the student's full softmax at the k: fkl only, not {kind}")
        logp_t = F.log_softmax(t_rows / temperature, -1)
        logp_s = F.log_softmax(s_rows, -1).gather(-1, idx)
        return (logp_t.exp() * (logp_t - logp_s)).sum(-1).mean() * (temperature * temperature)
    if temperature != 1.0:
        raise ValueError(f"teacher_logits={sparse} reads the teacher's probabilities at T = 1, not T = {temperature}")
    logp_s = F.log_softmax(s_rows, -1)  # the student's whole vocabulary
    if sparse == SAMPLED:
        if kind != "fkl":
            raise ValueError(f"teacher_logits=sampled estimates forward KL only, not {kind}")
        return (t_rows - logp_s.gather(-1, idx)).mean(-1).mean()
    # top_k_tail: k + 1 classes. The student's tail is a logsumexp over the tokens outside the k (stable where the
    # k hold nearly all its mass); the teacher's is 1 - sum, floored (float16 sums can reach 1) and renormalised
    s_tail = logp_s.scatter(-1, idx, float("-inf")).logsumexp(-1, keepdim=True)
    t_tail = (1.0 - t_rows.exp().sum(-1, keepdim=True)).clamp(min=torch.finfo(torch.float32).tiny).log()
    logp_t = F.log_softmax(torch.cat([t_rows, t_tail], -1), -1)
    return divergence(torch.cat([logp_s.gather(-1, idx), s_tail], -1), logp_t, kind, beta).mean()


def _teacher(x: LossInputs) -> tuple[Tensor | tuple[Tensor, Tensor], Sparse]:
    for mode, (values, indices) in SPARSE_KEYS.items():
        if indices in x.batch:
            return (x.batch[values], x.batch[indices]), mode  # type: ignore[return-value]
    logits = x.teacher.logits if x.teacher.logits is not None else x.teacher.head
    if logits is None:
        raise RuntimeError("a next-token term needs the teacher's logits (or its stored top-k)")
    return logits, TOP_K


def _term(x: LossInputs, kind: Literal["fkl", "rkl", "gjsd"], temperature: float, beta: float = 0.5) -> Tensor:
    teacher, sparse = _teacher(x)
    labels = x.batch["labels"]
    head = x.student.head
    if head is not None:  # procedure.logit_chunk: the same formula, a chunk of positions at a time (chunked.py)
        rows = teacher_rows(teacher, labels != IGNORE)
        return chunked_mean(head, labels, lambda z, y, sl: causal_kd(z, rows(sl), y, kind=kind, temperature=temperature,
                                                                     beta=beta, sparse=sparse), head.chunk)
    assert x.student.logits is not None
    if isinstance(teacher, HeadLogits):  # a student with logits, a teacher without: made whole
        teacher = teacher.full()
    return causal_kd(x.student.logits, teacher, labels, kind=kind, temperature=temperature, beta=beta, sparse=sparse)


class ForwardKL(torch.nn.Module):
    """Forward KL(teacher || student) of the next-token distributions (causal LMs), x T^2."""

    @staticmethod
    def check_compatible(settings: object, student: ModelInfo, teacher: ModelInfo, layer_map: object) -> None:
        for side, info in (("student", student), ("teacher", teacher)):
            if not is_causal_type(info.model_type):
                raise ConfigError(f"the next-token terms (fkl, rkl, gjsd, uld, ...) compare next-token distributions of decoder LMs: the "
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
