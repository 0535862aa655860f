"""How much of a data set a tokenizer cannot read: the share of its tokens that are the unknown token.

Offline, most teachers use the toy tokenizer (a few dozen words): a user's own text then becomes mostly
[UNK], and a job still trains and scores something, silently. A job logs a warning above `WARN_SHARE`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

log = logging.getLogger("distill_sweep")
WARN_SHARE = 0.05  # a real tokenizer on text of its language stays far below this (word pieces, bytes)
SAMPLE_ROWS = 2000  # rows read for the share: enough for a stable figure, cheap on any split


def unknown_share(rows: Iterable[Sequence[int]], tokenizer: Any) -> float | None:
    """The share of the tokens in `rows` (id lists; the first SAMPLE_ROWS) that are the tokenizer's unknown
    token, special tokens left out; None for a tokenizer without one (byte-level BPE reads anything)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None:
        return None
    special = set(getattr(tokenizer, "all_special_ids", []) or []) - {unk}
    total = unknown = 0
    for i, row in enumerate(rows):
        if i >= SAMPLE_ROWS:
            break
        for token in row:
            if token in special:
                continue
            total += 1
            unknown += token == unk
    return unknown / total if total else None


def warn_if_unreadable(rows: Iterable[Sequence[int]], tokenizer: Any, what: str) -> float | None:
    """A warning naming the share when `tokenizer` cannot read much of `what` (see the module docstring); the
    share (unknown_share)."""
    share = unknown_share(rows, tokenizer)
    if share is None or share <= WARN_SHARE:
        return share
    tokenizer_name = f"{getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__} ({len(tokenizer)} ids)"
    log.warning("%.0f%% of the tokens of %s are the unknown token of the tokenizer %s: the models read mostly "
                "[UNK]. Give a teacher whose tokenizer reads this text (offline: teacher=minilm_l6 for English "
                "encoders; or a local model directory)", 100 * share, what, tokenizer_name)
    return share
