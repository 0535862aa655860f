"""What a model offers the objectives, known before any weights are loaded (from its config alone)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from distill_sweep.errors import ConfigError
from distill_sweep.models.families import family_of


@dataclass(frozen=True)
class ModelInfo:
    """A model's shape and the features it provides to distillation terms."""

    num_layers: int
    hidden_size: int
    num_heads: int
    hidden_states: bool = True  # all hidden states (embeddings first) can be captured
    qkv: bool = True  # per-layer query/key/value projections can be captured (BERT-family encoders)
    model_type: str = "bert"
    qkv_refusal: str = ""  # why q/k/v are not captured for its family (families.py), when they are not

    @classmethod
    def from_config(cls, config: Any, *, qkv: bool = True, hidden_states: bool = True) -> ModelInfo:
        """From a transformers config (BERT family: q/k/v hooks apply; a decoder family's are not captured)."""
        family = family_of(config)
        hooked = family is None or family.attention is not None
        qkv = qkv and hooked
        return cls(num_layers=int(config.num_hidden_layers), hidden_size=int(config.hidden_size),
                   num_heads=int(config.num_attention_heads), qkv=qkv and hidden_states, hidden_states=hidden_states,
                   model_type=str(getattr(config, "model_type", "bert")),
                   qkv_refusal="" if hooked else family.qkv_refusal)


def require_equal_widths(term: str, states: str, student: ModelInfo, teacher: ModelInfo) -> None:
    """A term that compares `states` of the two models without a projection needs one width (ConfigError)."""
    if student.hidden_size != teacher.hidden_size:
        raise ConfigError(f"objective term {term!r} compares {states} without a projection: the student is "
                          f"{student.hidden_size} wide and the teacher {teacher.hidden_size}; use a student of "
                          "the teacher's width")


def check_positions(max_seq_length: int, archs: dict[str, Any], key: str = "task") -> None:
    """Refuse a sequence length longer than a model's usable positions (`archs`: name -> its config, read by
    attribute; a config that does not state its positions is not checked)."""
    for name, arch in archs.items():
        positions = getattr(arch, "max_position_embeddings", None)
        # RoBERTa's position ids start after the padding index: 2 positions are not usable
        usable = positions - 2 if positions and getattr(arch, "model_type", "") == "roberta" else positions
        if usable and max_seq_length > usable:
            raise ConfigError(f"{key}.max_seq_length={max_seq_length} is longer than the {name}'s "
                              f"{usable} positions (max_position_embeddings)")


def check_heads(archs: dict[str, Any], key: str) -> None:
    """Refuse attention heads that do not divide: the width by the heads, and (grouped-query attention) the
    heads by the key/value heads; transformers would fail only in the first forward, in a tensor-shape
    traceback. `archs`: name -> its config, read by attribute; what a config does not state is not checked."""
    for name, arch in archs.items():
        width, heads = getattr(arch, "hidden_size", None), getattr(arch, "num_attention_heads", None)
        kv_heads = getattr(arch, "num_key_value_heads", None)
        # (a config stating head_dim, or BERT's embedding_size, sizes its heads otherwise: not checked here)
        if isinstance(width, int) and isinstance(heads, int) and heads > 0 and width % heads \
                and getattr(arch, "head_dim", None) is None and getattr(arch, "embedding_size", None) is None:
            raise ConfigError(f"{key}: the {name}'s hidden_size={width} is not a multiple of its "
                              f"num_attention_heads={heads}")
        if isinstance(heads, int) and isinstance(kv_heads, int) and kv_heads > 0 and heads % kv_heads:
            raise ConfigError(f"{key}: the {name}'s num_attention_heads={heads} is not a multiple of its "
                              f"num_key_value_heads={kv_heads} (grouped-query attention shares each key/value head "
                              "among a whole number of query heads)")
