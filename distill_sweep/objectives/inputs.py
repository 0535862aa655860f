"""Per-call view of student/teacher features shared by all terms of one objective.

Everything handed to a term is float32: under bf16 autocast the captured tensors are bf16, and the
softmax/KL/MSE arithmetic on heavily padded batches is where bf16 loses (0 * log 0, large negative fills).
Teacher tensors are detached.  The training loop runs the teacher under ``torch.no_grad``; a caller may
still hand in tensors made under ``torch.inference_mode`` (the benchmark's loss-alone timing does, and
tests do), which autograd refuses to save for backward, so the accessors that feed ordinary autograd
arithmetic (``hidden``, ``tokens``, ``cls``) always return normal tensors; ``qkv`` does not copy (see
there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from torch import Tensor

from distill_sweep.models.capture import Features

__all__ = ["LossInputs", "as_target", "fp32_region"]

STUDENT = "student"
TEACHER = "teacher"


def as_target(t: Tensor) -> Tensor:
    """A float32 tensor outside the autograd graph that autograd may save (teacher side)."""
    t = t.detach()
    if t.dtype != torch.float32:
        return t.float()
    if t.is_inference():
        return t.clone()
    return t


def fp32_region(device: torch.device) -> AbstractContextManager[Any]:
    """Disable autocast so matmuls inside the losses really run in float32."""
    if device.type in ("cpu", "cuda"):
        return torch.autocast(device_type=device.type, enabled=False)
    return nullcontext()


class LossInputs:
    """Student/teacher features + padding mask, with lazily computed, cached per-layer tensors."""

    def __init__(
        self,
        student: Features,
        teacher: Features,
        batch: Mapping[str, Tensor],
        *,
        layer_map: tuple[tuple[int, int], ...],
        reference_compat: bool = False,
        embeddings_pair: bool = True,
    ) -> None:
        self.student = student
        self.teacher = teacher
        self.batch = batch
        self.layer_map = layer_map
        self.reference_compat = reference_compat
        self.embeddings_pair = embeddings_pair
        mask = batch.get("attention_mask")
        if mask is None:
            ids = batch["input_ids"]
            mask = torch.ones(ids.shape, dtype=torch.bool, device=ids.device)
        self.valid: Tensor = mask.to(torch.bool)  # (B, S), True = real token
        self._cache: dict[tuple[Any, ...], Any] = {}

    # ----------------------------------------------------------------- helpers
    def cached(self, key: tuple[Any, ...], fn: Callable[[], Any]) -> Any:
        """Compute once per objective call (e.g. float32 copies read by several terms)."""
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def features(self, side: str) -> Features:
        return self.student if side == STUDENT else self.teacher

    def _f32(self, side: str, t: Tensor) -> Tensor:
        return t.float() if side == STUDENT else as_target(t)

    @property
    def hidden_pairs(self) -> tuple[tuple[int, int], ...]:
        """The hidden-state terms' pairs: the embedding outputs (0, 0) (unless ``embeddings_pair`` is off), then
        the layer map (TermSpec.hidden_pairs, the same rule)."""
        return ((0, 0), *self.layer_map) if self.embeddings_pair else self.layer_map

    # ----------------------------------------------------------------- tensors
    def hidden(self, side: str, layer: int) -> Tensor:
        """Hidden state after ``layer`` (0 = embeddings), (B, S, D) float32."""

        def make() -> Tensor:
            hs = self.features(side).hidden_states
            if hs is None:
                raise RuntimeError(f"{side} features were captured without hidden states")
            return self._f32(side, hs[layer])

        return self.cached(("hidden", side, layer), make)

    def cls(self, side: str, layer: int) -> Tensor:
        """[CLS] (first-token) state after ``layer``, (B, D) float32."""

        def make() -> Tensor:
            hs = self.features(side).hidden_states
            if hs is None:
                raise RuntimeError(f"{side} features were captured without hidden states")
            return self._f32(side, hs[layer][:, 0])

        return self.cached(("cls", side, layer), make)

    @property
    def token_index(self) -> Tensor:
        """Flat (B*S) positions of the real tokens, in order."""
        return self.cached(("token_index",), lambda: self.valid.reshape(-1).nonzero().squeeze(1))

    def tokens(self, side: str, layer: int) -> Tensor:
        """Hidden states of the real tokens after ``layer``, (N, D) float32 (teacher: a normal tensor)."""

        def make() -> Tensor:
            hs = self.features(side).hidden_states
            if hs is None:
                raise RuntimeError(f"{side} features were captured without hidden states")
            h = hs[layer] if side == STUDENT else hs[layer].detach()
            # index_select makes a fresh tensor (never an inference tensor) and its backward is a cheap
            # index_add; boolean-mask indexing is slower both ways.
            return h.reshape(-1, h.shape[-1]).index_select(0, self.token_index).float()

        return self.cached(("tokens", side, layer), make)

    def qkv(self, side: str, layer: int) -> tuple[Tensor, Tensor, Tensor]:
        """Captured (q, k, v) of 1-based ``layer``, each (B, S, H*d) float32.

        Teacher tensors are detached but NOT copied out of inference mode (a copy per layer is measurable
        on CPU): use them in no-grad arithmetic or pass them to a custom autograd function that does not
        save them, as attention.py does; ``as_target`` makes a savable copy.
        """

        def make() -> tuple[Tensor, Tensor, Tensor]:
            feats = self.features(side)
            if layer not in feats.qkv:
                raise RuntimeError(f"{side} layer {layer} q/k/v were not captured")
            q, k, v = (t.float() if side == STUDENT else t.detach().float() for t in feats.qkv[layer])
            return q, k, v

        return self.cached(("qkv", side, layer), make)
