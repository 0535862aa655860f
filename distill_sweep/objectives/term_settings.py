"""Each loss term's typed settings (`objective.terms.<term>`): torch-free, so a job's config is checked before
torch is imported. The terms' code (hidden.py, causal.py, ...) reads them from its `TermSpec`; registry.py
says which term takes which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from distill_sweep.config.parse import LOSS_WEIGHT, TEMPERATURE, UNHASHED_AT_DEFAULT

from ..errors import ConfigError

__all__ = [
    "RELATIONS",
    "CausalKDSettings",
    "ContrastSettings",
    "GJSDSettings",
    "HiddenSettings",
    "PKDSettings",
    "RelationSettings",
    "TermSettings",
]


@dataclass
class TermSettings:
    """Settings every term has; a term with more extends this class."""

    weight: float = field(default=1.0, metadata=LOSS_WEIGHT)  # the term's weight in its stage's loss


@dataclass
class HiddenSettings(TermSettings):
    projection: Literal["linear", "none"] = "linear"  # learnable W_h, or none (equal widths only)
    shared_projection: bool = False  # one W_h for all hidden pairs instead of one per pair
    # W_h's start: identity (at equal widths; nn.Linear's default init otherwise) or random (TinyBERT's code:
    # normal with std = the student's initializer_range, at any widths)
    projection_init: Literal["identity", "random"] = field(default="identity", metadata=UNHASHED_AT_DEFAULT)

    def validate(self, where: str) -> None:
        if self.projection == "none" and self.projection_init != "identity":
            raise ConfigError(f"{where}.projection_init={self.projection_init} starts a W_h that "
                              f"{where}.projection=none does not have")


@dataclass
class PKDSettings(TermSettings):
    normalize: bool = True  # L2-normalise each [CLS] vector first (PKD's --normalize_patience)


@dataclass
class ContrastSettings(TermSettings):
    dim: int = field(default=128, metadata={"ge": 1})  # projection size of the [CLS] features
    temperature: float = field(default=0.07, metadata=TEMPERATURE)  # tau of the contrastive softmax
    momentum: float = field(default=0.5, metadata={"ge": 0.0, "lt": 1.0})  # memory-bank update momentum
    num_negatives: int = field(default=100, metadata={"ge": 1})  # K, from examples with another label
    loss: Literal["nce", "infonce"] = "nce"  # nce (CRD code, as the reference) | infonce (CoDIR's formula)


Relation = Literal["qq", "kk", "vv", "qk", "kq", "qv", "vq", "kv", "vk"]
RELATIONS: tuple[str, ...] = ("qq", "kk", "vv", "qk", "kq", "qv", "vq", "kv", "vk")


@dataclass
class RelationSettings(TermSettings):
    relation_heads: int = field(default=48, metadata={"ge": 1})  # A_r: 48 for base teachers (MiniLMv2)
    # the relations distilled, pairs of q, k, v (qk: the attention map)
    relations: list[Relation] = field(default_factory=lambda: ["qq", "kk", "vv"])

    def validate(self, where: str) -> None:
        if not self.relations:
            raise ConfigError(f"{where}.relations is empty: use some of {', '.join(RELATIONS)}")
        if len(set(self.relations)) != len(self.relations):
            raise ConfigError(f"{where}.relations={self.relations}: a relation appears twice")


@dataclass
class CausalKDSettings(TermSettings):
    temperature: float = field(default=1.0, metadata=TEMPERATURE)  # softmax temperature T (the loss is x T^2)


@dataclass
class GJSDSettings(CausalKDSettings):
    # interpolation: 0 = forward KL, 1 = reverse KL, between: the mixture's JSD (0.5: symmetric JSD)
    beta: float = field(default=0.5, metadata={"ge": 0.0, "le": 1.0})
