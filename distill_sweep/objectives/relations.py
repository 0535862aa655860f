"""MiniLMv2 multi-head self-attention relations (Wang et al. 2021) as a task-specific term: ``rel_kl``.

For each chosen relation (Q-Q, K-K, V-V by default; any pair of q, k, v, e.g. ``qk``) and each mapped
(student, teacher) layer pair, each model's captured (B, S, width) projections are split into A_r
*relation heads* of width / A_r (each model with its own width, so head counts and widths may differ), and

    R = softmax_j(X_a[i] . Y_a[j] / sqrt(d_r))           over the real keys j of the example
    L = (1/B) sum_b 1/(A_r n_b) sum_{a, real i} KL(R_T[b, a, i] || R_S[b, a, i])

with n_b the example's number of real tokens: the normalisation of MiniLMv2's formula, per example, then the
mean over the batch (Bloomberg's minilmv2.bb does the same), NOT the token-pooled mean of att_kl.  The
relations and layer pairs are summed with unit weights (MiniLMv2's formula 5); the term's ``weight``
scales the sum.  Teacher relations carry no gradient.  ``objective.reference_compat`` does not apply (the
paper's reference code has no such term): padding is always excluded.

The KL of one relation is the tiled attention-KL kernel of attention.py with A_r heads and each side's
1/sqrt(d_r) as its scale (a self-relation passes the same tensor twice and takes its symmetric gradient).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import Tensor, nn

from distill_sweep.models.model_info import ModelInfo

from ..errors import ConfigError
from .attention_kernels import kl_attention_loss
from .inputs import STUDENT, TEACHER, LossInputs
from .relations_settings import RelationSettings
from .spec import TermSpec

__all__ = ["RelationKL", "common_divisors"]

_INDEX = {"q": 0, "k": 1, "v": 2}  # position in LossInputs.qkv's (q, k, v)


def common_divisors(*widths: int) -> list[int]:
    g = math.gcd(*widths)
    return [d for d in range(1, g + 1) if g % d == 0]


class RelationKL(nn.Module):
    """MiniLMv2 relations: KL(teacher || student) of Q-Q, K-K, V-V relations over A_r relation heads."""

    def __init__(self, spec: TermSpec) -> None:
        super().__init__()
        self.heads = int(spec.settings.relation_heads)
        self.relations = [(_INDEX[r[0]], _INDEX[r[1]]) for r in spec.settings.relations]

    @staticmethod
    def check_compatible(settings: RelationSettings, student: ModelInfo, teacher: ModelInfo,
                         layer_map: Sequence[tuple[int, int]] | None) -> None:
        """Relation heads must split both models' q/k/v width (objectives.check_compatible calls it)."""
        heads = settings.relation_heads
        for side, model in (("student", student), ("teacher", teacher)):
            if model.hidden_size % heads:
                both = ", ".join(map(str, common_divisors(student.hidden_size, teacher.hidden_size)))
                raise ConfigError(
                    f"objective.terms.rel_kl.relation_heads={heads} does not divide the {side}'s width "
                    f"{model.hidden_size}; use a common divisor of the student's {student.hidden_size} and the "
                    f"teacher's {teacher.hidden_size}: {both}"
                )

    def _scale(self, side: str, width: int) -> float:
        if width % self.heads:  # a model whose q/k/v width is not its hidden size (checked above)
            raise ConfigError(f"objective.terms.rel_kl.relation_heads={self.heads} does not divide the {side}'s "
                              f"query/key/value width {width}")
        return (width // self.heads) ** -0.5

    def forward(self, x: LossInputs) -> Tensor:
        valid = x.valid
        b = valid.shape[0]
        real = valid.float()
        # row weight 1 / (B A_r n_b) on the real query rows of example b (summed over the A_r heads)
        rows = (real / (real.sum(1, keepdim=True).clamp_min(1.0) * (self.heads * b))).unsqueeze(1)
        total: Tensor | None = None
        for s_layer, t_layer in x.layer_map:
            s, t = x.qkv(STUDENT, s_layer), x.qkv(TEACHER, t_layer)
            c_s, c_t = self._scale("student", s[0].shape[-1]), self._scale("teacher", t[0].shape[-1])
            for m, n in self.relations:
                term = kl_attention_loss(s[m], s[n], c_s, t[m], t[n], c_t, valid, rows, self.heads, valid)
                total = term if total is None else total + term
        assert total is not None
        return total

    def extra_repr(self) -> str:
        names = ["qkv"[m] + "qkv"[n] for m, n in self.relations]
        return f"relation_heads={self.heads}, relations={names}"
