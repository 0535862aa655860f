"""Registry of intermediate-layer loss terms, each with its own typed settings.

A term is either a plain function ``fn(x: LossInputs) -> Tensor`` (no parameters, no state) or an
``nn.Module`` subclass constructed as ``cls(spec: TermSpec)`` whose ``forward(x: LossInputs)`` returns a
scalar.  Its settings are a dataclass extending ``TermSettings`` (``weight`` and whatever the term reads,
e.g. ``projection``), checked when the job is validated.  Registering a term is a decorator; using it is
one YAML in conf/objective/ naming it under ``terms`` (``terms: {hid_seq: {weight: 1.0}}``).
Combinations (e.g. Att-MSE + Hid-Seq) are YAML only: the objective sums ``weight * term`` over its terms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

__all__ = ["TERMS", "FunctionTerm", "TermInfo", "TermSettings", "TermSpec", "available_terms", "register_term"]


@dataclass
class TermSettings:
    """Settings every term has; a term with more extends this class."""

    weight: float = field(default=1.0, metadata={"ge": 0.0})  # the term's weight in its stage's loss


@dataclass(frozen=True)
class TermSpec:
    """Everything a term may need at construction time."""

    name: str
    settings: Any  # the term's own settings (a TermSettings subclass instance)
    student_config: Any  # hidden_size / num_attention_heads are read
    teacher_config: Any
    layer_map: tuple[tuple[int, int], ...]  # 1-based (student_layer, teacher_layer)
    train_labels: Tensor | None = None
    num_labels: int = 2
    reference_compat: bool = False

    @property
    def student_hidden(self) -> int:
        return int(self.student_config.hidden_size)

    @property
    def teacher_hidden(self) -> int:
        return int(self.teacher_config.hidden_size)

    @property
    def hidden_pairs(self) -> tuple[tuple[int, int], ...]:
        """Hidden-state pairs: the embedding outputs (0, 0) first, then the layer map."""
        return ((0, 0), *self.layer_map)


@dataclass(frozen=True)
class TermInfo:
    name: str
    factory: Callable[[TermSpec], nn.Module]
    uses_hidden: bool
    uses_qkv: bool
    doc: str
    settings: type = TermSettings
    same_heads: bool = True  # with uses_qkv: compares attention heads one to one (equal head counts)
    cls_only: bool = False  # with uses_hidden: reads only the first token's state of each mapped layer


TERMS: dict[str, TermInfo] = {}


class FunctionTerm(nn.Module):
    """Adapter so a parameter-free loss function sits in the objective's ModuleDict like a class term."""

    def __init__(self, fn: Callable[..., Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Any) -> Tensor:
        return self.fn(x)

    def extra_repr(self) -> str:
        return self.fn.__name__


def register_term(
    name: str, *, hidden: bool = False, qkv: bool = False, same_heads: bool = True, settings: type = TermSettings,
    cls_only: bool = False,
) -> Callable[[Any], Any]:
    """Register a loss term under ``name`` (the key used in ``objective.terms``).

    ``hidden``: needs all hidden states of both models; ``qkv``: needs q/k/v of the mapped layers, and,
    unless ``same_heads=False`` (a term that regroups the projections itself), equal head counts in student
    and teacher; ``settings``: its settings dataclass; ``cls_only``: of the hidden states it reads only the
    first token's (then the teacher's can come from the teacher-output store).
    """

    def deco(obj: Any) -> Any:
        if name in TERMS:
            raise ValueError(f"loss term {name!r} registered twice")
        if isinstance(obj, type) and issubclass(obj, nn.Module):
            factory: Callable[[TermSpec], nn.Module] = obj
        elif callable(obj):

            def factory(_spec: TermSpec, fn: Callable[..., Tensor] = obj) -> nn.Module:
                return FunctionTerm(fn)

        else:  # pragma: no cover - programming error
            raise TypeError(f"cannot register {obj!r} as a loss term")
        doc = (obj.__doc__ or "").strip().splitlines()
        TERMS[name] = TermInfo(name, factory, hidden, qkv, doc[0] if doc else "", settings, same_heads, cls_only)
        return obj

    return deco


def available_terms() -> list[str]:
    return sorted(TERMS)
