"""A student's own word-level tokenizer: the vocabulary of the training split (Tang et al. 2019's BiLSTM reads
words, not the teacher's word pieces), built once per (training text, settings) and shared by every job.

`WordVocab` maps lowercased words (split by `WORD_PATTERN`) to ids, `[PAD]` = 0 and `[UNK]` = 1 first, then
the words of the training split by frequency (ties in alphabetical order, so the ids are a function of the
text alone). `load_or_build` keeps it under `cache_dir/vocab/`, keyed by the text's content and the
settings, so the jobs of a sweep (and their resumed runs) read the same ids. `read_vectors` fills an
embedding matrix from a word2vec/GloVe text file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from distill_sweep.data.fingerprints import content_hash
from distill_sweep.records.disk import atomic_file
from distill_sweep.records.locks import waiting_lock

log = logging.getLogger(__name__)

PAD, UNK = "[PAD]", "[UNK]"
PAD_ID, UNK_ID = 0, 1
# Words are runs of letters/digits/apostrophes; every other non-space character is a token of its own
# (punctuation carries sentiment and structure: "not good ." / "good !"). A bracketed special token such as
# the mask of augmented rows ("[MASK]", "<mask>") stays one token, so a masked word is one id, as it was one word.
WORD_PATTERN = re.compile(r"\[\w+\]|<\w+>|[\w']+|[^\w\s]")
# Bump when the split or the ordering changes, so an old vocabulary file is never reused.
VOCAB_VERSION = "1"


def split_words(text: str, lowercase: bool = True) -> list[str]:
    """The words of `text` as the vocabulary sees them."""
    return WORD_PATTERN.findall(text.lower() if lowercase else text)


class WordVocab:
    """Words -> ids ([PAD] 0, [UNK] 1). `fields`: the task's text fields it encodes (one id column each)."""

    def __init__(self, words: Sequence[str], *, fields: Sequence[str], lowercase: bool = True,
                 key: str = "") -> None:
        if list(words[:2]) != [PAD, UNK]:
            raise ValueError(f"a word vocabulary starts with {PAD}, {UNK}; got {list(words[:2])}")
        self.words = list(words)
        self.ids = {w: i for i, w in enumerate(self.words)}
        self.fields = list(fields)
        self.lowercase = lowercase
        self.key = key

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, text: str, max_length: int | None = None) -> list[int]:
        """Word ids of `text` (unknown words -> UNK_ID), at most `max_length`; an empty text is [UNK] so that
        every row has a length of at least 1 (an LSTM cannot pack an empty sequence)."""
        ids = [self.ids.get(w, UNK_ID) for w in split_words(text, self.lowercase)] or [UNK_ID]
        return ids[:max_length] if max_length else ids

    @property
    def digest(self) -> str:
        """What the ids are a function of (tokenised data caches are keyed by it)."""
        h = hashlib.sha256(json.dumps([VOCAB_VERSION, self.lowercase, self.words]).encode())
        return h.hexdigest()[:16]

    @classmethod
    def build(cls, texts: Iterable[str], *, fields: Sequence[str], min_count: int = 1, max_size: int | None = None,
              lowercase: bool = True, key: str = "") -> WordVocab:
        """The vocabulary of `texts`: words seen at least `min_count` times, the `max_size` most frequent
        (specials included) when given."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(split_words(text, lowercase))
        ranked = sorted((w for w, c in counts.items() if c >= min_count and w not in (PAD, UNK)),
                        key=lambda w: (-counts[w], w))
        if max_size is not None:
            ranked = ranked[:max(0, max_size - 2)]
        return cls([PAD, UNK, *ranked], fields=fields, lowercase=lowercase, key=key)

    def to_json(self) -> dict[str, Any]:
        return {"version": VOCAB_VERSION, "key": self.key, "fields": self.fields, "lowercase": self.lowercase,
                "words": self.words}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WordVocab:
        return cls(data["words"], fields=data["fields"], lowercase=bool(data["lowercase"]), key=str(data["key"]))


def vocab_key(train: Any, fields: Sequence[str], *, min_count: int, max_size: int | None, lowercase: bool) -> str:
    """Content key of the vocabulary of `train`'s text fields under these settings."""
    settings = json.dumps([VOCAB_VERSION, list(fields), min_count, max_size, lowercase])
    return hashlib.sha256((content_hash(train, list(fields)) + settings).encode()).hexdigest()[:20]


def load_or_build(train: Any, fields: Sequence[str], cache_dir: str | os.PathLike, task: str, *, min_count: int = 1,
                  max_size: int | None = None, lowercase: bool = True) -> tuple[WordVocab, Path]:
    """The vocabulary of the raw training split `train` (a datasets.Dataset with the text fields), from
    `cache_dir/vocab/` when a job built it before, else built and written there (atomically, under a lock)."""
    key = vocab_key(train, fields, min_count=min_count, max_size=max_size, lowercase=lowercase)
    root = Path(cache_dir) / "vocab"
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{task}-{key}.json"
    with waiting_lock(Path(f"{path}.lock"), "another job is building this word vocabulary"):
        if path.is_file():
            try:
                vocab = WordVocab.from_json(json.loads(path.read_text()))
                if vocab.key == key:
                    return vocab, path
            except (OSError, ValueError, KeyError):
                pass  # unreadable or foreign: rebuilt below
            log.warning("word vocabulary %s unreadable or of another key: rebuilding it", path)
        texts = (str(t) for f in fields for t in train[f])
        vocab = WordVocab.build(texts, fields=fields, min_count=min_count, max_size=max_size, lowercase=lowercase,
                                key=key)
        with atomic_file(path, "no vocabulary was stored: the next run builds it again") as f:
            json.dump(vocab.to_json(), f)
        log.info("word vocabulary of %s: %d words -> %s", task, len(vocab), path)
    return vocab, path


def read_vectors(path: str | os.PathLike, vocab: WordVocab, dim: int) -> tuple[torch.Tensor, int]:
    """Rows of a word2vec/GloVe text file (`word v1 ... v_dim` per line; a word2vec `count dim` header line is
    skipped) for the vocabulary's words: (matrix of those rows, zero elsewhere, words found). Words are
    matched as the vocabulary spells them (lowercased when it lowercases)."""
    matrix = torch.zeros(len(vocab), dim)
    found = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f):
            parts = line.rstrip().split(" ")
            if n == 0 and len(parts) == 2:
                continue  # word2vec's header
            word = parts[0].lower() if vocab.lowercase else parts[0]
            i = vocab.ids.get(word)
            if i is None or i < 2 or len(parts) != dim + 1:
                continue
            if matrix[i].any():
                continue  # the first spelling wins ("The" and "the" in a cased file)
            matrix[i] = torch.tensor([float(x) for x in parts[1:]])
            found += 1
    return matrix, found
