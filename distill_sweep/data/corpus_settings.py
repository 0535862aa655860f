"""A corpus' settings (`corpus=`) and the checks of its local files, read before any model or torch is loaded.

corpus.py reads the documents, packs, masks and caches them; its module docstring describes the sources.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from distill_sweep.config.parse import SEED_RANGE, TEACHER, UNHASHED_AT_DEFAULT
from distill_sweep.errors import ConfigError

BINARY_PROBE = 8192  # bytes read from the start of a text file to tell it is not binary


@dataclass
class SourceSettings:
    """Where documents come from: a local folder of text files, local parquet files, or a hub dataset."""

    source: Literal["text_files", "parquet", "hub"] = field(metadata=TEACHER)  # text_files, parquet or hub
    path: str | None = field(default=None, metadata=TEACHER)  # text_files: the folder; parquet: a file or a folder of .parquet files
    hub_id: str | None = field(default=None, metadata=TEACHER)  # hub dataset id (source=hub)
    hub_config: str | None = field(default=None, metadata=TEACHER)  # the hub dataset's config
    split: str = field(default="train", metadata=TEACHER)  # the split read
    text_field: str = field(default="text", metadata=TEACHER)  # the column that holds the text (parquet, hub)
    # hub: a commit, tag or branch (part of the cache key)
    revision: str | None = field(default=None, metadata=TEACHER | UNHASHED_AT_DEFAULT)
    # consecutive rows joined into one document: 1 for a document per row (Wikipedia); a sentence-per-row corpus
    # (BookCorpus) needs more, or every sequence would be one short sentence
    rows_per_document: int = field(default=1, metadata=TEACHER | {"ge": 1, **UNHASHED_AT_DEFAULT})

    def validate(self, where: str) -> None:
        if self.source in ("text_files", "parquet") and not self.path:
            what = "a folder of plain-text files" if self.source == "text_files" else "a .parquet file or a folder"
            raise ConfigError(f"{where}.path is required for source={self.source} ({what})")
        if self.source == "hub" and not self.hub_id:
            raise ConfigError(f"{where}.hub_id is required for a hub corpus")


@dataclass(kw_only=True)
class CorpusSettings(SourceSettings):
    """A corpus: its own source (the fields of SourceSettings), more sources after it, packing and masking."""

    name: str = field(metadata=TEACHER)  # the corpus' name (the record's task is pretrain_NAME)
    # where its own documents come from: toy (generated), text_files, parquet or hub
    source: Literal["toy", "text_files", "parquet", "hub"] = field(metadata=TEACHER)  # type: ignore[assignment]  (the toy one too)
    # more sources, read after this one (in order)
    also: list[SourceSettings] = field(default_factory=list, metadata=TEACHER | UNHASHED_AT_DEFAULT)
    num_documents: int | None = field(default=None, metadata=TEACHER | {"ge": 2})  # toy only: documents generated
    seed: int = field(default=0, metadata=TEACHER | SEED_RANGE)  # toy only: the generator's seed
    # read at most this many documents (null: all)
    max_documents: int | None = field(default=None, metadata=TEACHER | {"ge": 2})
    # the first documents, held out as the dev slice
    dev_documents: int = field(default=30, metadata=TEACHER | {"ge": 1})
    # tokens per packed segment, [CLS] and [SEP] included
    max_seq_length: int = field(default=128, metadata=TEACHER | {"ge": 3})
    # static: masked once, when the cache is built (the paper's reference); dynamic: anew per batch
    # (DistilBERT)
    masking: Literal["static", "dynamic"] = field(default="static", metadata=TEACHER)
    # share of the word pieces masked
    mlm_probability: float = field(default=0.15, metadata=TEACHER | {"gt": 0.0, "lt": 1.0})
    max_predictions: int = field(default=20, metadata=TEACHER | {"ge": 1})  # masked positions per segment, at most
    # share of the masked positions replaced by the mask token
    mask_ratio: float = field(default=0.8, metadata=TEACHER | {"ge": 0.0, "le": 1.0})
    # share replaced by a random token (the rest keep theirs)
    random_ratio: float = field(default=0.1, metadata=TEACHER | {"ge": 0.0, "le": 1.0})
    mask_seed: int = field(default=0, metadata=TEACHER | SEED_RANGE)  # seed of the masking

    def validate(self, where: str) -> None:
        super().validate(where)
        if self.mask_ratio + self.random_ratio > 1.0:
            raise ConfigError(f"{where}: mask_ratio + random_ratio = {self.mask_ratio + self.random_ratio} > 1")
        if self.source == "toy" and self.num_documents is None:
            raise ConfigError(f"{where}.num_documents is required for a toy corpus")
        if self.source == "toy" and self.also:
            raise ConfigError(f"{where}.also: the toy corpus takes no other sources")
        if self.max_documents is not None and self.max_documents <= self.dev_documents:
            raise ConfigError(f"{where}.max_documents={self.max_documents} leaves no training documents after "
                              f"{where}.dev_documents={self.dev_documents}")


def text_files(folder: str | os.PathLike) -> list[Path]:
    """The corpus folder's files (recursive, hidden ones skipped), checked to hold some text: ConfigError
    for a missing or empty folder, a binary file, or files with nothing but whitespace."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise ConfigError(f"corpus.path={str(folder)!r} is not a directory")
    files = sorted(p for p in root.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    if not files:
        raise ConfigError(f"corpus.path={str(folder)!r} has no files (expected plain-text files)")
    has_text = False
    for path in files:
        with open(path, "rb") as f:
            head = f.read(BINARY_PROBE)
            if b"\x00" in head:
                raise ConfigError(f"corpus.path: {path} is not a plain-text file (it has NUL bytes)")
            while not has_text and head:
                has_text = bool(head.strip())
                head = f.read(1 << 20)
    if not has_text:
        raise ConfigError(f"corpus.path={str(folder)!r}: its {len(files)} file(s) hold no text")
    return files


def parquet_files(path: str | os.PathLike, text_field: str) -> list[Path]:
    """A .parquet file, or a folder's .parquet files (recursive), each checked to have the `text_field` column:
    ConfigError otherwise (read from the files' schemas only)."""
    import pyarrow.parquet as pq

    root = Path(path).expanduser()
    files = [root] if root.is_file() else sorted(root.rglob("*.parquet")) if root.is_dir() else []
    if not files:
        raise ConfigError(f"corpus path={str(path)!r} is not a .parquet file or a folder holding some")
    for file in files:
        try:
            names = pq.read_schema(file).names
        except Exception as err:  # pyarrow raises several types for a file that is not parquet
            raise ConfigError(f"corpus path {file} is not a readable parquet file ({type(err).__name__})") from None
        if text_field not in names:
            raise ConfigError(f"corpus path {file} has no column {text_field!r} (text_field; it has "
                              f"{', '.join(names)})")
    return files


def sources(settings: CorpusSettings) -> list[Any]:
    """The corpus' sources in reading order: its own, then `also`."""
    return [settings, *settings.also]
