"""A student's own tokenizer (procedure=causal_lm, `student.tokenizer`) and the vocabularies of a teacher/student
pair: which one each side reads, its size and where it comes from, so that objectives over one vocabulary can
refuse a pair that has two (before any work: the offline toy vocabularies are word lists, nothing is built), and
the ids two vocabularies share (`shared_prefix`, procedure.vocab=shared_prefix)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer, PreTrainedTokenizerFast

from distill_sweep.errors import ConfigError
from distill_sweep.models.loading import model_error_message, model_source
from distill_sweep.models.toy_vocabulary import (
    build_toy_pieces_tokenizer,
    build_toy_tokenizer,
    pieces_vocabulary,
    saved_tokenizer,
    vocabulary,
)

WIDE_SIZE = 128  # toy_wide: the toy vocabulary padded to this many ids


def wide_vocabulary() -> list[str]:
    """`toy_wide`: the toy words, then [unused0], [unused1], ... up to WIDE_SIZE ids, as checkpoints of one family
    pad their embedding matrices to other sizes (151,936 vs 152,064 rows): the same ids for the same tokens, and
    more ids after them that the toy text never produces."""
    words = vocabulary()
    return words + [f"[unused{i}]" for i in range(WIDE_SIZE - len(words))]


def build_toy_wide_tokenizer(cache_dir: Path) -> PreTrainedTokenizerFast:
    """The `toy_wide` tokenizer (the toy one's word-level rules over `wide_vocabulary()`), saved once under
    `cache_dir` as the toy ones are."""

    def backend() -> Any:
        from tokenizers import Tokenizer, models, pre_tokenizers  # the tokenizers backend, built only here

        tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(wide_vocabulary())}, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return tok

    return saved_tokenizer(cache_dir, "toy_wide_tokenizer", wide_vocabulary(), backend)


# the offline tokenizers, by name: (their word list, what builds them under cache_dir)
TOY_TOKENIZERS: dict[str, tuple[Callable[[], list[str]], Callable[[Path], Any]]] = {
    "toy": (vocabulary, build_toy_tokenizer),
    "toy_pieces": (pieces_vocabulary, build_toy_pieces_tokenizer),
    "toy_wide": (wide_vocabulary, build_toy_wide_tokenizer),
}


@dataclass(frozen=True)
class Vocabulary:
    source: str  # "toy", "toy_pieces", a hub id or a directory
    tokens: dict[str, int]  # token -> id

    def describe(self) -> str:
        return f"{self.source} ({len(self.tokens)} tokens)"


# the files one of which a saved tokenizer directory holds (fast: tokenizer.json; slow ones: their vocabulary)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "tokenizer.model",
                   "spiece.model", "sentencepiece.bpe.model")


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
    if Path(path).is_dir() and not any((Path(path) / name).is_file() for name in TOKENIZER_FILES):
        raise ConfigError(f"{key}={source}: the directory holds no tokenizer (none of {', '.join(TOKENIZER_FILES)}); "
                          "save one there with tokenizer.save_pretrained(...), or give a hub id")
    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except OSError as err:
        raise ConfigError(model_error_message(source, err, key)) from None


def shared_prefix(teacher: Vocabulary, student: Vocabulary) -> int:
    """n, the size of the smaller vocabulary, where ids 0..n-1 are the same tokens in both (so they decode
    identically); else ConfigError, one line naming the first id that differs."""
    n = min(len(teacher.tokens), len(student.tokens))
    by_id = [{i: token for token, i in v.tokens.items()} for v in (teacher, student)]
    for i in range(n):
        ours, theirs = by_id[0].get(i), by_id[1].get(i)
        if ours is None or ours != theirs:
            raise ConfigError(f"procedure.vocab=shared_prefix distils over the ids 0..{n - 1} that the teacher's "
                              f"tokenizer {teacher.describe()} and the student's {student.describe()} share, but id {i} "
                              f"is {ours!r} in the teacher's and {theirs!r} in the student's: the shared ids must "
                              "decode identically; use objective=uld (any two vocabularies)")
    return n
