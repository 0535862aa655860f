"""A student's own tokenizer (procedure=causal_lm, `student.tokenizer`) and the vocabularies of a teacher/student
pair: which one each side reads, its size and where it comes from, so that objectives over one vocabulary can
refuse a pair that has two (before any work: the offline toy vocabularies are word lists, nothing is built)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from distill_sweep.errors import ConfigError
from distill_sweep.models.loading import model_error_message, model_source
from distill_sweep.toy import build_toy_pieces_tokenizer, build_toy_tokenizer, pieces_vocabulary, vocabulary

# the offline tokenizers, by name: (their word list, what builds them under cache_dir)
TOY_TOKENIZERS: dict[str, tuple[Callable[[], list[str]], Callable[[Path], Any]]] = {
    "toy": (vocabulary, build_toy_tokenizer),
    "toy_pieces": (pieces_vocabulary, build_toy_pieces_tokenizer),
}


@dataclass(frozen=True)
class Vocabulary:
    source: str  # "toy", "toy_pieces", a hub id or a directory
    tokens: dict[str, int]  # token -> id

    def describe(self) -> str:
        return f"{self.source} ({len(self.tokens)} tokens)"


def vocabulary_of(source: str, key: str, trust_remote_code: bool = False) -> Vocabulary:
    """The vocabulary of a tokenizer source, read without writing anything."""
    if source in TOY_TOKENIZERS:
        words = TOY_TOKENIZERS[source][0]()
        return Vocabulary(source, {w: i for i, w in enumerate(words)})
    tokenizer = load_named(source, None, key, trust_remote_code)
    return Vocabulary(source, dict(tokenizer.get_vocab()))


def load_named(source: str, cache_dir: Path | None, key: str, trust_remote_code: bool = False) -> Any:
    """A tokenizer by source: an offline toy one (built once under cache_dir), a hub id or a directory."""
    if source in TOY_TOKENIZERS:
        assert cache_dir is not None
        return TOY_TOKENIZERS[source][1](cache_dir)
    path = model_source(source, key)
    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except OSError as err:
        raise ConfigError(model_error_message(source, err, key)) from None
