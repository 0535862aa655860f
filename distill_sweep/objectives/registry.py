"""The loss terms, declared by name: what the config checks need, without torch.

Each term is declared in a torch-free `objectives/*_settings.py` beside its settings dataclass (hidden_settings.py:
HiddenSettings, hid_cls and hid_seq): its flags (what it reads from the student and the teacher), a one-line
description (the config reference's) and `target`, "module:attribute", the code: an ``nn.Module`` class built
from a ``TermSpec`` or a loss function (spec.py). Every such module of this package is imported here (found by its
name, so a new term is its code, its settings module and an objective preset: docs/guide/add-objective.md), and
`TERMS` then holds every term. The code is imported when a job first builds the term (`TermInfo.factory`), so
`objective.alpha=7` is refused before torch is. Using a term is one YAML in conf/objective/ naming it under
``terms`` (``terms: {hid_seq: {weight: 1.0}}``); combinations (e.g. Att-MSE + Hid-Seq) are YAML only: the
objective sums ``weight * term`` over its terms.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from .term_base import TERMS, TermInfo, declare

__all__ = ["ANY_VOCAB_TERMS", "NEXT_TOKEN_TERMS", "TERMS", "TermInfo", "available_terms", "declare",
           "declaring_modules"]

SUFFIX = "_settings"  # a module of this package whose name ends so declares terms


def declaring_modules(folder: Path) -> list[str]:
    """The names of the modules in `folder` that declare terms (as objectives/*_settings.py do), sorted."""
    return sorted(p.stem for p in folder.glob(f"*{SUFFIX}.py"))


for _name in declaring_modules(Path(__file__).parent):
    importlib.import_module(f"{__package__}.{_name}")

# terms that read the next-token logits (causal LMs only): a teacher's stored top-k logits serve them
NEXT_TOKEN_TERMS = tuple(name for name, term in TERMS.items() if term.next_token)
# next-token terms that a teacher and student with different vocabularies can use (uld); the others compare the
# two distributions token by token, and the stored top-k serves none of these
ANY_VOCAB_TERMS = tuple(name for name, term in TERMS.items() if term.any_vocab)


def available_terms() -> list[str]:
    return sorted(TERMS)
