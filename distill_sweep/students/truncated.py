"""`student=truncated` (default): the teacher's class and width with k layers, copied per `init`.

Embeddings (and a pooler if the architecture has one) and the chosen encoder layers are copied from the
teacher by state dict (so nothing keeps a stale layer index); the classification head starts fresh, as in
the paper's reference code. A decoder LM (families.py: Llama, GPT-2) keeps its embeddings, final norm and LM
head from the teacher (the head tied to the embeddings where the teacher ties them).
"""

from __future__ import annotations

import copy

import torch
from transformers import PretrainedConfig, PreTrainedModel

from distill_sweep.models.families import family_of_model

from .base import BuildInputs, checkpointed
from .truncated_settings import TruncatedSettings


def describe(settings: TruncatedSettings, teacher: PretrainedConfig) -> PretrainedConfig:
    arch = copy.deepcopy(teacher)
    arch.num_hidden_layers = settings.num_layers
    return arch


def build(settings: TruncatedSettings, inputs: BuildInputs) -> PreTrainedModel:
    teacher = inputs.teacher
    assert teacher is not None, "a truncated student is copied from a teacher"
    student = type(teacher)(describe(settings, teacher.config))
    copy_backbone(teacher, student, inputs.init.layers)
    if family_of_model(teacher).causal:
        copy_lm_head(teacher, student)
    return checkpointed(student, settings.gradient_checkpointing)


def copy_lm_head(teacher: PreTrainedModel, student: PreTrainedModel) -> None:
    """A decoder's LM head is the teacher's: tied to the (copied) input embeddings where the teacher ties them,
    else copied itself."""
    head, source = student.get_output_embeddings(), teacher.get_output_embeddings()
    if head is None or source is None or head.weight is student.get_input_embeddings().weight:
        return  # tied: the embeddings copy was the head's
    with torch.no_grad():
        head.load_state_dict(source.state_dict())


def copy_backbone(teacher: PreTrainedModel, student: PreTrainedModel, layers: list[int]) -> None:
    """Copy everything in the backbone but the layer stack, and teacher layer `layers[i]` (1-based) into
    student layer i; the task head outside the backbone is not copied. Where the layers are is the model
    family's (families.py): an encoder's `encoder.layer`, a decoder's `layers` / `h`."""
    family = family_of_model(teacher)
    student_base, teacher_base = student.base_model, teacher.base_model
    student_layers, teacher_layers = family.layers(student), family.layers(teacher)
    with torch.no_grad():
        for name, child in teacher_base.named_children():
            if name != family.stack_root:
                getattr(student_base, name).load_state_dict(child.state_dict())
        for i, layer in enumerate(layers):
            student_layers[i].load_state_dict(teacher_layers[layer - 1].state_dict())
