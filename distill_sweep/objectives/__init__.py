"""Distillation objectives of "How to Distill your BERT" (Wang et al., 2023), Section 3.

Public API: ``build_objective``, ``IntermediateObjective``, ``prediction_loss``, plus the term registry
(``register_term``, ``TERMS``).  Importing this package registers every term:

    hid_cls, hid_seq            hidden.py       (MSE of [CLS] / all valid tokens, learnable W_h)
    hid_cls_contrast            contrastive.py  (CoDIR: CRD-NCE or InfoNCE with a training-set memory bank)
    att_mse, att_kl, val_kl     attention.py    (pre-softmax MSE, attention KL, MiniLM value-relation KL)
    fkl, rkl, gjsd              causal.py       (next-token forward / reverse KL, generalised JSD: decoder LMs)

To add a term: write a function ``fn(x: LossInputs) -> Tensor`` (or an ``nn.Module`` class taking a
``TermSpec``) decorated with ``@register_term("name", hidden=..., qkv=...)`` in a module imported below,
and a conf/objective/<name>.yaml with ``terms: {name: 1.0}``.
"""

from . import attention, causal, contrastive, cosine, hidden, pkd, relations  # noqa: F401  (import registers the terms)
from .core import (
    STAGE_KINDS,
    IntermediateObjective,
    Objective,
    ObjectiveSettings,
    build_objective,
    check_compatible,
    parse_objective,
)
from .inputs import LossInputs
from .prediction import prediction_loss
from .registry import TERMS, TermSettings, TermSpec, available_terms, register_term

__all__ = [
    "STAGE_KINDS",
    "TERMS",
    "IntermediateObjective",
    "LossInputs",
    "Objective",
    "ObjectiveSettings",
    "TermSettings",
    "TermSpec",
    "available_terms",
    "build_objective",
    "check_compatible",
    "parse_objective",
    "prediction_loss",
    "register_term",
]
