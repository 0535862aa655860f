"""Registry of intermediate-layer loss terms.

A term is either a plain function ``fn(x: LossInputs) -> Tensor`` (no parameters, no state) or an
``nn.Module`` subclass constructed as ``cls(spec: TermSpec)`` whose ``forward(x: LossInputs)`` returns a
scalar.  Registering one is a decorator; using it is one YAML in conf/objective/ naming it under ``terms``.
Combinations (e.g. Att-MSE + Hid-Seq) are YAML only: the objective sums ``weight * term`` over its terms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

__all__ = ["TERMS", "FunctionTerm", "TermInfo", "TermSpec", "available_terms", "register_term"]


@dataclass(frozen=True)
class TermSpec:
    """Everything a term may need at construction time."""

    name: str
    cfg: Mapping[str, Any]  # the whole objective config as plain containers
    student_config: Any  # transformers PretrainedConfig (only hidden_size / num_attention_heads read)
    teacher_config: Any
    layer_map: tuple[tuple[int, int], ...]  # 1-based (student_layer, teacher_layer)
    train_labels: Tensor | None = None
    num_labels: int = 2

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

    @property
    def reference_compat(self) -> bool:
        return bool(self.cfg.get("reference_compat", False))


@dataclass(frozen=True)
class TermInfo:
    name: str
    factory: Callable[[TermSpec], nn.Module]
    uses_hidden: bool
    uses_qkv: bool
    doc: str


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


def register_term(name: str, *, hidden: bool = False, qkv: bool = False) -> Callable[[Any], Any]:
    """Register a loss term under ``name`` (the key used in ``objective.terms``).

    ``hidden``: needs all hidden states of both models; ``qkv``: needs q/k/v of the mapped layers (and
    therefore equal head counts in student and teacher).
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
        TERMS[name] = TermInfo(name, factory, hidden, qkv, doc[0] if doc else "")
        return obj

    return deco


def available_terms() -> list[str]:
    return sorted(TERMS)
