"""Distillation objectives of "How to Distill your BERT" (Wang et al., 2023), Section 3.

This package's own names are what the config checks need, and import no torch: the objective's settings and
checks (config.py) and the declared terms (registry.py, which imports every term's declaration and settings,
objectives/*_settings.py, each naming its term's code). A term's code (hidden.py, attention.py, causal.py, ...)
is imported when a job builds it.

The runtime objective comes from its own modules: ``core.build_objective``, ``core.Objective``,
``inputs.LossInputs``, ``prediction.prediction_loss``, ``spec.TermSpec``.

To add a term: write a function ``fn(x: LossInputs) -> Tensor`` (or an ``nn.Module`` class taking a
``TermSpec``), declare it with its flags and settings in a new module here named as objectives/*_settings.py,
and add a conf/objective/<name>.yaml with ``terms: {name: 1.0}`` (docs/guide/add-objective.md).
"""

from .config import STAGE_KINDS, ObjectiveSettings, check_compatible, parse_objective
from .registry import ANY_VOCAB_TERMS, NEXT_TOKEN_TERMS, TERMS, TermInfo, available_terms, declare
from .term_base import TermSettings

__all__ = [
    "ANY_VOCAB_TERMS",
    "NEXT_TOKEN_TERMS",
    "STAGE_KINDS",
    "TERMS",
    "ObjectiveSettings",
    "TermInfo",
    "TermSettings",
    "available_terms",
    "check_compatible",
    "declare",
    "parse_objective",
]
