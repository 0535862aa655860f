"""FastBERT's early exit (Liu et al. 2020): a classifier branch after every layer of a fine-tuned model,
trained by self-distillation from the model's own last classifier; at inference a sample leaves at the
first layer whose prediction is confident enough.

* Branch i (after encoder layer i < L): Linear(d -> w) + tanh, w-wide self-attention with 2 heads over the
  real tokens, the first token, Linear(w -> w) + tanh, Linear(w -> C). Layer L's classifier (the teacher of the
  others) is the model's own (`teacher_head="model"`) or, as in FastBERT, one more such branch (`"fastbert"`,
  `head`), fitted to the labels on the frozen backbone before the self-distillation.
* Self-distillation loss: sum_{i<L} KL(p_L || p_i), batch mean; backbone and last classifier frozen. Without
  dropout by default; `dropout=True` runs it as FastBERT's code trains: the frozen backbone in train mode and
  the branches' attention weights dropped at the backbone's attention_probs_dropout_prob.
* Exit rule: uncertainty u_i = H(p_i) / log C (normalised entropy); a sample exits at the first i with
  u_i <= speed. speed 0 keeps every sample to layer L (u > 0 for any finite logits), so its predictions are
  the full model's.
* Cost: multiply-accumulates counted from the shapes (per example, over its real tokens), reported as FLOPs
  (2 per multiply-accumulate). The evaluation here runs every layer and picks each sample's exit, which
  gives exactly the early-exit predictions; the FLOPs are what an early-exit implementation spends.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distill_sweep.objectives.inputs import fp32_region
from distill_sweep.training.loop import model_inputs


class Branch(nn.Module):
    """A FastBERT student classifier on one layer's hidden states."""

    def __init__(self, hidden: int, num_labels: int, width: int = 128, heads: int = 2, dropout: float = 0.0
                 ) -> None:
        super().__init__()
        self.proj = nn.Linear(hidden, width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.dense = nn.Linear(width, width)
        self.out = nn.Linear(width, num_labels)

    def forward(self, hidden: Tensor, valid: Tensor) -> Tensor:
        x = torch.tanh(self.proj(hidden))
        a, _ = self.attn(x, x, x, key_padding_mask=~valid, need_weights=False)
        return self.out(torch.tanh(self.dense(a[:, 0])))


class EarlyExitModel(nn.Module):
    """A fine-tuned classifier (frozen) with a branch after each of its layers but the last.

    `forward` gives the early-exit logits at `self.speed` (so the generic evaluation applies);
    `all_logits` gives every exit's logits, layer 1..L. `teacher_head`: the last exit is the model's own
    classifier ("model") or a FastBERT-style one (`head`, "fastbert"); `dropout`: the backbone follows the
    train/eval mode and the branches drop attention weights (else the backbone stays in eval mode).
    """

    def __init__(self, model: nn.Module, width: int = 128, heads: int = 2, speed: float = 0.5,
                 teacher_head: str = "model", dropout: bool = False) -> None:
        super().__init__()
        self.model = model.eval().requires_grad_(False)
        config = model.config
        self.num_layers, self.num_labels = int(config.num_hidden_layers), int(config.num_labels)
        p = float(getattr(config, "attention_probs_dropout_prob", 0.1)) if dropout else 0.0
        self.branches = nn.ModuleList(Branch(int(config.hidden_size), self.num_labels, width, heads, p)
                                      for _ in range(self.num_layers - 1))
        self.head = Branch(int(config.hidden_size), self.num_labels, width, heads, p) if (
            teacher_head == "fastbert") else None
        self.width, self.heads, self.speed, self.dropout = width, heads, speed, dropout

    def train(self, mode: bool = True) -> EarlyExitModel:
        super().train(mode)
        if not self.dropout:
            self.model.eval()  # the backbone and its classifier stay frozen, dropout off
        return self

    def all_logits(self, batch: Mapping[str, Tensor]) -> list[Tensor]:
        out, valid = self._backbone(batch)
        with fp32_region(out.logits.device):
            exits = [branch(out.hidden_states[i + 1].float(), valid) for i, branch in enumerate(self.branches)]
        return [*exits, self._last(out, valid)]

    def last_logits(self, batch: Mapping[str, Tensor]) -> Tensor:
        """The last exit's logits alone (what the FastBERT-style head is fitted on)."""
        return self._last(*self._backbone(batch))

    def _backbone(self, batch: Mapping[str, Tensor]) -> tuple[Any, Tensor]:
        inputs = model_inputs(batch)
        valid = inputs["attention_mask"].bool() if "attention_mask" in inputs else torch.ones_like(
            inputs["input_ids"], dtype=torch.bool)
        with torch.no_grad():
            return self.model(**inputs, output_hidden_states=True), valid

    def _last(self, out: Any, valid: Tensor) -> Tensor:
        if self.head is None:
            return out.logits.float()
        with fp32_region(out.logits.device):
            return self.head(out.hidden_states[-1].float(), valid)

    def forward(self, **inputs: Tensor) -> Any:
        logits = torch.stack(self.all_logits(inputs))  # (L, B, C)
        layer = exit_layers(logits, self.speed)
        return SimpleNamespace(logits=logits[layer - 1, torch.arange(logits.shape[1], device=logits.device)])


def uncertainty(logits: Tensor) -> Tensor:
    """Normalised entropy H(softmax(z)) / log C over the last dim."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1) / math.log(logits.shape[-1])


def exit_layers(logits: Tensor, speed: float) -> Tensor:
    """(L, B, C) logits of every exit -> (B,) 1-based exit layer: the first with uncertainty <= speed, else L."""
    confident = uncertainty(logits) <= speed  # (L, B)
    confident[-1] = True
    return confident.float().argmax(0) + 1  # argmax returns the first maximum


def self_distillation_loss(exits: list[Tensor]) -> Tensor:
    """sum_{i<L} KL(p_L || p_i), each a batch mean; the last exit is the (detached) teacher."""
    logp_t = F.log_softmax(exits[-1].detach().float(), dim=-1)
    total = exits[0].new_zeros(())
    for z in exits[:-1]:
        logp_s = F.log_softmax(z.float(), dim=-1)
        total = total + (logp_t.exp() * (logp_t - logp_s)).sum(-1).mean()
    return total


def layer_macs(tokens: int, hidden: int, ffn: int) -> int:
    """Multiply-accumulates of one encoder layer on `tokens` tokens: q/k/v/output projections, scores and
    weighted sum, feed-forward."""
    return 4 * tokens * hidden * hidden + 2 * tokens * tokens * hidden + 2 * tokens * hidden * ffn


def branch_macs(tokens: int, hidden: int, width: int, num_labels: int) -> int:
    """Multiply-accumulates of one branch: projection, its attention (projections, scores, sum), the MLP."""
    return tokens * hidden * width + layer_macs(tokens, width, 0) + width * width + width * num_labels


def head_macs(hidden: int, num_labels: int) -> int:
    """The model's own pooler and classifier (first token)."""
    return hidden * hidden + hidden * num_labels


def flops_to_exit(tokens: int, exit_layer: int, config: Any, width: int, fastbert_head: bool = False) -> int:
    """FLOPs an early-exit model spends on one example of `tokens` real tokens that leaves at `exit_layer`
    (`fastbert_head`: the last classifier is a branch, not the model's own pooler and classifier)."""
    d, f, c, n_layers = int(config.hidden_size), int(config.intermediate_size), int(config.num_labels), int(
        config.num_hidden_layers)
    macs = exit_layer * layer_macs(tokens, d, f)
    macs += min(exit_layer, n_layers - 1) * branch_macs(tokens, d, width, c)
    if exit_layer == n_layers:
        macs += branch_macs(tokens, d, width, c) if fastbert_head else head_macs(d, c)
    return 2 * macs


def speed_table(model: EarlyExitModel, loader: Any, device: torch.device, speeds: list[float],
                metric_fn: Any) -> list[dict[str, Any]]:
    """Per speed: the dev metrics of the early-exit predictions, the mean exit layer and mean FLOPs per
    example (and the full model's FLOPs for the speed-up)."""
    model.eval()
    logits, labels, tokens = [], [], []
    with torch.no_grad():
        for batch in loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            logits.append(torch.stack(model.all_logits(batch)).cpu())
            labels.append(batch["labels"].cpu())
            tokens.append(batch["attention_mask"].sum(1).cpu())
    all_logits, y, n = torch.cat(logits, 1), torch.cat(labels).numpy(), torch.cat(tokens).tolist()
    config, width, branch_head = model.model.config, model.width, model.head is not None
    full = float(np.mean([flops_to_exit(t, model.num_layers, config, width, branch_head) for t in n]))
    rows = []
    for speed in speeds:
        layers = exit_layers(all_logits, speed)
        chosen = all_logits[layers - 1, torch.arange(all_logits.shape[1])].numpy()
        flops = float(np.mean([flops_to_exit(t, int(e), config, width, branch_head) for t, e in zip(n, layers.tolist())]))
        rows.append({"speed": speed, "dev": metric_fn(chosen, y), "mean_exit_layer": float(layers.float().mean()),
                     "mean_flops": flops, "full_flops": full, "speedup": full / flops})
    return rows
