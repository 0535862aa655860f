"""uld and nll: the next-token terms that need no shared vocabulary (ULD's Wasserstein-1 and its CE term). Their
code: uld.py.

Torch-free: the terms' declarations (their settings: the weight every term has).
"""

from __future__ import annotations

from .term_base import TermInfo, declare

declare(
    TermInfo("uld", "distill_sweep.objectives.uld:ULD",
             "ULD: Wasserstein-1 of the sorted, zero-padded next-token distributions, across vocabularies (causal "
             "LMs).", next_token=True, any_vocab=True),
    TermInfo("nll", "distill_sweep.objectives.uld:StudentNLL",
             "The student's next-token cross-entropy on its own targets (causal LMs; ULD's CE term).",
             next_token=True, any_vocab=True),
)
