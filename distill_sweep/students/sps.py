"""`student=sps`: Shuffled Parameter Sharing (PEA-KD, seed 003 Sec. 3.2).

k parameter layers of the teacher's class and width, of which the top `shared_layers` (s) run a second time
after all k: the encoder applies k + s layers with the parameters of k. For k = s = 3 the stack is
[1, 2, 3, 1', 2', 3'] (SPS-1, "paired parameter sharing"); for the paper's 6-layer student s = 3 gives
[1..6, 4', 5', 6']. `swap_qk` (SPS-2, "shuffling") makes each upper copy use its lower layer's Key
parameters as its Query and the Query parameters as its Key.

- SPS-1: the upper position holds the SAME layer module object (`encoder.layer[k + i] is encoder.layer[i']`).
- SPS-2: the upper position holds a distinct layer module whose Linear modules hold the lower layer's
  Parameter objects, query <- key and key <- query (everything else the same tensors in the same roles).
  Distinct Linear modules rather than the lower's own ones in swapped roles: capture.py hooks a Linear per
  role, so a Linear that is the query at one position and the key at another would be filed twice.

`describe` reports the k + s effective layers as `num_hidden_layers`, so `init`, `map` and the objectives
see positions: `init` names one teacher layer per position, and the k parameter layers are copied from the
first k of them (`init=bottom` copies teacher layers 1..k, the paper's student). Every parameter is one
tensor: `parameters()` lists it once, the optimiser steps it once, and the state dict names it at each
position it serves (torch.save stores it once; load_state_dict refills it in place, keeping the sharing).
"""

from __future__ import annotations

import copy

from torch import nn
from transformers import PretrainedConfig, PreTrainedModel

from distill_sweep.errors import ConfigError
from distill_sweep.models.families import family_of_model

from .base import BuildInputs
from .sps_settings import SPSSettings
from .truncated import copy_backbone


def describe(settings: SPSSettings, teacher: PretrainedConfig) -> PretrainedConfig:
    depth = settings.num_layers + settings.shared
    if depth > int(teacher.num_hidden_layers):
        raise ConfigError(f"student=sps: {settings.num_layers} layers + {settings.shared} shared = {depth} "
                          f"positions, more than the teacher's {teacher.num_hidden_layers} layers")
    arch = copy.deepcopy(teacher)
    arch.num_hidden_layers = depth
    return arch


def build(settings: SPSSettings, inputs: BuildInputs) -> PreTrainedModel:
    teacher = inputs.teacher
    assert teacher is not None, "an SPS student is copied from a teacher"
    student = type(teacher)(inputs.arch)
    k = settings.num_layers
    copy_backbone(teacher, student, inputs.init.layers[:k])
    share_top_layers(student, k, settings.shared, settings.swap_qk)
    return student


def share_top_layers(model: PreTrainedModel, k: int, shared: int, swap_qk: bool) -> None:
    """Positions k..k+shared-1 (0-based) become upper copies of layers k-shared..k-1."""
    layers = family_of_model(model).layers(model)
    assert len(layers) == k + shared, f"{len(layers)} encoder positions for {k} layers + {shared} shared"
    for lower in range(k - shared, k):
        layers[lower + shared] = upper_copy(layers[lower], swap_qk)


def upper_copy(lower: nn.Module, swap_qk: bool) -> nn.Module:
    """The layer module of an upper position: `lower` itself, or (swap_qk) a distinct module holding lower's
    Parameter objects with the self-attention's query and key parameters exchanged."""
    if not swap_qk:
        return lower
    attn = lower.attention.self
    memo: dict[int, object] = {id(p): p for p in lower.parameters()}  # deepcopy reuses whatever memo maps
    for name in ("weight", "bias"):
        q, k = getattr(attn.query, name), getattr(attn.key, name)
        memo[id(q)], memo[id(k)] = k, q
    for module in lower.modules():  # the attention reads the model's config at run time: keep that one object
        config = getattr(module, "config", None)
        if config is not None:
            memo[id(config)] = config
    return copy.deepcopy(lower, memo)
