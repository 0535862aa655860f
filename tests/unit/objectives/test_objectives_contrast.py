"""Hid-CLS-Contrast: hand-worked NCE and InfoNCE values, memory-bank updates, negative sampling."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from distill_sweep.models.capture import Features
from distill_sweep.objectives.contrastive import NCE_EPS
from distill_sweep.objectives.core import build_objective

# Tiny tensors: one intra-op thread (conftest.one_thread).
pytestmark = pytest.mark.usefixtures("one_thread")


def arch(hidden: int, layers: int = 1) -> SimpleNamespace:
    return SimpleNamespace(hidden_size=hidden, num_attention_heads=1, num_hidden_layers=layers)


def contrast(
    labels: torch.Tensor, *, k: int = 1, temp: float = 0.5, loss: str = "nce", d: int = 2, dim: int = 2
):
    cfg = {
        "name": "hid_cls_contrast",
        "stages": ["intermediate", "prediction"],
        "terms": {"hid_cls_contrast": {"weight": 1.0, "dim": dim, "temperature": temp, "momentum": 0.5,
                                       "num_negatives": k, "loss": loss}},
        "alpha": 0.5,
        "temperature": 2.0,
        "reference_compat": False,
    }
    obj = build_objective(
        cfg,
        student_config=arch(d),
        teacher_config=arch(d),
        layer_map=[(1, 1)],
        train_labels=labels,
        num_labels=int(labels.max()) + 1 if labels.numel() else 2,
    )
    return obj, obj.terms["hid_cls_contrast"]


def cls_features(cls0: list[list[float]], seq: int = 3) -> Features:
    """Hidden states whose embedding-output [CLS] rows are ``cls0``; everything else zero."""
    b = len(cls0)
    h0 = torch.zeros(b, seq, 2)
    h0[:, 0] = torch.tensor(cls0)
    return Features(
        logits=torch.zeros(b, 2),
        hidden_states=(h0, torch.zeros(b, seq, 2)),
        qkv={},
        num_heads=1,
        head_dim=2,
        scaling=1.0,
    )


def pick_first_two(term) -> None:
    """Both embeddings read the embedding-output [CLS] (first 2 of the 4 concatenated dims), no bias."""
    with torch.no_grad():
        for lin in (term.embed_s, term.embed_t):
            lin.weight.zero_()
            lin.weight[0, 0] = lin.weight[1, 1] = 1.0
            lin.bias.zero_()


def nce_half(out: list[float], n: int) -> float:
    k = len(out) - 1
    z = sum(out) / len(out) * n
    p = [o / z for o in out]
    noise = k / n
    return -(
        math.log(p[0] / (p[0] + noise + NCE_EPS))
        + sum(math.log(noise / (x + noise + NCE_EPS)) for x in p[1:])
    )


def test_nce_hand_value_and_bank_update_only_in_training() -> None:
    obj, term = contrast(torch.tensor([0, 1]))  # two training examples: example 0's only negative is 1
    pick_first_two(term)
    with torch.no_grad():
        term.bank_s.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
        term.bank_t.copy_(torch.tensor([[0.0, 1.0], [0.6, 0.8]]))
    s, t = cls_features([[3.0, 4.0]]), cls_features([[1.0, 0.0]])  # f_s = (0.6, 0.8), f_t = (1, 0)
    batch = {"attention_mask": torch.ones(1, 3).long(), "idx": torch.tensor([0]), "labels": torch.tensor([0])}

    bank_before = (term.bank_s.clone(), term.bank_t.clone())
    obj.eval()
    obj(s, t, batch)
    assert torch.equal(term.bank_s, bank_before[0]) and torch.equal(term.bank_t, bank_before[1])
    assert float(term.z[0]) < 0  # the normalisers are fixed only by a training batch

    obj.train()
    loss, _ = obj(s, t, batch)
    # student anchor vs teacher bank rows (0, 1): <f_s, (0, 1)> = 0.8, <f_s, (0.6, 0.8)> = 1.0
    # teacher anchor vs student bank rows (0, 1): <f_t, (1, 0)> = 1, <f_t, (0, 1)> = 0;  tau = 0.5, N = 2
    # the two halves are averaged (CRD / CoDIR), not summed
    half_s = nce_half([math.exp(0.8 / 0.5), math.exp(1.0 / 0.5)], 2)
    half_t = nce_half([math.exp(2.0), 1.0], 2)
    expect = (half_s + half_t) / 2
    assert loss.item() == pytest.approx(expect, rel=1e-5)
    # momentum 0.5 update of row 0 only, renormalised
    s0 = torch.tensor([0.8, 0.4]) / math.hypot(0.8, 0.4)
    t0 = torch.tensor([0.5, 0.5]) / math.hypot(0.5, 0.5)
    torch.testing.assert_close(term.bank_s[0], s0)
    torch.testing.assert_close(term.bank_t[0], t0)
    torch.testing.assert_close(term.bank_s[1], bank_before[0][1])
    torch.testing.assert_close(term.bank_t[1], bank_before[1][1])
    assert float(term.z[0]) == pytest.approx(math.exp(1.6) + math.exp(2.0), rel=1e-5)

    # eval batches may carry indices of another split: the bank is neither read at idx nor written
    obj.eval()
    after = term.bank_t.clone()
    val = obj(s, t, {**batch, "idx": torch.tensor([12345])})[0]
    assert torch.isfinite(val) and torch.equal(term.bank_t, after)


def test_infonce_hand_value() -> None:
    obj, term = contrast(torch.tensor([0, 1]), loss="infonce")
    pick_first_two(term)
    with torch.no_grad():
        term.bank_t.copy_(torch.tensor([[0.0, 1.0], [0.6, 0.8]]))
    s, t = cls_features([[3.0, 4.0]]), cls_features([[1.0, 0.0]])
    loss, _ = obj.train()(s, t, {"attention_mask": torch.ones(1, 3).long(), "idx": torch.tensor([0])})
    # logits [<f_s, f_t>, <f_s, bank_t[1]>] / tau = [0.6, 1.0] / 0.5; target 0
    expect = -math.log(math.exp(1.2) / (math.exp(1.2) + math.exp(2.0)))
    assert loss.item() == pytest.approx(expect, rel=1e-5)


def test_negatives_have_a_different_label() -> None:
    torch.manual_seed(0)
    labels = torch.randint(0, 3, (60,))
    _, term = contrast(labels, k=25)
    anchors = torch.arange(60)
    neg = term.sample_negatives(labels[anchors], anchors, 60)
    assert neg.shape == (60, 25)
    assert (labels[neg] != labels[anchors, None]).all()
    assert set(neg.flatten().tolist()) == set(range(60))  # every example can be drawn
    # without class labels (regression): anything but the anchor itself
    _, reg = contrast(torch.rand(10), k=40)
    own = torch.arange(10)
    neg = reg.sample_negatives(None, own, 10)
    assert (neg != own[:, None]).all() and neg.min() >= 0 and neg.max() < 10


def test_padding_does_not_matter_and_gradients_reach_both_projections() -> None:
    torch.manual_seed(0)
    obj, term = contrast(torch.tensor([0, 1, 0, 1, 1]), k=2, d=2, dim=4)
    g = torch.Generator().manual_seed(1)
    hs = [torch.randn(2, 4, 2, generator=g, requires_grad=True) for _ in range(2)]
    ht = [torch.randn(2, 4, 2, generator=g) for _ in range(2)]
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    batch = {"attention_mask": mask, "idx": torch.tensor([1, 3])}
    s = Features(torch.zeros(2, 2), tuple(hs), {}, 1, 2, 1.0)
    t = Features(torch.zeros(2, 2), tuple(ht), {}, 1, 2, 1.0)
    padded = [torch.cat([h, torch.full((2, 3, 2), 7.0)], 1) for h in hs]
    s2 = Features(torch.zeros(2, 2), tuple(padded), {}, 1, 2, 1.0)
    t2 = Features(
        torch.zeros(2, 2), tuple(torch.cat([h, torch.zeros(2, 3, 2)], 1) for h in ht), {}, 1, 2, 1.0
    )
    long_batch = {"attention_mask": torch.cat([mask, torch.zeros(2, 3).long()], 1), "idx": batch["idx"]}
    obj.eval()  # no bank update between the two calls
    torch.manual_seed(5)
    a = obj(s, t, batch)[0]
    torch.manual_seed(5)
    b = obj(s2, t2, long_batch)[0]
    assert a.item() == pytest.approx(b.item(), rel=1e-6)
    obj.train()
    loss = obj(s, t, batch)[0]
    loss.backward()
    assert all(h.grad is not None and torch.isfinite(h.grad).all() for h in hs)
    assert term.embed_s.weight.grad.abs().sum() > 0 and term.embed_t.weight.grad.abs().sum() > 0


def test_training_batch_needs_valid_indices() -> None:
    obj, _ = contrast(torch.tensor([0, 1]))
    s, t = cls_features([[1.0, 0.0]]), cls_features([[0.0, 1.0]])
    with pytest.raises(IndexError):
        obj.train()(s, t, {"attention_mask": torch.ones(1, 3).long(), "idx": torch.tensor([2])})
    with pytest.raises(KeyError):
        obj.train()(s, t, {"attention_mask": torch.ones(1, 3).long()})
