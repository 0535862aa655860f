"""student.gradient_checkpointing (students/base.py `checkpointed`): on when set, off by default, each layer run
again in the backward, and one decoder step's gradients (causal_lm's loss: fkl, hid_seq and the CE, chunked)
equal those without it, dropout included."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_gpt2, tiny_llama

from distill_sweep.models.families import family_of_model
from distill_sweep.models.inits import StudentInit
from distill_sweep.objectives import parse_objective
from distill_sweep.objectives.core import build_objective
from distill_sweep.procedures.causal_lm_loss import distill_loss
from distill_sweep.students import BuildInputs
from distill_sweep.students.base import is_checkpointed, student_type
from distill_sweep.students.fresh_settings import FreshSettings
from distill_sweep.students.truncated_settings import TruncatedSettings

IGNORE = -100
KINDS = {"truncated": (tiny_llama, TruncatedSettings(num_layers=2)),
         "fresh": (tiny_gpt2, FreshSettings(num_layers=2, hidden_size=16, num_attention_heads=2, intermediate_size=32))}


def build(kind: str, on: bool):
    make, settings = KINDS[kind]
    teacher = make()
    for p in teacher.parameters():
        p.requires_grad_(False)
    settings = type(settings)(**{**settings.__dict__, "gradient_checkpointing": on})
    student_kind = student_type(kind)
    arch = student_kind.describe(settings, teacher.config)
    torch.manual_seed(0)
    student = student_kind.build(settings, BuildInputs(arch=arch, teacher=teacher, init=StudentInit(
        "bottom", "bottom", [1, 2], [(1, 1), (2, 2)]), num_labels=2, label_names=[]))
    return teacher, student.train()


def batch() -> dict[str, torch.Tensor]:
    ids = torch.tensor([[3, 7, 9, 11, 4, 8], [5, 6, 2, 1, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    labels = torch.tensor([[IGNORE, 9, 11, 4, 8, IGNORE], [6, 2, 1, IGNORE, IGNORE, IGNORE]])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "idx": torch.tensor([0, 1])}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_checkpointing_is_on_when_set_and_recomputes_every_layer_in_the_backward(kind):
    for on in (False, True):
        teacher, student = build(kind, on)
        assert is_checkpointed(student) is on
        calls = [0]
        for layer in family_of_model(student).layers(student):  # a module inside each checkpointed layer
            layer.mlp.register_forward_pre_hook(lambda *_, calls=calls: calls.__setitem__(0, calls[0] + 1))
        loss, _ = distill_loss(student, teacher, None, 1.0, None, chunk=4)(batch())
        forward = calls[0]
        loss.backward()
        assert forward == 2 and calls[0] == (4 if on else 2)  # 2 layers, run again in the backward when on


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_one_steps_gradients_equal_those_without_checkpointing(kind):
    grads, values = {}, {}
    for on in (False, True):
        teacher, student = build(kind, on)
        terms = build_objective(parse_objective({"name": "x", "stages": ["intermediate"],
                                                 "terms": {"fkl": {"weight": 1.0, "temperature": 2.0},
                                                           "hid_seq": 0.5}}),
                                student_config=student.config, teacher_config=teacher.config,
                                layer_map=[(1, 1), (2, 2)], train_labels=None, num_labels=2)
        torch.manual_seed(7)  # the same dropout draws (GPT-2's) in both runs
        loss, _ = distill_loss(student, teacher, terms, 0.5, None, chunk=4)(batch())
        params = list(student.parameters()) + list(terms.parameters())
        values[on], grads[on] = loss.detach(), torch.autograd.grad(loss, params)
    torch.testing.assert_close(values[True], values[False], rtol=0, atol=0)
    for a, b in zip(grads[False], grads[True], strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
    assert any(float(g.abs().max()) > 0 for g in grads[True])
