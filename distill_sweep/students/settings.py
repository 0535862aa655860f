"""Every student type's settings: what `student.*` may hold, checked with the job before torch is imported.

A settings dataclass is the type's config surface (each field's comment is its description in the config
reference); the code that builds the student (students/<type>.py) reads it. `validate` is the cross-field rule
`distill_sweep.config.parse.parse` calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distill_sweep.config.parse import LEARNING_RATE, UNHASHED_AT_DEFAULT
from distill_sweep.errors import ConfigError
from distill_sweep.records import hashing

MIN_HASH_CHARS = hashing.HASH_CHARS  # student.source: as many as a result directory's name holds


@dataclass
class TruncatedSettings:
    name: str = "truncated"  # the student type
    # layers, copied from the teacher layers that init names
    num_layers: int = field(default=3, metadata={"ge": 1})
    # recompute each layer's activations in the backward instead of keeping them (transformers'
    # gradient_checkpointing_enable, non-reentrant): the same gradients, about a third more compute, activation
    # memory of one layer instead of all
    gradient_checkpointing: bool = field(default=False, metadata=UNHASHED_AT_DEFAULT)

    def stated_depth(self) -> int:
        """The student's layers, as describe() makes them (job.identify checks the init with it, before torch)."""
        return self.num_layers


@dataclass
class FreshSettings:
    name: str = "fresh"  # the student type
    num_layers: int = field(default=4, metadata={"ge": 1})  # encoder layers
    hidden_size: int = field(default=312, metadata={"ge": 1})  # width
    num_attention_heads: int = field(default=12, metadata={"ge": 1})  # attention heads
    intermediate_size: int = field(default=1200, metadata={"ge": 1})  # feed-forward width
    copy_embeddings: bool = True  # copy the teacher's embeddings when the widths match
    # procedure=causal_lm: the student's own tokenizer (toy, toy_pieces, toy_wide, a hub id or a directory), its
    # vocabulary the student's; null: the teacher's. Another vocabulary needs objective=uld, or
    # procedure.vocab=shared_prefix where it shares its first ids with the teacher's (docs/methods/decoder.md)
    tokenizer: str | None = field(default=None, metadata=UNHASHED_AT_DEFAULT)
    # recompute each layer's activations in the backward instead of keeping them (transformers'
    # gradient_checkpointing_enable, non-reentrant): the same gradients, about a third more compute, activation
    # memory of one layer instead of all
    gradient_checkpointing: bool = field(default=False, metadata=UNHASHED_AT_DEFAULT)

    def stated_depth(self) -> int:
        """The student's layers, as describe() makes them (job.identify checks the layer map with it)."""
        return self.num_layers

    def validate(self, where: str) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"{where}.hidden_size={self.hidden_size} is not a multiple of "
                              f"{where}.num_attention_heads={self.num_attention_heads}")


@dataclass
class SPSSettings:
    name: str = "sps"  # the student type
    num_layers: int = field(default=3, metadata={"ge": 1})  # parameter layers k
    shared_layers: int | None = None  # s: the top s layers run again after all k (null: all k, 2k positions)
    swap_qk: bool = False  # SPS-2: the upper copies swap their Query and Key parameters

    @property
    def shared(self) -> int:
        return self.num_layers if self.shared_layers is None else self.shared_layers

    def validate(self, where: str) -> None:
        if not 1 <= self.shared <= self.num_layers:  # the odd split: nothing to share, or more than there is
            raise ConfigError(f"{where}.shared_layers={self.shared_layers}: must be 1..{where}.num_layers="
                              f"{self.num_layers} (the top s of the student's layers run a second time)")


@dataclass
class PretrainedSettings:
    name: str = "pretrained"  # the student type
    name_or_path: str | None = None  # hub id or local directory (required)
    trust_remote_code: bool = False  # let transformers run code from the model's repository
    attn_implementation: str = "sdpa"  # transformers' attention implementation

    def validate(self, where: str) -> None:
        if not self.name_or_path:
            raise ConfigError(f"{where}.name_or_path is required for student=pretrained (a hub id or a directory)")


@dataclass
class DistilledSettings:
    name: str = "distilled"  # the student type
    source: str | None = None  # config hash of a completed task_agnostic job (its first >= 10 characters do)
    attn_implementation: str = "sdpa"  # transformers' attention implementation
    # filled in from `source` when the job is prepared (not settings: the config hash covers `source`)
    student_dir: str | None = None
    # filled in: the distillation's objective, init, teacher, corpus and result directory
    distilled_from: dict[str, Any] | None = None

    def validate(self, where: str) -> None:
        if not self.source or not re.fullmatch(f"[0-9a-f]{{{MIN_HASH_CHARS},64}}", str(self.source)):
            raise ConfigError(f"{where}.source={self.source!r}: expected the config hash of a completed "
                              f"task_agnostic job ({MIN_HASH_CHARS} to 64 hex characters, as its result.json says)")
        if self.student_dir is not None or self.distilled_from is not None:
            raise ConfigError(f"{where}.student_dir and {where}.distilled_from are filled in from {where}.source: "
                              "leave them unset")


@dataclass
class BiLSTMSettings:
    name: str = "bilstm"  # the student type
    embedding_dim: int = field(default=300, metadata={"ge": 1})  # Tang: 300-d word2vec
    hidden_size: int = field(default=300, metadata={"ge": 1})  # per direction (Tang: 150 or 300, by dev score)
    mlp_hidden: int = field(default=400, metadata={"ge": 1})  # the ReLU layer (Tang: 200 or 400, by dev score)
    dropout: float = field(default=0.1, metadata={"ge": 0.0, "lt": 1.0})  # on the embeddings and the ReLU layer
    min_count: int = field(default=1, metadata={"ge": 1})  # a training-set word needs this many occurrences
    max_vocab: int | None = field(default=None, metadata={"ge": 3})  # most frequent words kept ([PAD], [UNK] incl.)
    lowercase: bool = True  # lower-case the text before it is split into words
    embeddings: str | None = None  # a local word2vec/GloVe text file of embedding_dim vectors (None: random)
    # its learning rate when `optimizer.lr` is not set: a BiLSTM from random weights needs far more than the
    # 1e-5..2e-5 of the GLUE recipes, which are for fine-tuning a pre-trained BERT
    lr: float | None = field(default=1.0e-3, metadata=LEARNING_RATE)

    def validate(self, where: str) -> None:
        if self.embeddings is not None and not Path(self.embeddings).expanduser().is_file():
            raise ConfigError(f"{where}.embeddings={self.embeddings!r} is not a file (a word2vec/GloVe text file)")
