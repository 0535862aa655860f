"""hid_cls_contrast, CoDIR's contrastive [CLS] distillation with a memory bank. Its code: contrastive.py.

Torch-free: the term's settings (their defaults' one home) and its declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from distill_sweep.config.parse import IDENTITY, TEMPERATURE

from .term_base import TermInfo, TermSettings, declare


@dataclass
class ContrastSettings(TermSettings):
    dim: int = field(default=128, metadata=IDENTITY | {"ge": 1})  # projection size of the [CLS] features
    temperature: float = field(default=0.07, metadata=IDENTITY | TEMPERATURE)  # tau of the contrastive softmax
    momentum: float = field(default=0.5, metadata=IDENTITY | {"ge": 0.0, "lt": 1.0})  # memory-bank update momentum
    num_negatives: int = field(default=100, metadata=IDENTITY | {"ge": 1})  # K, from examples with another label
    loss: Literal["nce", "infonce"] = field(default="nce", metadata=IDENTITY)  # nce (CRD code, as the reference) | infonce (CoDIR's formula)


declare(
    TermInfo("hid_cls_contrast", "distill_sweep.objectives.contrastive:HidCLSContrast",
             "Hid-CLS-Contrast: CoDIR contrastive [CLS] distillation with a training-set memory bank.",
             uses_hidden=True, settings=ContrastSettings, cls_only=True, pairs_embeddings=True),
)
