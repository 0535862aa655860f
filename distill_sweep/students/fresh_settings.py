"""student=fresh: a student of the teacher's family built from its own config, randomly initialised; the
embeddings are copied from the teacher when the widths match. Hidden terms bridge other widths with a learned
W_h; attention terms need the teacher's head count. Its code: students/fresh.py. Presets: conf/student/bert6.yaml,
tinybert4.yaml, tinybert_toy.yaml.

Torch-free: the type's settings (their defaults' one home) and its declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distill_sweep.config.parse import IDENTITY, UNHASHED_AT_DEFAULT
from distill_sweep.errors import ConfigError

from .base import StudentType, register_student


@dataclass
class FreshSettings:
    name: str = field(default="fresh", metadata=IDENTITY)  # the student type
    num_layers: int = field(default=4, metadata=IDENTITY | {"ge": 1})  # encoder layers
    hidden_size: int = field(default=312, metadata=IDENTITY | {"ge": 1})  # width
    num_attention_heads: int = field(default=12, metadata=IDENTITY | {"ge": 1})  # attention heads
    intermediate_size: int = field(default=1200, metadata=IDENTITY | {"ge": 1})  # feed-forward width
    copy_embeddings: bool = field(default=True, metadata=IDENTITY)  # copy the teacher's embeddings when the widths match
    # procedure=causal_lm: the student's own tokenizer (toy, toy_pieces, toy_wide, a hub id or a directory), its
    # vocabulary the student's; null: the teacher's. Another vocabulary needs objective=uld, or
    # procedure.vocab=shared_prefix where it shares its first ids with the teacher's (docs/methods/decoder.md)
    tokenizer: str | None = field(default=None, metadata=IDENTITY | UNHASHED_AT_DEFAULT)
    # recompute each layer's activations in the backward instead of keeping them (transformers'
    # gradient_checkpointing_enable, non-reentrant): the same gradients, about a third more compute, activation
    # memory of one layer instead of all
    gradient_checkpointing: bool = field(default=False, metadata=IDENTITY | UNHASHED_AT_DEFAULT)

    def stated_depth(self) -> int:
        """The student's layers, as describe() makes them (job.identify checks the layer map with it)."""
        return self.num_layers

    def validate(self, where: str) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"{where}.hidden_size={self.hidden_size} is not a multiple of "
                              f"{where}.num_attention_heads={self.num_attention_heads}")


register_student(StudentType("fresh", FreshSettings, "distill_sweep.students.fresh",
                             uses_init=False, needs_teacher_weights=True))
