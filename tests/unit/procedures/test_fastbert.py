"""FastBERT: exits, the self-distillation loss by hand, FLOPs by hand, the procedure on the toy task."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import FAST, compose_cfg
from transformers import BertConfig, BertForSequenceClassification

from distill_sweep.errors import ConfigError
from distill_sweep.job.prepare import prepare
from distill_sweep.students.early_exit import (
    EarlyExitModel,
    exit_layers,
    flops_to_exit,
    self_distillation_loss,
    uncertainty,
)


def tiny_model(layers: int = 3) -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, num_labels=3)
    return BertForSequenceClassification(config).eval()


BATCH = {"input_ids": torch.tensor([[2, 5, 7, 9, 0], [2, 6, 8, 0, 0], [2, 11, 3, 4, 12]]),
         "attention_mask": torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])}


def test_uncertainty_and_exit_rule_by_hand() -> None:
    # two classes: p = (0.9, 0.1) -> H = -(0.9 ln 0.9 + 0.1 ln 0.1) = 0.325083, / ln 2 = 0.468996
    z = torch.tensor([[math.log(9.0), 0.0]])
    assert float(uncertainty(z)) == pytest.approx(0.468996, abs=1e-6)
    # layer 1 uncertain (uniform, u = 1), layer 2 at u = 0.469, layer 3 = the last
    logits = torch.stack([torch.zeros(1, 2), z, torch.tensor([[5.0, -5.0]])])
    assert exit_layers(logits, 0.5).tolist() == [2]
    assert exit_layers(logits, 0.4).tolist() == [3]  # nothing confident enough: the last layer
    assert exit_layers(logits, 1.0).tolist() == [1]
    assert exit_layers(logits, 0.0).tolist() == [3]


def test_speed_zero_is_the_full_model_and_speed_never_raises_the_exit_layer() -> None:
    model = tiny_model()
    early = EarlyExitModel(model, width=8, heads=2, speed=0.0).eval()
    with torch.no_grad():
        full = model(**BATCH).logits
        assert torch.equal(early(**BATCH).logits, full)  # speed 0: every sample reaches the last layer
        logits = torch.stack(early.all_logits(BATCH))
    means = [float(exit_layers(logits, s).float().mean()) for s in (0.0, 0.2, 0.5, 0.8, 0.95, 1.0)]
    assert all(a >= b for a, b in zip(means, means[1:])) and means[-1] == 1.0


def test_self_distillation_loss_by_hand() -> None:
    last = torch.tensor([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0]])
    first = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    second = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.5, 2.0]])
    p_t = torch.softmax(last, -1)

    def kl(z: torch.Tensor) -> float:  # KL(p_t || p_s) per row, then the batch mean
        p_s = torch.softmax(z, -1)
        rows = [sum(p_t[b, c] * math.log(p_t[b, c] / p_s[b, c]) for c in range(3)) for b in range(2)]
        return float(sum(rows) / 2)

    expected = kl(first) + kl(second)  # sum over the branches; the last exit teaches, it is not a student
    assert float(self_distillation_loss([first, second, last])) == pytest.approx(expected, rel=1e-6)


def test_only_the_branches_learn() -> None:
    early = EarlyExitModel(tiny_model(), width=8, heads=2).train()
    assert not early.model.training  # backbone frozen in eval mode (no dropout) even in training
    loss = self_distillation_loss(early.all_logits(BATCH))
    loss.backward()
    assert all(p.grad is None for p in early.model.parameters())
    assert all(p.grad is not None for p in early.branches.parameters())


def test_flops_by_hand() -> None:
    config = BertConfig(hidden_size=16, num_hidden_layers=3, intermediate_size=32, num_labels=3)
    n, d, f, w, c = 5, 16, 32, 8, 3
    layer = 4 * n * d * d + 2 * n * n * d + 2 * n * d * f
    branch = n * d * w + (4 * n * w * w + 2 * n * n * w) + w * w + w * c
    head = d * d + d * c
    assert flops_to_exit(n, 1, config, w) == 2 * (layer + branch)
    assert flops_to_exit(n, 3, config, w) == 2 * (3 * layer + 2 * branch + head)


def test_a_fastbert_teacher_head_is_a_branch_that_alone_learns_the_labels() -> None:
    model = tiny_model()
    own = EarlyExitModel(model, width=8, heads=2)
    assert own.head is None and torch.equal(own.all_logits(BATCH)[-1], model(**BATCH).logits)
    early = EarlyExitModel(tiny_model(), width=8, heads=2, teacher_head="fastbert").train()
    assert type(early.head) is type(early.branches[0]) and early.head is not early.branches[-1]
    last = early.all_logits(BATCH)[-1]
    assert torch.equal(last, early.last_logits(BATCH)) and not torch.allclose(last, model(**BATCH).logits)
    torch.nn.functional.cross_entropy(early.last_logits(BATCH), torch.tensor([0, 1, 2])).backward()
    assert all(p.grad is not None for p in early.head.parameters())
    assert all(p.grad is None for p in [*early.model.parameters(), *early.branches.parameters()])
    # its cost at the last exit is a branch's, not the model's pooler and classifier
    config = BertConfig(hidden_size=16, num_hidden_layers=3, intermediate_size=32, num_labels=3)
    n, d, f, w, c = 5, 16, 32, 8, 3
    layer = 4 * n * d * d + 2 * n * n * d + 2 * n * d * f
    branch = n * d * w + (4 * n * w * w + 2 * n * n * w) + w * w + w * c
    assert flops_to_exit(n, 3, config, w, fastbert_head=True) == 2 * (3 * layer + 3 * branch)


def test_dropout_while_the_branches_learn_only_when_asked() -> None:
    quiet = EarlyExitModel(tiny_model(), width=8, heads=2).train()  # the default: no dropout anywhere
    assert not quiet.model.training and quiet.branches[0].attn.dropout == 0.0
    assert all(torch.equal(a, b) for a, b in zip(quiet.all_logits(BATCH), quiet.all_logits(BATCH), strict=True))
    noisy = EarlyExitModel(tiny_model(), width=8, heads=2, teacher_head="fastbert", dropout=True).train()
    # FastBERT's code: the frozen backbone in train mode (BERT's dropout 0.1), the branches' attention dropout
    # at the backbone's attention_probs_dropout_prob
    assert noisy.model.training and noisy.branches[0].attn.dropout == noisy.head.attn.dropout == 0.1
    first, second = noisy.all_logits(BATCH), noisy.all_logits(BATCH)
    assert not any(torch.equal(a, b) for a, b in zip(first, second, strict=True))  # every exit, the teacher's too
    hidden, valid = torch.randn(3, 5, 16), BATCH["attention_mask"].bool()
    assert not torch.equal(noisy.branches[0](hidden, valid), noisy.branches[0](hidden, valid))  # the branch's own
    noisy.eval()  # evaluation runs without dropout
    assert not noisy.model.training
    assert all(torch.equal(a, b) for a, b in zip(noisy.all_logits(BATCH), noisy.all_logits(BATCH), strict=True))
    loss = self_distillation_loss(noisy.train().all_logits(BATCH))
    loss.backward()  # the backbone stays frozen in train mode
    assert all(p.grad is None for p in [*noisy.model.parameters(), *noisy.head.parameters()])


def test_bad_speeds_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"procedure.speeds=\[0.5, 1.5\]: every speed must be in \[0, 1\]"):
        prepare(compose_cfg([*FAST, "procedure=fastbert", "procedure.speeds=[0.5,1.5]"]))
    with pytest.raises(ConfigError, match="procedure.eval_speed=-0.1: must be >= 0.0"):
        prepare(compose_cfg([*FAST, "procedure=fastbert", "procedure.eval_speed=-0.1"]))


def test_regression_task_is_refused() -> None:
    with pytest.raises(ConfigError, match="procedure=fastbert exits on the entropy .* task=stsb is a regression task"):
        prepare(compose_cfg(["procedure=fastbert", "task=stsb", "teacher=tiny", "logger=none"]))
