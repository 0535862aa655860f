"""hid_cls and hid_seq: MSE between projected student and teacher hidden states (of the [CLS] token, or of every
valid token), summed over the mapped pairs. Their code: hidden.py.

Torch-free: the terms' settings (their defaults' one home) and their declarations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from distill_sweep.config.parse import IDENTITY, UNHASHED_AT_DEFAULT
from distill_sweep.errors import ConfigError

from .term_base import TermInfo, TermSettings, declare


@dataclass
class HiddenSettings(TermSettings):
    projection: Literal["linear", "none"] = field(default="linear", metadata=IDENTITY)  # learnable W_h, or none (equal widths only)
    shared_projection: bool = field(default=False, metadata=IDENTITY)  # one W_h for all hidden pairs instead of one per pair
    # W_h's start: identity (at equal widths; nn.Linear's default init otherwise) or random (TinyBERT's code:
    # normal with std = the student's initializer_range, at any widths)
    projection_init: Literal["identity", "random"] = field(default="identity", metadata=IDENTITY | UNHASHED_AT_DEFAULT)

    def validate(self, where: str) -> None:
        if self.projection == "none" and self.projection_init != "identity":
            raise ConfigError(f"{where}.projection_init={self.projection_init} starts a W_h that "
                              f"{where}.projection=none does not have")


declare(
    TermInfo("hid_cls", "distill_sweep.objectives.hidden:HidCLS",
             "Hid-CLS: MSE between projected student and teacher [CLS] (first token) states, summed over pairs.",
             uses_hidden=True, settings=HiddenSettings, cls_only=True, pairs_embeddings=True),
    TermInfo("hid_seq", "distill_sweep.objectives.hidden:HidSeq",
             "Hid-Seq: MSE between projected student and teacher states of all valid tokens, summed over pairs.",
             uses_hidden=True, settings=HiddenSettings, pairs_embeddings=True),
)
