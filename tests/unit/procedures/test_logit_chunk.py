"""procedure.logit_chunk through causal_lm's loss (procedures/causal_lm_loss.py `distill_loss`): the objective's
next-token and hidden-state terms plus ce_weight x CE, made a chunk of positions at a time, equal the loss on whole
logits in value, parts and every student gradient; and the setting's default and range."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_llama

from distill_sweep.config.parse import parse
from distill_sweep.errors import ConfigError
from distill_sweep.objectives import parse_objective
from distill_sweep.objectives.core import build_objective
from distill_sweep.procedures.causal_lm_loss import distill_loss
from distill_sweep.procedures.causal_lm_settings import CausalLMSettings

IGNORE = -100


def batch() -> dict[str, torch.Tensor]:
    ids = torch.tensor([[3, 7, 9, 11, 4, 8], [5, 6, 2, 1, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    labels = torch.tensor([[IGNORE, 9, 11, 4, 8, IGNORE], [6, 2, 1, IGNORE, IGNORE, IGNORE]])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels, "idx": torch.tensor([0, 1])}


@pytest.mark.parametrize("terms", [{"fkl": {"weight": 1.0, "temperature": 2.0}, "hid_seq": 0.5}, None],
                         ids=["fkl_hid_seq_ce", "ce_only"])
def test_chunked_loss_equals_whole_logits(terms):
    teacher, student = tiny_llama(), tiny_llama(layers=2)
    torch.manual_seed(3)
    for p in teacher.parameters():
        p.data.add_(torch.randn_like(p) * 0.3)
        p.requires_grad_(False)
    objective = None if terms is None else build_objective(
        parse_objective({"name": "x", "stages": ["intermediate"], "terms": terms}), student_config=student.config,
        teacher_config=teacher.config, layer_map=[(1, 2), (2, 4)], train_labels=None, num_labels=2)
    params = list(student.parameters()) + ([] if objective is None else list(objective.parameters()))
    out = {}
    for chunk in (0, 3):
        loss, parts = distill_loss(student, teacher, objective, 0.5, None, chunk=chunk)(batch())
        out[chunk] = loss, parts, torch.autograd.grad(loss, params)
    (v0, p0, g0), (v1, p1, g1) = out[0], out[3]
    torch.testing.assert_close(v1, v0, rtol=1e-5, atol=1e-7)
    assert p1.keys() == p0.keys() and "ce" in p1
    assert [p1[k] for k in p1] == pytest.approx([p0[k] for k in p1], rel=1e-5)
    for a, b in zip(g0, g1, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-7)


def test_logit_chunk_defaults_to_a_gpu_size_and_refuses_a_negative():
    assert parse(CausalLMSettings, {"name": "causal_lm"}, "procedure").logit_chunk == 1024
    assert parse(CausalLMSettings, {"name": "causal_lm", "logit_chunk": 0}, "procedure").logit_chunk == 0  # off: all at once
    with pytest.raises(ConfigError, match="procedure.logit_chunk"):
        parse(CausalLMSettings, {"name": "causal_lm", "logit_chunk": -1}, "procedure")
