"""Run a BERT-family classifier once and collect what the distillation objectives need.

Hidden states come from ``output_hidden_states=True`` (embeddings first).  Attention scores are NOT taken
from ``output_attentions``: under the default ``sdpa`` implementation of transformers 5 that returns an
empty tuple, and asking for it would force the slow eager path anyway.  Instead forward hooks on the
``query``/``key``/``value`` Linear layers of the mapped encoder layers keep their outputs (B, S, H*d); the
objectives recompute ``q k^T * scaling`` from them, which reproduces eager attention scores exactly for
absolute position embeddings (the BERT/RoBERTa/ELECTRA default), while the forward itself keeps the fused
kernel.  For the student the captured tensors stay in the autograd graph, so gradients of an attention
loss reach the student's query/key/value weights.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

__all__ = ["Features", "MODEL_INPUT_KEYS", "attention_scores", "run_with_features", "self_attention_module"]

# Batch keys forwarded to the model; everything else (labels, idx) is ours.
MODEL_INPUT_KEYS: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")


@dataclass
class Features:
    """Outputs of one forward pass (see .design/CONTRACT.md)."""

    logits: Tensor
    hidden_states: tuple[Tensor, ...] | None
    qkv: dict[int, tuple[Tensor, Tensor, Tensor]] = field(default_factory=dict)
    num_heads: int = 0
    head_dim: int = 0
    scaling: float = 1.0


def self_attention_module(model: nn.Module, layer: int) -> nn.Module:
    """The self-attention block of 1-based encoder layer ``layer`` (BERT/RoBERTa/ELECTRA layout)."""
    try:
        layers = model.base_model.encoder.layer
    except AttributeError as exc:
        raise TypeError(
            f"{type(model).__name__} has no base_model.encoder.layer: only BERT-family encoders are supported"
        ) from exc
    if not 1 <= layer <= len(layers):
        raise ValueError(f"encoder layer {layer} requested, the model has layers 1..{len(layers)}")
    attn = layers[layer - 1].attention.self
    for name in ("query", "key", "value"):
        if not isinstance(getattr(attn, name, None), nn.Linear):
            raise TypeError(f"layer {layer} self-attention has no Linear '{name}' to hook")
    return attn


def _head_geometry(model: nn.Module) -> tuple[int, int, float]:
    """(num_heads, head_dim, scaling) as the attention modules use them."""
    cfg = model.config
    heads = int(cfg.num_attention_heads)
    head_dim = int(cfg.hidden_size) // heads
    scaling = head_dim**-0.5
    try:
        attn = self_attention_module(model, 1)
    except (TypeError, ValueError):
        return heads, head_dim, scaling
    # Prefer the module's own numbers: they are what its forward multiplies by.
    heads = int(getattr(attn, "num_attention_heads", heads))
    head_dim = int(getattr(attn, "attention_head_size", head_dim))
    scaling = float(getattr(attn, "scaling", head_dim**-0.5))
    return heads, head_dim, scaling


def run_with_features(
    model: nn.Module,
    batch: Mapping[str, Tensor],
    *,
    hidden: bool,
    qkv_layers: Sequence[int],
) -> Features:
    """Forward ``model`` on ``batch``; return logits, optionally all hidden states and q/k/v of ``qkv_layers``.

    Hooks are registered only on the requested layers and removed even if the forward raises.  Grad mode
    is the caller's business (the teacher runs under ``torch.inference_mode``/``no_grad``).
    """
    inputs = {k: batch[k] for k in MODEL_INPUT_KEYS if k in batch and batch[k] is not None}
    captured: dict[int, dict[str, Tensor]] = {}
    handles = []
    try:
        for layer in sorted(set(int(x) for x in qkv_layers)):
            attn = self_attention_module(model, layer)
            slot: dict[str, Tensor] = {}
            captured[layer] = slot
            for name in ("query", "key", "value"):

                def hook(_mod: nn.Module, _inp: object, out: Tensor, slot=slot, name=name) -> None:
                    slot[name] = out

                handles.append(getattr(attn, name).register_forward_hook(hook))
        out = model(**inputs, output_hidden_states=hidden, return_dict=True)
    finally:
        for h in handles:
            h.remove()
    missing = [layer for layer, slot in captured.items() if len(slot) != 3]
    if missing:
        raise RuntimeError(f"q/k/v hooks did not fire for layers {missing}")
    heads, head_dim, scaling = _head_geometry(model)
    return Features(
        logits=out.logits,
        hidden_states=tuple(out.hidden_states) if hidden else None,
        qkv={layer: (s["query"], s["key"], s["value"]) for layer, s in captured.items()},
        num_heads=heads,
        head_dim=head_dim,
        scaling=scaling,
    )


def attention_scores(q: Tensor, k: Tensor, num_heads: int, scaling: float) -> Tensor:
    """Pre-softmax scores (B, H, S, S) = q k^T * scaling from captured (B, S, H*d) projections."""
    b, s, _ = q.shape
    qh = q.view(b, s, num_heads, -1).transpose(1, 2)
    kh = k.view(b, k.shape[1], num_heads, -1).transpose(1, 2)
    return torch.matmul(qh, kh.transpose(-1, -2)) * scaling
