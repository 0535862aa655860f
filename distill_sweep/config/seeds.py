"""Seeds: one per source of variance, derived from a job's master seed unless set, and seeds derived from a job's
seed and a position in its run (no torch: the dry run counts what they choose).

`seed` is the master: with `seeds` at its default (every source null) each source uses `seed` itself, exactly as
before the block existed (same config hash, same numbers): the student's new weights and the dropout masks are one
torch stream seeded by `seed` (the weights drawn first, training continuing the stream), the batches' order and
the decoders' generation streams are seeded by `seed` too. Setting `seeds.init` or `seeds.dropout` separates the
torch stream in two: the new weights are drawn from a stream seeded by the init seed, then the generators are
seeded again by the dropout seed before the first step, so either can change while the other stays bit-identical.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from distill_sweep.config.parse import IDENTITY, SEED_RANGE

SOURCES = ("init", "data_order", "dropout", "sampling")


@dataclass
class SeedSettings:
    """`seeds`: a seed per source of variance (null: the job's `seed`)."""

    # the student's new weights (and the objective's new projections): null = seed
    init: int | None = field(default=None, metadata=IDENTITY | SEED_RANGE)
    # the order of the training batches (each stage's epochs shuffled from it): null = seed
    data_order: int | None = field(default=None, metadata=IDENTITY | SEED_RANGE)
    # the random numbers drawn while training (dropout masks): null = seed
    dropout: int | None = field(default=None, metadata=IDENTITY | SEED_RANGE)
    # the decoders' on-policy and generation streams (procedure=causal_lm): null = seed
    sampling: int | None = field(default=None, metadata=IDENTITY | SEED_RANGE)


@dataclass(frozen=True)
class JobSeeds:
    """The seed each source of variance of a job uses, and which of them were set on their own."""

    init: int
    data_order: int
    dropout: int
    sampling: int
    own: tuple[str, ...] = ()  # the sources set in `seeds` (the others use the master seed)

    @property
    def separate_streams(self) -> bool:
        """The new weights and the training draws come from two torch streams (init or dropout set), not from
        the one stream seeded by the master seed."""
        return "init" in self.own or "dropout" in self.own

    def to_dict(self) -> dict[str, Any]:
        """What a record states: the four seeds, and which were set on their own."""
        return {**{s: getattr(self, s) for s in SOURCES}, "own": list(self.own)}


def job_seeds(seed: int, settings: SeedSettings | None) -> JobSeeds:
    """The seeds of a job whose master seed is `seed`."""
    own = tuple(s for s in SOURCES if settings is not None and getattr(settings, s) is not None)
    values = {s: getattr(settings, s) if s in own else seed for s in SOURCES}
    return JobSeeds(**values, own=own)


def hashed_seeds(seed: int, block: Any) -> dict[str, int]:
    """The part of the `seeds` block a config hash covers: the sources set on their own, less a data order or
    sampling seed equal to the master seed (the same numbers as leaving it null). An empty result leaves the key out
    of the hash, so configs from before the block keep their hash."""
    if not isinstance(block, dict):
        return {}
    out = {s: block[s] for s in SOURCES if block.get(s) is not None}
    for source in ("data_order", "sampling"):  # used only through their value: equal to seed is the same job
        if out.get(source) == seed:
            del out[source]
    return out


def derived_seed(*parts: int | str) -> int:
    """A 63-bit seed from `parts` (sha256 of their text): the same parts give the same seed on any machine, and
    parts that differ anywhere give unrelated seeds."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def derived_uniform(*parts: int | str) -> float:
    """A number in [0, 1) from `parts`, as `derived_seed`."""
    return derived_seed(*parts) / 2**63
