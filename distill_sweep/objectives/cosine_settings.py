"""hid_cos, DistilBERT's cosine loss on the hidden states. Its code: cosine.py.

Torch-free: the term's declaration (its settings: the weight every term has).
"""

from __future__ import annotations

from .term_base import TermInfo, declare

declare(
    TermInfo("hid_cos", "distill_sweep.objectives.cosine:HidCos",
             "Hid-Cos (DistilBERT): mean over real tokens of 1 - cos(student state, teacher state), summed over "
             "pairs.", uses_hidden=True),
)
