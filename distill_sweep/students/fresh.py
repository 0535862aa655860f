"""`student=fresh`: a model of the teacher's family built from its own config (depth, width, heads, FFN),
randomly initialised; the embeddings are copied from the teacher when the widths match and
`copy_embeddings` is on. A decoder teacher (Llama, GPT-2) gives a causal LM with plain multi-head attention. `student=tinybert4` is a preset (4 layers, hidden 312, FFN 1200, 12 heads)."""

from __future__ import annotations

import copy

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    PretrainedConfig,
    PreTrainedModel,
)

from distill_sweep.models.families import family_of

from .base import BuildInputs, checkpointed
from .fresh_settings import FreshSettings


def describe(settings: FreshSettings, teacher: PretrainedConfig) -> PretrainedConfig:
    arch = copy.deepcopy(teacher)  # vocabulary, positions, dropout and label maps follow the teacher
    arch.num_hidden_layers = settings.num_layers
    arch.hidden_size = settings.hidden_size
    arch.num_attention_heads = settings.num_attention_heads
    arch.intermediate_size = settings.intermediate_size
    family = family_of(arch)
    if family is not None and family.causal:  # decoders: their own names for the same shape
        if hasattr(arch, "num_key_value_heads"):
            arch.num_key_value_heads = settings.num_attention_heads  # plain multi-head attention
        if getattr(arch, "head_dim", None) is not None:
            arch.head_dim = settings.hidden_size // settings.num_attention_heads  # else the teacher's stays
        if family.name == "gpt2":
            arch.n_inner = settings.intermediate_size
    return arch


def build(settings: FreshSettings, inputs: BuildInputs) -> PreTrainedModel:
    attn = getattr(inputs.arch, "_attn_implementation", None) or "sdpa"
    family = family_of(inputs.arch)
    causal = family is not None and family.causal
    auto = AutoModelForCausalLM if causal else AutoModelForSequenceClassification
    student = auto.from_config(inputs.arch, attn_implementation=attn)
    teacher = inputs.teacher
    if (settings.copy_embeddings and teacher is not None and teacher.config.hidden_size == settings.hidden_size
            and teacher.config.vocab_size == inputs.arch.vocab_size):  # not with its own tokenizer's vocabulary
        with torch.no_grad():
            if causal:  # the token embeddings (and so a head tied to them)
                student.get_input_embeddings().load_state_dict(teacher.get_input_embeddings().state_dict())
            else:
                student.base_model.embeddings.load_state_dict(teacher.base_model.embeddings.state_dict())
    return checkpointed(student, settings.gradient_checkpointing)
