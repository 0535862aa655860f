"""What a model offers the objectives, known before any weights are loaded (from its config alone)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelInfo:
    """A model's shape and the features it provides to distillation terms."""

    num_layers: int
    hidden_size: int
    num_heads: int
    hidden_states: bool = True  # all hidden states (embeddings first) can be captured
    qkv: bool = True  # per-layer query/key/value projections can be captured (BERT-family encoders)
    model_type: str = "bert"

    @classmethod
    def from_config(cls, config: Any, *, qkv: bool = True, hidden_states: bool = True) -> ModelInfo:
        """From a transformers config (BERT family: q/k/v hooks apply)."""
        return cls(num_layers=int(config.num_hidden_layers), hidden_size=int(config.hidden_size),
                   num_heads=int(config.num_attention_heads), qkv=qkv and hidden_states, hidden_states=hidden_states,
                   model_type=str(getattr(config, "model_type", "bert")))
