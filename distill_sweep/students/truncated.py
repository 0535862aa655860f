"""`student=truncated` (default): the teacher's class and width with k layers, copied per `init`.

Embeddings (and a pooler if the architecture has one) and the chosen encoder layers are copied from the
teacher by state dict (so nothing keeps a stale layer index); the classification head starts fresh, as in
the paper's reference code.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from transformers import PretrainedConfig, PreTrainedModel

from .base import BuildInputs, StudentType, register_student


@dataclass
class TruncatedSettings:
    name: str = "truncated"  # the student type
    # layers, copied from the teacher layers that init names
    num_layers: int = field(default=3, metadata={"ge": 1})


def describe(settings: TruncatedSettings, teacher: PretrainedConfig) -> PretrainedConfig:
    arch = copy.deepcopy(teacher)
    arch.num_hidden_layers = settings.num_layers
    return arch


def build(settings: TruncatedSettings, inputs: BuildInputs) -> PreTrainedModel:
    teacher = inputs.teacher
    assert teacher is not None, "a truncated student is copied from a teacher"
    student = type(teacher)(describe(settings, teacher.config))
    copy_backbone(teacher, student, inputs.init.layers)
    return student


def copy_backbone(teacher: PreTrainedModel, student: PreTrainedModel, layers: list[int]) -> None:
    """Copy everything in the backbone but the encoder stack, and teacher layer `layers[i]` (1-based) into
    student layer i; the task head outside the backbone is not copied."""
    student_base, teacher_base = student.base_model, teacher.base_model
    with torch.no_grad():
        for name, child in teacher_base.named_children():
            if name != "encoder":
                getattr(student_base, name).load_state_dict(child.state_dict())
        for i, layer in enumerate(layers):
            student_base.encoder.layer[i].load_state_dict(teacher_base.encoder.layer[layer - 1].state_dict())


TRUNCATED = register_student(StudentType("truncated", TruncatedSettings, describe, build, uses_init=True,
                                         needs_teacher_weights=True))
