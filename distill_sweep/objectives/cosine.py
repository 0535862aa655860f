"""DistilBERT's cosine loss as a term: ``hid_cos``.

For each mapped (student, teacher) layer pair, the mean over the batch's real tokens of
``1 - cos(h_s, h_t)`` (torch's ``CosineEmbeddingLoss`` with target 1, which DistilBERT applies to the last
hidden states of its non-pad tokens); pairs are summed. No projection: the student has the teacher's width
(DistilBERT's does), and a student of another width is refused before any work.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from distill_sweep.models.model_info import ModelInfo, require_equal_widths

from .inputs import STUDENT, TEACHER, LossInputs
from .spec import TermSpec
from .term_base import TermSettings

__all__ = ["HidCos"]


class HidCos(nn.Module):
    """Hid-Cos (DistilBERT): mean over real tokens of 1 - cos(student state, teacher state), summed over pairs."""

    def __init__(self, spec: TermSpec) -> None:
        super().__init__()

    @staticmethod
    def check_compatible(settings: TermSettings, student: ModelInfo, teacher: ModelInfo,
                         layer_map: Sequence[tuple[int, int]] | None) -> None:
        require_equal_widths("hid_cos", "states", student, teacher)

    def forward(self, x: LossInputs) -> Tensor:
        total: Tensor | None = None
        for s_layer, t_layer in x.layer_map:
            cos = F.cosine_similarity(x.tokens(STUDENT, s_layer), x.tokens(TEACHER, t_layer), dim=-1)
            term = (1.0 - cos).mean()
            total = term if total is None else total + term
        assert total is not None
        return total
