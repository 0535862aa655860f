"""Patient KD (Sun et al. 2019): the `pkd_cls` term, L_PT of PKD's loss.

    L_PT = mean over the pairs (s, t) with s < k of  mean_{b, d} (n(h_s[CLS]) - n(h_t[CLS]))^2,
    n(v) = v / max(||v||_2, 1e-12)  (``normalize: true``; the identity otherwise),

k being the student's depth. The pairs come from the job's layer map (`map=`) less the pair of the last
student layer, which PKD leaves to the KD term: `map=skip` gives PKD-Skip (12 -> 6: teacher layers 2, 4,
6, 8, 10) and `map=last` PKD-Last (12 -> 6: teacher layers 7..11). No embedding pair and no projection:
the student has the teacher's width. Averaging over the pairs, not summing them, is what PKD's
``F.mse_loss`` over the stacked [B, k-1, D] states does, and what its beta (the term's weight, 500 in its
predefined setting) was tuned for. Run in the `combined` stage: (1-a) CE + a T^2 KL + beta L_PT.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from distill_sweep.models.model_info import ModelInfo, require_equal_widths

from ..errors import ConfigError
from .inputs import STUDENT, TEACHER, LossInputs
from .pkd_settings import PKDSettings
from .spec import TermSpec

__all__ = ["PatienceCLS", "patience_pairs"]

NORM_EPS = 1e-12  # F.normalize's default, as PKD's code uses it


def patience_pairs(layer_map: Sequence[tuple[int, int]], student_layers: int) -> tuple[tuple[int, int], ...]:
    """The layer map's pairs below the last student layer (the one the KD term covers)."""
    return tuple((int(s), int(t)) for s, t in layer_map if int(s) < student_layers)


class PatienceCLS(nn.Module):
    """PKD's patient loss: MSE of L2-normalised [CLS] states of student layers 1..k-1 and their teacher layers."""

    def __init__(self, spec: TermSpec) -> None:
        super().__init__()
        k = int(spec.student_config.num_hidden_layers)
        self.check_compatible(spec.settings, ModelInfo.from_config(spec.student_config),
                              ModelInfo.from_config(spec.teacher_config), spec.layer_map)
        self.pairs = patience_pairs(spec.layer_map, k)
        self.normalize = bool(spec.settings.normalize)

    @staticmethod
    def check_compatible(settings: PKDSettings, student: ModelInfo, teacher: ModelInfo,
                         layer_map: Sequence[tuple[int, int]] | None) -> None:
        """Refuse, from the configs alone, what PKD cannot compare (objectives.check_compatible calls it)."""
        require_equal_widths("pkd_cls", "[CLS] states", student, teacher)
        if student.num_layers < 2:
            raise ConfigError("objective term 'pkd_cls' compares student layers 1..k-1 (the last is left to the KD "
                              "term): the student has 1 layer; use at least 2")
        if layer_map is not None and not patience_pairs(layer_map, student.num_layers):
            raise ConfigError(f"objective term 'pkd_cls': the layer map {[list(p) for p in layer_map]} pairs no "
                              f"student layer below the last ({student.num_layers}); use map=skip (PKD-Skip), "
                              "map=last (PKD-Last) or pairs for layers 1..k-1")

    def _cls(self, x: LossInputs, side: str, layer: int) -> Tensor:
        h = x.cls(side, layer)
        return F.normalize(h, p=2.0, dim=-1, eps=NORM_EPS) if self.normalize else h

    def forward(self, x: LossInputs) -> Tensor:
        total: Tensor | None = None
        for s_layer, t_layer in self.pairs:
            diff = self._cls(x, STUDENT, s_layer) - self._cls(x, TEACHER, t_layer)
            term = (diff * diff).mean()
            total = term if total is None else total + term
        assert total is not None
        return total / len(self.pairs)

    def extra_repr(self) -> str:
        return f"pairs={list(self.pairs)}, normalize={self.normalize}"
