"""What a loss term is built from (`TermSpec`), and how a declared term's code becomes a module.

A term is either a plain function ``fn(x: LossInputs) -> Tensor`` (no parameters, no state) or an
``nn.Module`` subclass constructed as ``cls(spec: TermSpec)`` whose ``forward(x: LossInputs)`` returns a
scalar. registry.py declares each one by name; ``factory_of`` turns the code its target names into what
``build_objective`` calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

__all__ = ["FunctionTerm", "TermSpec", "factory_of"]


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
    embeddings_pair: bool = True  # hidden-state terms also pair the embedding outputs (0, 0)

    @property
    def student_hidden(self) -> int:
        return int(self.student_config.hidden_size)

    @property
    def teacher_hidden(self) -> int:
        return int(self.teacher_config.hidden_size)

    @property
    def hidden_pairs(self) -> tuple[tuple[int, int], ...]:
        """Hidden-state pairs: the embedding outputs (0, 0) first (unless ``embeddings_pair`` is off), then the
        layer map."""
        return ((0, 0), *self.layer_map) if self.embeddings_pair else self.layer_map


class FunctionTerm(nn.Module):
    """Adapter so a parameter-free loss function sits in the objective's ModuleDict like a class term."""

    def __init__(self, fn: Callable[..., Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Any) -> Tensor:
        return self.fn(x)

    def extra_repr(self) -> str:
        return self.fn.__name__


def factory_of(name: str, obj: Any) -> Callable[[TermSpec], nn.Module]:
    """What builds term `name` from its TermSpec: the class itself, or a FunctionTerm around a loss function."""
    if isinstance(obj, type) and issubclass(obj, nn.Module):
        return obj
    if isinstance(obj, type) or not callable(obj):
        raise TypeError(f"loss term {name!r}: {obj!r} is neither an nn.Module class nor a loss function")

    def factory(_spec: TermSpec) -> nn.Module:
        return FunctionTerm(obj)

    return factory
