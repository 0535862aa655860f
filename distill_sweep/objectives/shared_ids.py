"""The objective's terms over the ids two vocabularies share (procedure=causal_lm, procedure.vocab=shared_prefix).

A teacher and a student of one family whose vocabularies have other sizes but the same tokens at ids 0..n-1
(checked before any work: models/vocabularies.py `shared_prefix`) read the same token sequences; their
next-token distributions are compared over those n ids only: each side's logits are cut to the first n before
the terms see them, so every softmax is over the shared ids (the rest of each side's mass is left out, as the
teacher's extra padding rows hold next to none). The features, and the student's cross-entropy on its whole
vocabulary (procedure.ce_weight), stay the objective's own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from torch import Tensor, nn

from distill_sweep.models.capture import Features


def first_ids(features: Features, n: int) -> Features:
    """`features` with its logits cut to the first n ids (no logits: unchanged)."""
    if features.head is not None:  # logits made chunk by chunk (procedure.logit_chunk): cut as they are made
        return dataclasses.replace(features, head=features.head.first_ids(n))
    if features.logits is None:
        return features
    return dataclasses.replace(features, logits=features.logits[..., :n])


class SharedIds:
    """`terms` (an objective from core.build_objective) whose terms compare the two sides over ids 0..n-1."""

    def __init__(self, terms: nn.Module, n: int) -> None:
        self.terms, self.n = terms, int(n)

    @property
    def needs_hidden(self) -> bool:
        return bool(self.terms.needs_hidden)

    def features(self, model: nn.Module, batch: Mapping[str, Tensor], side: str) -> Features:
        return self.terms.features(model, batch, side)

    def __call__(self, student: Features, teacher: Features, batch: Mapping[str, Tensor]
                 ) -> tuple[Tensor, dict[str, float]]:
        return self.terms(first_ids(student, self.n), first_ids(teacher, self.n), batch)
