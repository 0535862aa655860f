"""`student=pretrained`: any hub id or local directory (a pre-distilled student such as a task-agnostic
result); its encoder is loaded as it is and a fresh classification head is added for the task."""

from __future__ import annotations

from transformers import AutoModelForSequenceClassification, PretrainedConfig, PreTrainedModel

from distill_sweep.models.loading import read_model_config

from .base import BuildInputs
from .pretrained_settings import PretrainedSettings


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
