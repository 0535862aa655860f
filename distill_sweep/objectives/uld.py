"""Universal Logit Distillation (Boizard et al. 2024, "Towards Cross-Tokenizer Distillation: the Universal Logit
Distillation Loss for LLMs"), for a teacher and a student whose vocabularies differ, and the student's own
next-token cross-entropy that ULD is trained beside.

  uld  the Wasserstein-1 distance between the teacher's and the student's next-token distributions once each is
       sorted in decreasing order and the shorter padded with zeros to the longer vocabulary. With every pair of
       distinct classes one unit apart the distance of two sorted vectors has the closed form sum_i |p_T(i) - p_S(i)|
       (the paper's eq. 3); sorting drops which token carries the mass, so no token needs a counterpart.
  nll  the student's next-token cross-entropy on its own targets (the paper's loss is CE + lambda x ULD: the two
       weights are the objective's, `objective.terms.nll.weight` and `objective.terms.uld.weight`).

Positions: each model reads the same prompt/response text in its own tokens, so the two sequences have their own
target positions (`labels` != IGNORE: the response and [EOS]). As in the paper's code, the i-th target of the
student is paired with the i-th target of the teacher, for i below the shorter response's count: the first n of
each, n = min(n_T, n_S), the rest of the longer response unpaired. The teacher's labels are the batch's
`teacher_labels` where its tokens are not the student's (procedure=causal_lm puts them there), else `labels`.

Reduction (not the paper's code's): the distance is averaged over every paired position of the batch (a token
mean, as the next-token terms are), while the reference code averages each sequence over its n positions first,
then the batch's sequences, which weighs a short response's positions more; the two agree when every row pairs as
many positions. The term's default weight is 1.0 (the reference config's is 1.5: `objective.terms.uld.weight`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .causal import IGNORE, ForwardKL
from .chunked import chunked_mean
from .inputs import LossInputs, as_target

__all__ = ["TEACHER_LABELS", "aligned_rows", "sorted_w1"]

TEACHER_LABELS = "teacher_labels"  # the teacher's own labels, (B, S_T), when it reads other tokens


def sorted_w1(p_student: Tensor, p_teacher: Tensor) -> Tensor:
    """Per row (N,): sum_i |sort(p_S)_i - sort(p_T)_i|, both sorted decreasingly and zero-padded to max(V_S, V_T)."""
    width = max(p_student.shape[-1], p_teacher.shape[-1])
    s = F.pad(p_student.sort(-1, descending=True).values, (0, width - p_student.shape[-1]))
    t = F.pad(p_teacher.sort(-1, descending=True).values, (0, width - p_teacher.shape[-1]))
    return (s - t).abs().sum(-1)


def aligned_rows(student_logits: Tensor, student_labels: Tensor, teacher_logits: Tensor, teacher_labels: Tensor
                 ) -> tuple[Tensor, Tensor]:
    """(student rows, teacher rows), each (N, V_side): per sequence, the first min(n_S, n_T) target positions of
    each side, paired in order."""
    s_rows, t_rows = [], []
    for b in range(student_labels.shape[0]):
        s_pos = (student_labels[b] != IGNORE).nonzero().squeeze(-1)
        t_pos = (teacher_labels[b] != IGNORE).nonzero().squeeze(-1)
        n = min(len(s_pos), len(t_pos))
        s_rows.append(student_logits[b, s_pos[:n]])
        t_rows.append(teacher_logits[b, t_pos[:n]])
    return torch.cat(s_rows), torch.cat(t_rows)


class ULD(ForwardKL):
    """ULD: Wasserstein-1 of the sorted, zero-padded next-token distributions, across vocabularies (causal LMs)."""

    def __init__(self, spec: object) -> None:
        torch.nn.Module.__init__(self)

    def forward(self, x: LossInputs) -> Tensor:
        # not chunked (procedure.logit_chunk): it pairs rows across two sequences; the logits are made whole
        s_logits, t_logits = (f.logits if f.head is None else f.head.full() for f in (x.student, x.teacher))
        if s_logits is None or t_logits is None:
            raise RuntimeError("objective term uld needs the teacher's full logits (not a stored top-k)")
        labels = x.batch["labels"]
        s_rows, t_rows = aligned_rows(s_logits, labels, as_target(t_logits), x.batch.get(TEACHER_LABELS, labels))
        if s_rows.shape[0] == 0:  # no paired position in the batch: a zero that keeps the graph
            return s_logits.sum() * 0.0
        return sorted_w1(F.softmax(s_rows.float(), -1), F.softmax(t_rows, -1)).mean()


class StudentNLL(ForwardKL):
    """The student's next-token cross-entropy on its own targets (causal LMs; ULD's CE term)."""

    def __init__(self, spec: object) -> None:
        torch.nn.Module.__init__(self)

    def forward(self, x: LossInputs) -> Tensor:
        if x.student.head is not None:  # procedure.logit_chunk: a chunk of positions at a time (chunked.py)
            return chunked_mean(x.student.head, x.batch["labels"], lambda z, y, sl: F.cross_entropy(z.float(), y),
                                x.student.head.chunk)
        assert x.student.logits is not None
        where = x.batch["labels"] != IGNORE
        if not bool(where.any()):  # no target in the batch: a zero that keeps the graph (not the NaN of a 0/0 mean)
            return x.student.logits.sum() * 0.0
        return F.cross_entropy(x.student.logits[where].float(), x.batch["labels"][where])
