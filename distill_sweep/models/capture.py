"""Run a BERT-family classifier once and collect what the distillation objectives need.

Hidden states come from ``output_hidden_states=True`` (embeddings first).  Attention scores are NOT taken
from ``output_attentions``: under the default ``sdpa`` implementation of transformers 5 that returns an
empty tuple, and asking for it would force the slow eager path anyway.  Instead forward hooks on the
``query``/``key``/``value`` Linear layers of the mapped encoder layers keep their outputs (B, S, H*d); the
objectives recompute ``q k^T * scaling`` from them, which reproduces eager attention scores exactly for
absolute position embeddings (the BERT/RoBERTa/ELECTRA default), while the forward itself keeps the fused
kernel.  For the student the captured tensors stay in the autograd graph, so gradients of an attention
loss reach the student's query/key/value weights.

Capture is per layer APPLICATION, not per module object: a forward pre-hook on every distinct encoder
layer module counts the applications in call order, and the q/k/v hooks file their output under the
position of the application that is running.  A parameter-shared model (one layer module at several
positions of ``encoder.layer``) thus gets each position's own projections instead of the last
application's written into every slot.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from distill_sweep.models.families import family_of_model

try:  # transformers 5 collects hidden states with hooks, installed on the layers a model has at its first forward
    from transformers.utils.output_capturing import maybe_install_capturing_hooks
except ImportError:  # earlier versions collect them in the layer loop itself
    maybe_install_capturing_hooks = None

__all__ = ["Features", "MODEL_INPUT_KEYS", "attention_scores", "run_with_features", "self_attention_module",
           "truncated"]

# Batch keys forwarded to the model; everything else (labels, idx) is ours.
MODEL_INPUT_KEYS: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids")


@dataclass
class Features:
    """Outputs of one forward pass: logits, all hidden states (embeddings first) when asked for, and the
    (query, key, value) outputs (B, S, H*d) keyed by 1-based encoder layer position, with the head
    geometry the objectives need to turn them into per-head scores."""

    logits: Tensor | None  # None from a truncated run
    hidden_states: tuple[Tensor, ...] | None
    qkv: dict[int, tuple[Tensor, Tensor, Tensor]] = field(default_factory=dict)
    num_heads: int = 0
    head_dim: int = 0
    scaling: float = 1.0
    # a decoder's logits left unmade (lm_head.HeadLogits: last hidden states and LM head; logits then None), for the
    # chunked losses (objectives/chunked.py). Any: lm_head.py imports this module
    head: Any = None


def _encoder_layers(model: nn.Module) -> nn.ModuleList:
    return family_of_model(model).layers(model)


def self_attention_module(model: nn.Module, layer: int) -> nn.Module:
    """The self-attention block of 1-based layer ``layer`` (BERT/RoBERTa/ELECTRA layout: its family's)."""
    family = family_of_model(model)
    attn = family.attention_module(model, layer)
    for name in family.qkv:
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
    depth: int | None = None,
) -> Features:
    """Forward ``model`` on ``batch``; return logits, optionally all hidden states and q/k/v of ``qkv_layers``.

    Hooks are registered only on the modules of the requested layers (plus an application counter on each
    distinct encoder layer) and removed even if the forward raises.  Grad mode is the caller's business
    (the training loop runs the teacher under ``no_grad``).  ``depth``: run only the first ``depth`` encoder
    layers (`truncated`); the hidden states then end at layer ``depth`` and there are no logits (None).
    """
    if depth is not None and depth < len(_encoder_layers(model)):
        with truncated(model, depth):
            features = run_with_features(model, batch, hidden=hidden, qkv_layers=qkv_layers)
        features.logits = None  # the head ran on layer `depth`: not the model's prediction
        return features
    inputs = {k: batch[k] for k in MODEL_INPUT_KEYS if k in batch and batch[k] is not None}
    wanted = sorted(set(int(x) for x in qkv_layers))
    captured: dict[int, dict[str, Tensor]] = {layer: {} for layer in wanted}
    n_layers = 0
    applied = [0]  # encoder-layer applications so far = 1-based position of the one running
    handles = []
    try:
        if wanted:
            attns = [self_attention_module(model, layer) for layer in wanted]
            layers = _encoder_layers(model)
            n_layers = len(layers)

            def count(_mod: nn.Module, _args: object) -> None:
                applied[0] += 1

            for mod in {id(m): m for m in layers}.values():
                handles.append(mod.register_forward_pre_hook(count))
            # One hook per distinct (module, role): a shared layer's Linear fires once per application.
            names = family_of_model(model).qkv
            roles = [(getattr(a, n), r) for a in attns for n, r in zip(names, ("query", "key", "value"), strict=True)]
            for (_, name), lin in {(id(m), n): m for m, n in roles}.items():

                def hook(_mod: nn.Module, _inp: object, out: Tensor, name: str = name) -> None:
                    slot = captured.get(applied[0])
                    if slot is not None:
                        slot[name] = out

                handles.append(lin.register_forward_hook(hook))
        out = model(**inputs, output_hidden_states=hidden, return_dict=True)
    finally:
        for h in handles:
            h.remove()
    if wanted and applied[0] != n_layers:
        raise RuntimeError(
            f"the encoder applied its layers {applied[0]} times for {n_layers} positions: captured q/k/v "
            "cannot be matched to layer positions"
        )
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


@contextmanager
def truncated(model: nn.Module, depth: int) -> Iterator[None]:
    """The model with only its first ``depth`` layers while the block runs. Exact for those layers:
    each layer reads only the one below it, so their outputs are the full model's, computed for less."""
    family = family_of_model(model)
    layers = family.layers(model)
    base = getattr(model, "base_model", model)
    if maybe_install_capturing_hooks is not None and hasattr(type(base), "_can_record_outputs"):
        # every layer hooked now: a model whose first forward ran truncated would later report only those
        # layers' hidden states from a full forward
        maybe_install_capturing_hooks(base)
    family.set_layers(model, nn.ModuleList(list(layers)[:depth]))
    try:
        yield
    finally:
        family.set_layers(model, layers)


def attention_scores(q: Tensor, k: Tensor, num_heads: int, scaling: float) -> Tensor:
    """Pre-softmax scores (B, H, S, S) = q k^T * scaling from captured (B, S, H*d) projections."""
    b, s, _ = q.shape
    qh = q.view(b, s, num_heads, -1).transpose(1, 2)
    kh = k.view(b, k.shape[1], num_heads, -1).transpose(1, 2)
    return torch.matmul(qh, kh.transpose(-1, -2)) * scaling
