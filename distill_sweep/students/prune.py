"""`init=prune`: the teacher layers a truncated student keeps, chosen by block importance.

The score of a layer is ShortGPT's Block Influence (Men et al. 2024): one minus the cosine similarity between
the hidden state entering the layer and the one leaving it, averaged over the real tokens of a calibration
slice (the first `procedure.calibration` training sequences). A layer that barely changes its input scores
near 0 and is dropped first; the student keeps the k highest-scoring layers, in the teacher's order. The
states are taken at each layer's own input and output (forward hooks on the family's layer stack), not from
`hidden_states`, whose last entry is after a decoder's final norm.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distill_sweep.models.families import family_of_model
from distill_sweep.training.loop import model_inputs, to_device

__all__ = ["block_importance", "prune_layers"]


@torch.no_grad()
def block_importance(model: nn.Module, batches: Iterable[Mapping[str, Tensor]], device: torch.device) -> list[float]:
    """Per 1-based layer, the mean over real tokens of 1 - cos(layer input, layer output)."""
    layers = family_of_model(model).layers(model)
    sums = torch.zeros(len(layers), dtype=torch.float64)
    count = 0
    mask: list[Tensor] = []

    def hook(i: int):  # noqa: ANN202 - a forward hook
        def fn(_mod: nn.Module, args: tuple, kwargs: dict, out: object) -> None:
            x = args[0] if args else kwargs["hidden_states"]
            y = out[0] if isinstance(out, tuple) else out
            cos = F.cosine_similarity(x.float(), y.float(), dim=-1)  # (B, S)
            sums[i] += float(((1.0 - cos) * mask[0]).sum())
        return fn

    handles = [layer.register_forward_hook(hook(i), with_kwargs=True) for i, layer in enumerate(layers)]
    try:
        for batch in batches:
            batch = to_device(dict(batch), device)
            mask[:] = [batch["attention_mask"].float()]
            model(**model_inputs(batch))
            count += int(batch["attention_mask"].sum())
    finally:
        for h in handles:
            h.remove()
    return (sums / max(1, count)).tolist()


def prune_layers(scores: list[float], k: int) -> list[int]:
    """The 1-based layers of the k highest scores (ties: the lower layer), in ascending order."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return sorted(i + 1 for i in order[:k])
