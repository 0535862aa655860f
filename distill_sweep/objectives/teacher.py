"""What the distillation losses read from the frozen teacher, and the cheapest exact way to get it.

* logits: from the teacher-output store when the job has one (a gather by example index), else a forward;
* features of the mapped layers: a forward of the teacher's first `depth` layers only (the deepest layer
  a term reads), when no logits are needed from the same forward.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from distill_sweep.models.capture import Features, run_with_features
from distill_sweep.training.loop import model_inputs


class TeacherView:
    """The frozen teacher as the losses see it. `store`: a teacher_outputs.TeacherOutputs (or None);
    `depth`: the deepest teacher layer the objective's terms read (None: all)."""

    def __init__(self, model: nn.Module, store: Any = None, depth: int | None = None,
                 forward: Callable[..., Features] | None = None) -> None:
        self.model, self.store, self.depth = model, store, depth
        # run_with_features, or a pack's forward that the members share (training/pack.SharedForward)
        self.forward = forward or run_with_features

    @torch.no_grad()
    def logits(self, batch: Mapping[str, Tensor]) -> Tensor:
        if self.store is not None:
            return self.store.gather(batch)
        return self.model(**model_inputs(batch)).logits

    # no_grad rather than inference_mode: teacher tensors are saved for the student's backward.
    @torch.no_grad()
    def features(self, batch: Mapping[str, Tensor], *, hidden: bool, qkv_layers: list[int], logits: bool
                 ) -> Features:
        """Hidden states / q,k,v of the mapped layers, and the logits when `logits` (from the store, if any).
        With [CLS] states in the store (terms that read only those) no forward runs: the hidden states are
        (B, 1, D) tensors at the stored layers, None elsewhere."""
        if self.store is not None and self.store.cls_layers and not qkv_layers:
            stored, cls = self.store.gather_with_cls(batch)
            states = tuple(cls[i].unsqueeze(1) if i in cls else None for i in range(max(cls) + 1))
            return Features(logits=stored if logits else None, hidden_states=states)
        if logits and self.store is None:  # one full forward gives both
            return self.forward(self.model, batch, hidden=hidden, qkv_layers=qkv_layers)
        features = self.forward(self.model, batch, hidden=hidden, qkv_layers=qkv_layers, depth=self.depth)
        if logits:
            features.logits = self.store.gather(batch)
        return features


def teacher_view(teacher: nn.Module | TeacherView) -> TeacherView:
    """A view of a bare teacher module runs it fully (as before the store existed)."""
    return teacher if isinstance(teacher, TeacherView) else TeacherView(teacher)
