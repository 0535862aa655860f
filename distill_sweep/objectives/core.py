"""The intermediate-layer objective: a weighted sum of registered terms, built from ``cfg.objective``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..capture import Features
from ..errors import ConfigError
from .inputs import LossInputs, fp32_region
from .registry import TERMS, TermSpec, available_terms

__all__ = ["IntermediateObjective", "build_objective", "objective_config_dict"]

PROJECTIONS = ("linear", "none")
CONTRAST_LOSSES = ("nce", "infonce")


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
    ) -> None:
        super().__init__()
        self.terms = nn.ModuleDict(dict(terms))
        self.weights = {k: float(v) for k, v in weights.items()}
        self.layer_map = tuple((int(s), int(t)) for s, t in layer_map)
        self.needs_hidden = bool(needs_hidden)
        self.student_qkv_layers = [s for s, _ in self.layer_map] if uses_qkv else []
        self.teacher_qkv_layers = [t for _, t in self.layer_map] if uses_qkv else []
        self.reference_compat = bool(reference_compat)

    def forward(
        self, student: Features, teacher: Features, batch: Mapping[str, Tensor]
    ) -> tuple[Tensor, dict[str, float]]:
        """(total loss, unweighted value of every term)."""
        with fp32_region(student.logits.device):
            x = LossInputs(
                student, teacher, batch, layer_map=self.layer_map, reference_compat=self.reference_compat
            )
            total: Tensor | None = None
            values: dict[str, float] = {}
            for name, term in self.terms.items():
                value = term(x)
                values[name] = float(value.detach())
                weighted = value * self.weights[name]
                total = weighted if total is None else total + weighted
        assert total is not None
        return total, values

    def extra_repr(self) -> str:
        return f"weights={self.weights}, layer_map={list(self.layer_map)}, reference_compat={self.reference_compat}"


def objective_config_dict(obj_cfg: Any) -> dict[str, Any]:
    """Plain-dict copy of an objective config (OmegaConf DictConfig or any mapping)."""
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(obj_cfg, DictConfig):
            return dict(OmegaConf.to_container(obj_cfg, resolve=True))  # type: ignore[arg-type]
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        pass
    if isinstance(obj_cfg, Mapping):
        return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in obj_cfg.items()}
    raise ConfigError(f"objective config must be a mapping, got {type(obj_cfg).__name__}")


def _check_layer_map(layer_map: Sequence[Sequence[int]], student_config: Any, teacher_config: Any) -> tuple:
    n_s, n_t = int(student_config.num_hidden_layers), int(teacher_config.num_hidden_layers)
    pairs = []
    for pair in layer_map:
        if len(pair) != 2:
            raise ConfigError(f"layer_map entries must be (student_layer, teacher_layer), got {pair!r}")
        s, t = int(pair[0]), int(pair[1])
        if not 1 <= s <= n_s or not 1 <= t <= n_t:
            raise ConfigError(
                f"layer_map pair ({s}, {t}) out of range: student layers 1..{n_s}, teacher layers 1..{n_t}"
            )
        pairs.append((s, t))
    if not pairs:
        raise ConfigError("layer_map is empty")
    return tuple(pairs)


def build_objective(
    obj_cfg: Any,
    *,
    student_config: Any,
    teacher_config: Any,
    layer_map: Sequence[Sequence[int]],
    train_labels: Tensor | None,
    num_labels: int,
) -> IntermediateObjective | None:
    """The intermediate objective of ``obj_cfg`` (None when ``terms`` is empty, e.g. vanilla_kd).

    Raises ConfigError for unknown terms, bad weights, an out-of-range layer map, attention/value terms
    with different head counts, ``projection: none`` with different widths, bad contrast settings.
    """
    cfg = objective_config_dict(obj_cfg)
    terms = cfg.get("terms") or {}
    if not isinstance(terms, Mapping):
        raise ConfigError(f"objective.terms must map term name -> weight, got {terms!r}")
    if not terms:
        return None
    unknown = [t for t in terms if t not in TERMS]
    if unknown:
        raise ConfigError(f"unknown objective term(s) {unknown}; available: {available_terms()}")
    weights: dict[str, float] = {}
    for name, w in terms.items():
        try:
            weights[name] = float(w)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"objective.terms.{name}: weight must be a number, got {w!r}") from exc
    projection = str(cfg.get("projection", "linear"))
    if projection not in PROJECTIONS:
        raise ConfigError(f"objective.projection must be one of {PROJECTIONS}, got {projection!r}")
    contrast_loss = str((cfg.get("contrast") or {}).get("loss", "nce"))
    if contrast_loss not in CONTRAST_LOSSES:
        raise ConfigError(f"objective.contrast.loss must be one of {CONTRAST_LOSSES}, got {contrast_loss!r}")
    pairs = _check_layer_map(layer_map, student_config, teacher_config)

    infos = [TERMS[name] for name in terms]
    uses_qkv = any(i.uses_qkv for i in infos)
    if uses_qkv:
        h_s = int(student_config.num_attention_heads)
        h_t = int(teacher_config.num_attention_heads)
        if h_s != h_t:
            names = [i.name for i in infos if i.uses_qkv]
            raise ConfigError(
                f"objective terms {names} compare attention heads one to one: the student has {h_s} heads "
                f"and the teacher {h_t}; give the student num_attention_heads={h_t}"
            )
    labels = None if train_labels is None else torch.as_tensor(train_labels)
    spec_kwargs = dict(
        cfg=cfg,
        student_config=student_config,
        teacher_config=teacher_config,
        layer_map=pairs,
        train_labels=labels,
        num_labels=int(num_labels),
    )
    modules = {i.name: i.factory(TermSpec(name=i.name, **spec_kwargs)) for i in infos}
    return IntermediateObjective(
        modules,
        weights,
        layer_map=pairs,
        needs_hidden=any(i.uses_hidden for i in infos),
        uses_qkv=uses_qkv,
        reference_compat=bool(cfg.get("reference_compat", False)),
    )
