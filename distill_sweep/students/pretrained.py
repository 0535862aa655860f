"""`student=pretrained`: any hub id or local directory (a pre-distilled student such as a task-agnostic
result); its encoder is loaded as it is and a fresh classification head is added for the task."""

from __future__ import annotations

from dataclasses import dataclass

from transformers import AutoModelForSequenceClassification, PretrainedConfig, PreTrainedModel

from distill_sweep.errors import ConfigError
from distill_sweep.models import read_model_config

from .base import BuildInputs, StudentType, register_student


@dataclass
class PretrainedSettings:
    name: str = "pretrained"  # the student type
    name_or_path: str | None = None  # hub id or local directory (required)
    trust_remote_code: bool = False  # let transformers run code from the model's repository
    attn_implementation: str = "sdpa"  # transformers' attention implementation

    def validate(self, where: str) -> None:
        if not self.name_or_path:
            raise ConfigError(f"{where}.name_or_path is required for student=pretrained (a hub id or a directory)")


def describe(settings: PretrainedSettings, teacher: PretrainedConfig) -> PretrainedConfig:
    return read_model_config(str(settings.name_or_path), "student.name_or_path", settings.trust_remote_code)


def build(settings: PretrainedSettings, inputs: BuildInputs) -> PreTrainedModel:
    kwargs = {"num_labels": inputs.num_labels}
    if inputs.label_names:
        kwargs["id2label"] = dict(enumerate(inputs.label_names))
        kwargs["label2id"] = {n: i for i, n in enumerate(inputs.label_names)}
    return AutoModelForSequenceClassification.from_pretrained(
        settings.name_or_path, trust_remote_code=settings.trust_remote_code,
        attn_implementation=settings.attn_implementation, ignore_mismatched_sizes=True, **kwargs)


PRETRAINED = register_student(StudentType("pretrained", PretrainedSettings, describe, build, uses_init=False,
                                          needs_teacher_weights=False))
