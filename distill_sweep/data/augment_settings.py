"""A task's augmentation settings (`task.augment`), read by the config checks before torch is imported.

augment.py generates the augmented training split these settings describe (its docstring: the methods).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from distill_sweep.config.parse import IDENTITY, SEED_RANGE, parse
from distill_sweep.errors import ConfigError

# TinyBERT's code: N per task (the paper: 20).
SAMPLES_BY_TASK = {"cola": 30, "mrpc": 30, "rte": 30, "stsb": 30, "sst2": 20, "qnli": 20, "mnli": 10, "qqp": 10}
DEFAULT_SAMPLES = 20


@dataclass
class AugmentSettings:
    # none, tinybert (TinyBERT's word replacement) or tang (Tang et al.'s mask, part-of-speech and n-gram
    # sampling)
    name: Literal["none", "tinybert", "tang"] = field(default="none", metadata=IDENTITY)
    # samples N per example (null: TinyBERT's per-task value, 20 for other tasks; tang: 20)
    samples: int | None = field(default=None, metadata=IDENTITY | {"ge": 1})
    p: float = field(default=0.4, metadata=IDENTITY | {"gt": 0.0, "le": 1.0})  # tinybert: replace probability per position
    candidates: int = field(default=15, metadata=IDENTITY | {"ge": 1})  # tinybert: K candidate words per position
    mlm: str | None = field(default=None, metadata=IDENTITY)  # hub id or directory of a masked LM (null: the teacher's backbone)
    embeddings: str | None = field(default=None, metadata=IDENTITY)  # word-embedding text file (GloVe) for multi-piece words
    # tinybert: the embedding file's first words read (TinyBERT's code: 100k)
    max_embedding_words: int = field(default=100_000, metadata=IDENTITY | {"ge": 1})
    seed: int = field(default=0, metadata=IDENTITY | SEED_RANGE)  # seed of the augmentation's draws
    batch_size: int = field(default=64, metadata=IDENTITY | {"ge": 1})  # MLM forward batch (not in the key)
    # tang (Tang et al. 2019): per word, mask with p_mask, else a random word of its part of speech with p_pos;
    # then with p_ngram keep one random n-gram of the sample, n in 1..max_ngram
    p_mask: float = field(default=0.1, metadata=IDENTITY | {"ge": 0.0, "le": 1.0})
    # tang: probability of a random word of the same part of speech
    p_pos: float = field(default=0.1, metadata=IDENTITY | {"ge": 0.0, "le": 1.0})
    # tang: probability of keeping one random n-gram of a sample
    p_ngram: float = field(default=0.25, metadata=IDENTITY | {"ge": 0.0, "le": 1.0})
    max_ngram: int = field(default=5, metadata=IDENTITY | {"ge": 1})  # tang: the longest n-gram kept

    def validate(self, where: str) -> None:
        if self.p_mask + self.p_pos > 1.0:
            raise ConfigError(f"{where}: p_mask + p_pos = {self.p_mask + self.p_pos} > 1 (they split one draw per "
                              "word)")


def parse_augment(node: Any, where: str = "task.augment") -> AugmentSettings:
    """`task.augment`: a name (`none`, `tinybert`) or a mapping with `name` and settings."""
    if isinstance(node, AugmentSettings):
        return node
    if node is None or isinstance(node, str):
        node = {"name": node or "none"}
    return parse(AugmentSettings, node, where)


def samples_for(settings: AugmentSettings, task: str) -> int:
    if settings.name == "tang":  # n_iter = 20 (the paper's)
        return settings.samples or DEFAULT_SAMPLES
    return settings.samples or SAMPLES_BY_TASK.get(task, DEFAULT_SAMPLES)
