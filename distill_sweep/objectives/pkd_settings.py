"""pkd_cls, PKD's patient loss on the [CLS] states of the student's layers below its last. Its code: pkd.py.

Torch-free: the term's settings (their defaults' one home) and its declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distill_sweep.config.parse import IDENTITY

from .term_base import TermInfo, TermSettings, declare


@dataclass
class PKDSettings(TermSettings):
    normalize: bool = field(default=True, metadata=IDENTITY)  # L2-normalise each [CLS] vector first (PKD's --normalize_patience)


declare(
    TermInfo("pkd_cls", "distill_sweep.objectives.pkd:PatienceCLS",
             "PKD's patient loss: MSE of L2-normalised [CLS] states of student layers 1..k-1 and their teacher "
             "layers.", uses_hidden=True, settings=PKDSettings, cls_only=True),
)
