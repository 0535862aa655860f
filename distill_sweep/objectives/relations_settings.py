"""rel_kl, MiniLMv2's self-attention relations over relation heads. Its code: relations.py.

Torch-free: the term's settings (their defaults' one home) and its declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from distill_sweep.config.parse import IDENTITY
from distill_sweep.errors import ConfigError

from .term_base import TermInfo, TermSettings, declare

Relation = Literal["qq", "kk", "vv", "qk", "kq", "qv", "vq", "kv", "vk"]
RELATIONS: tuple[str, ...] = ("qq", "kk", "vv", "qk", "kq", "qv", "vq", "kv", "vk")


@dataclass
class RelationSettings(TermSettings):
    relation_heads: int = field(default=48, metadata=IDENTITY | {"ge": 1})  # A_r: 48 for base teachers (MiniLMv2)
    # the relations distilled, pairs of q, k, v (qk: the attention map)
    relations: list[Relation] = field(default_factory=lambda: ["qq", "kk", "vv"], metadata=IDENTITY)

    def validate(self, where: str) -> None:
        if not self.relations:
            raise ConfigError(f"{where}.relations is empty: use some of {', '.join(RELATIONS)}")
        if len(set(self.relations)) != len(self.relations):
            raise ConfigError(f"{where}.relations={self.relations}: a relation appears twice")


declare(
    TermInfo("rel_kl", "distill_sweep.objectives.relations:RelationKL",
             "MiniLMv2 relations: KL(teacher || student) of Q-Q, K-K, V-V relations over A_r relation heads.",
             uses_qkv=True, same_heads=False, settings=RelationSettings),
)
