"""Seeds derived from a job's seed and a position in its run (no torch: the dry run counts what they choose)."""

from __future__ import annotations

import hashlib


def derived_seed(*parts: int | str) -> int:
    """A 63-bit seed from `parts` (sha256 of their text): the same parts give the same seed on any machine, and
    parts that differ anywhere give unrelated seeds."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def derived_uniform(*parts: int | str) -> float:
    """A number in [0, 1) from `parts`, as `derived_seed`."""
    return derived_seed(*parts) / 2**63
