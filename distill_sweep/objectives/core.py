"""The objective as one object: its stages, the terms of each stage and their losses.

Stage kinds (config.STAGE_KINDS):
* ``intermediate``: sum_term weight * term(student, teacher) on the mapped layers (no labels);
* ``prediction``:   (1 - alpha) task loss + alpha T^2 KL on the logits (vanilla KD, prediction.py), or
                    alpha ||z_t - z_s||^2 with ``kd_loss: mse`` (Tang et al. 2019);
* ``combined``:     one stage with both: (1 - alpha) CE + alpha T^2 KL + sum_term weight * term (PKD).

The settings are checked in config.py (no model, no torch needed); ``build_objective`` builds the runtime
object from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from distill_sweep.models.capture import Features, run_with_features
from distill_sweep.models.model_info import ModelInfo
from distill_sweep.training.loop import LossFn, model_inputs

from ..errors import ConfigError
from .config import ObjectiveSettings, check_compatible, parse_objective
from .inputs import LossInputs, fp32_region
from .prediction import prediction_loss
from .registry import TERMS
from .spec import TermSpec
from .teacher import TeacherView, teacher_view

__all__ = ["IntermediateObjective", "Objective", "build_objective"]


class IntermediateObjective(nn.Module):
    """sum_term weight * term(student, teacher); its parameters (projections) train with the student.

    Call ``.to(device)`` together with the student; ``.train()`` / ``.eval()`` decide whether the
    contrastive memory bank is updated.
    """

    def __init__(
        self,
        terms: Mapping[str, nn.Module],
        weights: Mapping[str, float],
        *,
        layer_map: Sequence[tuple[int, int]],
        needs_hidden: bool,
        uses_qkv: bool,
        reference_compat: bool = False,
        embeddings_pair: bool = True,
    ) -> None:
        super().__init__()
        self.terms = nn.ModuleDict(dict(terms))
        self.weights = {k: float(v) for k, v in weights.items()}
        self.layer_map = tuple((int(s), int(t)) for s, t in layer_map)
        self.needs_hidden = bool(needs_hidden)
        self.student_qkv_layers = [s for s, _ in self.layer_map] if uses_qkv else []
        self.teacher_qkv_layers = [t for _, t in self.layer_map] if uses_qkv else []
        self.reference_compat = bool(reference_compat)
        self.embeddings_pair = bool(embeddings_pair)

    def forward(
        self, student: Features, teacher: Features, batch: Mapping[str, Tensor]
    ) -> tuple[Tensor, dict[str, float]]:
        """(total loss, unweighted value of every term)."""
        device = (student.logits if student.logits is not None else student.head.hidden).device
        with fp32_region(device):
            x = LossInputs(student, teacher, batch, layer_map=self.layer_map,
                           reference_compat=self.reference_compat, embeddings_pair=self.embeddings_pair)
            total: Tensor | None = None
            values: dict[str, float] = {}
            for name, term in self.terms.items():
                value = term(x)
                values[name] = float(value.detach())
                weighted = value * self.weights[name]
                total = weighted if total is None else total + weighted
        assert total is not None
        return total, values

    @property
    def teacher_depth(self) -> int:
        """The deepest teacher layer a term reads: the teacher need not run further for them."""
        return max(t for _, t in self.layer_map)

    def features(self, model: nn.Module, batch: Mapping[str, Tensor], side: str) -> Features:
        """One forward of ``model`` capturing what the terms read (grad mode is the caller's)."""
        layers = self.student_qkv_layers if side == "student" else self.teacher_qkv_layers
        return run_with_features(model, batch, hidden=self.needs_hidden, qkv_layers=layers)

    def teacher_features(self, teacher: TeacherView, batch: Mapping[str, Tensor], *, logits: bool) -> Features:
        return teacher.features(batch, hidden=self.needs_hidden, qkv_layers=self.teacher_qkv_layers, logits=logits)

    def extra_repr(self) -> str:
        return (f"weights={self.weights}, layer_map={list(self.layer_map)}, reference_compat={self.reference_compat}, "
                f"embeddings_pair={self.embeddings_pair}")


def _check_layer_map(layer_map: Sequence[Sequence[int]], student_layers: int, teacher_layers: int) -> tuple:
    pairs = []
    for pair in layer_map:
        if len(pair) != 2:
            raise ConfigError(f"layer_map entries must be (student_layer, teacher_layer), got {pair!r}")
        s, t = int(pair[0]), int(pair[1])
        if not 1 <= s <= student_layers or not 1 <= t <= teacher_layers:
            raise ConfigError(
                f"layer_map pair ({s}, {t}) out of range: student layers 1..{student_layers}, "
                f"teacher layers 1..{teacher_layers}"
            )
        pairs.append((s, t))
    if not pairs:
        raise ConfigError("layer_map is empty")
    return tuple(pairs)


def build_objective(
    objective: ObjectiveSettings | Any,
    *,
    student_config: Any,
    teacher_config: Any,
    layer_map: Sequence[Sequence[int]],
    train_labels: Tensor | None,
    num_labels: int,
    embeddings_pair: bool = True,
) -> IntermediateObjective | None:
    """The weighted sum of the objective's terms (None when it has none, e.g. vanilla_kd); `objective` is its
    checked settings or a config node / mapping (checked here). `embeddings_pair`: the hidden-state terms also
    pair the embedding outputs (task_agnostic's `procedure.embeddings_pair`; every other procedure keeps it)."""
    settings = objective if isinstance(objective, ObjectiveSettings) else parse_objective(objective)
    if not settings.terms:
        return None
    pairs = _check_layer_map(layer_map, int(student_config.num_hidden_layers),
                             int(teacher_config.num_hidden_layers))
    check_compatible(settings, ModelInfo.from_config(student_config), ModelInfo.from_config(teacher_config), pairs)
    labels = None if train_labels is None else torch.as_tensor(train_labels)
    infos = [TERMS[name] for name in settings.terms]
    modules = {
        i.name: i.factory(TermSpec(
            name=i.name, settings=settings.terms[i.name], student_config=student_config,
            teacher_config=teacher_config, layer_map=pairs, train_labels=labels, num_labels=int(num_labels),
            reference_compat=settings.reference_compat, embeddings_pair=bool(embeddings_pair),
        ))
        for i in infos
    }
    return IntermediateObjective(
        modules,
        {name: term.weight for name, term in settings.terms.items()},
        layer_map=pairs,
        needs_hidden=any(i.uses_hidden for i in infos),
        uses_qkv=any(i.uses_qkv for i in infos),
        reference_compat=settings.reference_compat,
        embeddings_pair=bool(embeddings_pair),
    )


class Objective:
    """An objective's stages and the loss of each, over a student, a frozen teacher and its terms."""

    def __init__(self, settings: ObjectiveSettings, terms: IntermediateObjective | None, *, regression: bool):
        self.settings = settings
        self.terms = terms
        self.regression = regression

    @property
    def stages(self) -> list[str]:
        return list(self.settings.stages)

    def modules(self) -> dict[str, nn.Module]:
        """Modules with state to checkpoint and move with the student (projections, memory bank)."""
        return {} if self.terms is None else {"objective": self.terms}

    def trainable(self, stage: str, student: nn.Module) -> list[nn.Parameter]:
        params = list(student.parameters())
        if stage != "prediction" and self.terms is not None:
            params += list(self.terms.parameters())
        return params

    def loss_fn(self, stage: str, student: nn.Module, teacher: nn.Module | TeacherView) -> LossFn:
        """The loss of a stage; `teacher`: the frozen teacher, or a TeacherView that reads its logits from the
        teacher-output store and runs it only as deep as the terms need."""
        view = teacher_view(teacher)
        if stage == "intermediate":
            return self._intermediate(student, view)
        if stage == "prediction":
            return self._prediction(student, view)
        if stage == "combined":
            return self._combined(student, view)
        raise ValueError(f"unknown stage {stage!r}")

    def _kd(self, s_logits: Tensor, t_logits: Tensor, labels: Tensor) -> Tensor:
        return prediction_loss(s_logits, t_logits, labels, alpha=self.settings.alpha,
                               temperature=self.settings.temperature, regression=self.regression,
                               kd_loss=self.settings.kd_loss)

    def _intermediate(self, student: nn.Module, teacher: TeacherView) -> LossFn:
        terms = self.terms
        assert terms is not None

        def loss_fn(batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
            t = terms.teacher_features(teacher, batch, logits=False)
            return terms(terms.features(student, batch, "student"), t, batch)

        return loss_fn

    def _prediction(self, student: nn.Module, teacher: TeacherView) -> LossFn:
        def loss_fn(batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
            t_logits = teacher.logits(batch)
            return self._kd(student(**model_inputs(batch, student)).logits, t_logits, batch["labels"]), {}

        return loss_fn

    def _combined(self, student: nn.Module, teacher: TeacherView) -> LossFn:
        terms = self.terms
        if terms is None:  # a combined stage without terms is vanilla KD
            return self._prediction(student, teacher)

        def loss_fn(batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
            t = terms.teacher_features(teacher, batch, logits=True)
            s = terms.features(student, batch, "student")
            kd = self._kd(s.logits, t.logits, batch["labels"])
            inter, parts = terms(s, t, batch)
            return kd + inter, {"kd": float(kd.detach()), **parts}

        return loss_fn
