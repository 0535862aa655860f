"""The share of a data set's tokens a tokenizer cannot read, and the warning a job logs about it."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from distill_sweep.data.unknown_tokens import unknown_share, warn_if_unreadable
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer


def test_the_share_counts_unknown_tokens_among_the_non_special_ones() -> None:
    # ids: 1 = [UNK], 2 = [CLS], 3 = [SEP] (special, left out); rows hold 5 ordinary tokens, 2 of them [UNK]
    tokenizer = SimpleNamespace(unk_token_id=1, all_special_ids=[0, 1, 2, 3])
    assert unknown_share([[2, 1, 7, 3], [2, 8, 1, 9, 3]], tokenizer) == pytest.approx(2 / 5)
    assert unknown_share([[2, 3]], tokenizer) is None  # nothing but special tokens: no share
    assert unknown_share([[5, 6]], SimpleNamespace(unk_token_id=None)) is None  # byte-level: reads anything


def test_text_the_toy_tokenizer_cannot_read_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tokenizer = build_toy_tokenizer(tmp_path)
    english = tokenizer(["The quarterly report was approved by the board yesterday."],
                        add_special_tokens=False)["input_ids"]
    with caplog.at_level(logging.WARNING, logger="distill_sweep"):
        share = warn_if_unreadable(english, tokenizer, "my text")
    assert share is not None and share > 0.5
    assert "of the tokens of my text are the unknown token" in caplog.text and "teacher=minilm_l6" in caplog.text
    caplog.clear()
    own_words = tokenizer.convert_tokens_to_ids(list(tokenizer.get_vocab())[:20])
    readable = [[i for i in own_words if i not in tokenizer.all_special_ids]]
    with caplog.at_level(logging.WARNING, logger="distill_sweep"):
        assert warn_if_unreadable(readable, tokenizer, "toy text") == 0.0
    assert caplog.text == ""
