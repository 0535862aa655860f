"""The objective's settings and the checks of them that need no model: torch-free, so a job's config is checked
before torch is imported.

``parse_objective`` checks the settings (unknown stages or terms, bad weights or ranges); ``check_compatible``
checks them against what the student and teacher provide (from their configs alone). core.py builds the
runtime objective from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from distill_sweep.config.parse import IDENTITY, TEMPERATURE, UNHASHED_AT_DEFAULT, hashed_form, parse
from distill_sweep.models.model_info import ModelInfo

from ..errors import ConfigError
from .registry import TERMS, available_terms

__all__ = ["STAGE_KINDS", "ObjectiveSettings", "check_compatible", "parse_objective"]

STAGE_KINDS = ("intermediate", "prediction", "combined")


@dataclass
class ObjectiveSettings:
    name: str = field(metadata=IDENTITY)  # the objective's name (records, result directories)
    stages: list[str] = field(metadata=IDENTITY)  # the stage kinds it runs, in order: intermediate, prediction, combined
    terms: dict[str, Any] = field(default_factory=dict, metadata=IDENTITY)  # term name -> its settings (parsed per term)
    alpha: float = field(default=0.5, metadata=IDENTITY | {"ge": 0.0, "le": 1.0})  # KD weight; 1 - alpha on the labels
    temperature: float = field(default=2.0, metadata=IDENTITY | TEMPERATURE)  # KD softmax temperature T (loss x T^2)
    # the KD term: "kl" (softened KL, x T^2) or "mse" (squared logit distance, Tang et al. 2019; no T)
    kd_loss: Literal["kl", "mse"] = field(default="kl", metadata=IDENTITY | UNHASHED_AT_DEFAULT)
    reference_compat: bool = field(default=False, metadata=IDENTITY)  # average over pad positions like the reference code
    # per stage kind: "constant" lr instead of linear warmup and decay (TinyBERT's intermediate stage)
    schedules: dict[str, Literal["linear", "constant"]] = field(default_factory=dict, metadata=IDENTITY | UNHASHED_AT_DEFAULT)

    def validate(self, where: str) -> None:
        if not self.stages:
            raise ConfigError(f"{where}.stages is empty: use some of {', '.join(STAGE_KINDS)}")
        for stage in self.stages:
            if stage not in STAGE_KINDS:
                raise ConfigError(f"{where}.stages: unknown stage {stage!r} (use {', '.join(STAGE_KINDS)})")
        if len(set(self.stages)) != len(self.stages):
            raise ConfigError(f"{where}.stages={self.stages}: a stage kind appears twice")
        for stage in self.schedules:
            if stage not in self.stages:
                raise ConfigError(f"{where}.schedules.{stage}: not a stage of this objective ({', '.join(self.stages)})")
        if "intermediate" in self.stages and not self.terms:
            raise ConfigError(f"{where}: stage 'intermediate' needs at least one term in {where}.terms")
        unknown = [t for t in self.terms if t not in TERMS]
        if unknown:
            raise ConfigError(f"{where}.terms: unknown term {unknown[0]!r} (available: {', '.join(available_terms())})")
        for name, value in list(self.terms.items()):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = {"weight": value}  # shorthand: `hid_seq: 1.0` is the weight, other settings default
            self.terms[name] = parse(TERMS[name].settings, value, f"{where}.terms.{name}")

    def to_dict(self) -> dict[str, Any]:
        """Every setting, term defaults filled in, less the keys added at their default (what the config hash and
        the record hold: config/parse.py's `hashed_form` of the typed values)."""
        return hashed_form(self, written_numbers=False)


def parse_objective(node: Any, where: str = "objective") -> ObjectiveSettings:
    """The objective's settings, checked (unknown stages or terms, bad weights or ranges: ConfigError)."""
    return parse(ObjectiveSettings, node, where)


def check_compatible(settings: ObjectiveSettings, student: ModelInfo, teacher: ModelInfo,
                     layer_map: Sequence[tuple[int, int]] | None = None) -> None:
    """Refuse, before anything is loaded, terms that need what the student or teacher does not provide. A term
    class may add its own rules as ``check_compatible(settings, student, teacher, layer_map)`` (pkd.py); reading
    them imports that term's code (this runs once the models' configs are read, not in the torch-free checks)."""
    for name in settings.terms:
        info = TERMS[name]
        for side, model in (("student", student), ("teacher", teacher)):
            if info.uses_hidden and not model.hidden_states:
                raise ConfigError(f"objective term {name!r} needs hidden states, which the {side} does not provide")
            if info.uses_qkv and not model.qkv:
                why = f": {model.qkv_refusal}" if model.qkv_refusal else ""
                raise ConfigError(f"objective term {name!r} needs per-layer query/key/value, which the {side} "
                                  f"does not provide{why}")
        if info.uses_qkv and info.same_heads and student.num_heads != teacher.num_heads:
            raise ConfigError(
                f"objective term {name!r} compares attention heads one to one: the student has "
                f"{student.num_heads} heads and the teacher {teacher.num_heads}; use a student with "
                f"{teacher.num_heads} heads"
            )
        term = settings.terms[name]
        if getattr(term, "projection", "linear") == "none" and student.hidden_size != teacher.hidden_size:
            raise ConfigError(
                f"objective.terms.{name}.projection=none needs equal hidden sizes, student has "
                f"{student.hidden_size} and teacher {teacher.hidden_size}; use projection: linear"
            )
        own_check = getattr(info.factory, "check_compatible", None)
        if own_check is not None:
            own_check(term, student, teacher, layer_map)
