"""The sparse-teacher estimators of the next-token terms (objectives/causal.py, `procedure.teacher_logits`) on a
hand-made distribution: `sampled`'s expected loss and gradient are full forward KL's (exactly, by enumerating every
draw), `top_k`'s gradient is not, `top_k_tail`'s loss and gradient worked by hand."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from distill_sweep.objectives.causal import IGNORE, causal_kd

P_T = [0.5, 0.3, 0.15, 0.05]  # the teacher's next-token distribution
Z_S = [0.2, -0.1, 0.4, 0.0]  # the student's logits
LABELS = torch.tensor([[0]])  # one predicting position


def softmax(z: list[float]) -> list[float]:
    e = [math.exp(v) for v in z]
    return [v / sum(e) for v in e]


def kl(p: list[float], q: list[float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q, strict=True) if a > 0)


def loss_and_grad(teacher, sparse: str, kind: str = "fkl") -> tuple[float, list[float]]:
    s = torch.tensor([[Z_S]], requires_grad=True)
    loss = causal_kd(s, teacher, LABELS, kind=kind, sparse=sparse)
    loss.backward()
    return loss.item(), s.grad[0, 0].tolist()


def entries(ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """What a store keeps for these ids: the teacher's log-probabilities of them and the ids, (1, 1, k)."""
    return torch.tensor([[[math.log(P_T[i]) for i in ids]]]), torch.tensor([[ids]])


def test_sampled_is_unbiased_for_forward_kl_and_top_k_is_not():
    p_s = softmax(Z_S)
    full_grad = [q - p for q, p in zip(p_s, P_T, strict=True)]  # d KL(p_T || p_S) / d z_S = p_S - p_T
    full_loss = kl(P_T, p_s)
    # the full-logits path itself gives these
    got_loss, got_grad = loss_and_grad(torch.tensor([[[math.log(p) for p in P_T]]]), "top_k")
    assert got_loss == pytest.approx(full_loss, abs=1e-6) and got_grad == pytest.approx(full_grad, abs=1e-6)
    # every ordered pair of k = 2 draws, weighted by its probability under the teacher
    mean_loss, mean_grad = 0.0, [0.0] * 4
    for draw in itertools.product(range(4), repeat=2):
        weight = P_T[draw[0]] * P_T[draw[1]]
        loss, grad = loss_and_grad(entries(list(draw)), "sampled")
        mean_loss += weight * loss
        mean_grad = [m + weight * g for m, g in zip(mean_grad, grad, strict=True)]
    assert mean_loss == pytest.approx(full_loss, abs=1e-6)
    assert mean_grad == pytest.approx(full_grad, abs=1e-6)
    # top_k (k = 2): both renormalised over tokens 0 and 1; by hand q' - p' there, nothing outside
    _, top_grad = loss_and_grad(entries([0, 1]), "top_k")
    q2 = softmax(Z_S[:2])
    assert top_grad == pytest.approx([q2[0] - 0.5 / 0.8, q2[1] - 0.3 / 0.8, 0.0, 0.0], abs=1e-6)
    # biased: off by 0.15-0.19 on every token (full KD pushes tokens 2 and 3 down by 0.17, top_k not at all)
    assert min(abs(a - b) for a, b in zip(top_grad, full_grad, strict=True)) > 0.1


def test_one_sampled_draw_set_is_the_mean_over_draws_of_the_log_ratio():
    """Draws (0, 0, 2): (1/3) [2 (log p_T(0) - log p_S(0)) + (log p_T(2) - log p_S(2))]; gradient p_S - counts/3."""
    p_s = softmax(Z_S)
    loss, grad = loss_and_grad(entries([0, 0, 2]), "sampled")
    assert loss == pytest.approx((2 * math.log(P_T[0] / p_s[0]) + math.log(P_T[2] / p_s[2])) / 3, abs=1e-6)
    assert grad == pytest.approx([p_s[0] - 2 / 3, p_s[1], p_s[2] - 1 / 3, p_s[3]], abs=1e-6)


def test_top_k_tail_by_hand():
    """k = 2: the teacher as (0.5, 0.3, tail 0.2), the student as (q0, q1, q2 + q3); the divergence of these
    three-class distributions. Forward KL's gradient: p_S - p_T on the k tokens (full KD's), and the teacher's tail
    0.2 shared over the others in the student's proportions: q_j - 0.2 q_j / (q2 + q3)."""
    q = softmax(Z_S)
    p3, q3 = [0.5, 0.3, 0.2], [q[0], q[1], q[2] + q[3]]
    loss, grad = loss_and_grad(entries([0, 1]), "top_k_tail")
    assert loss == pytest.approx(kl(p3, q3), abs=1e-6)
    tail = q[2] + q[3]
    assert grad == pytest.approx([q[0] - 0.5, q[1] - 0.3, q[2] - 0.2 * q[2] / tail, q[3] - 0.2 * q[3] / tail],
                                 abs=1e-6)
    assert loss_and_grad(entries([0, 1]), "top_k_tail", "rkl")[0] == pytest.approx(kl(q3, p3), abs=1e-6)
    m = [(a + b) / 2 for a, b in zip(p3, q3, strict=True)]
    jsd = 0.5 * kl(p3, m) + 0.5 * kl(q3, m)
    assert loss_and_grad(entries([0, 1]), "top_k_tail", "gjsd")[0] == pytest.approx(jsd, abs=1e-6)


@pytest.mark.parametrize("kind", ["fkl", "rkl", "gjsd"])
def test_top_k_at_k1_is_zero_whatever_the_student_which_is_why_it_is_refused(kind: str):
    """k = 1 under top_k: the teacher's one entry renormalised is (1.0,), the student's logit there renormalised over
    one id is log 1 = 0 too, so every divergence is sum 1 * (log 1 - log 1) = 0 and so is every gradient, for any
    student (procedure.teacher_logits=top_k with teacher_top_k=1 is refused before any work: settings.py)."""
    for z in (Z_S, [9.0, -9.0, 0.0, 3.0]):
        s = torch.tensor([[z]], requires_grad=True)
        loss = causal_kd(s, entries([0]), LABELS, kind=kind, sparse="top_k")
        loss.backward()
        assert loss.item() == 0.0
        assert s.grad[0, 0].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_top_k_tail_floors_a_tail_that_rounding_made_negative():
    """Stored float16 log-probabilities can sum to just over 1: the tail is then ~0 and the loss stays finite (the
    teacher's head renormalised: (0.6, 0.41) / 1.01)."""
    q = softmax(Z_S)
    values, ids = torch.tensor([[[math.log(0.6), math.log(0.41)]]]), torch.tensor([[[0, 1]]])
    s = torch.tensor([[Z_S]], requires_grad=True)
    loss = causal_kd(s, (values, ids), LABELS, kind="fkl", sparse="top_k_tail")
    head = [0.6 / 1.01, 0.41 / 1.01]
    by_hand = sum(p * math.log(p / b) for p, b in zip(head, q[:2], strict=True))
    assert loss.item() == pytest.approx(by_hand, abs=1e-5)
    loss.backward()
    assert torch.isfinite(s.grad).all()


def test_positions_without_a_target_are_left_out_of_every_estimator():
    """Two positions, the second IGNORE: the loss is the first position's alone, whatever the second holds."""
    s = torch.tensor([[Z_S, [5.0, -3.0, 0.0, 1.0]]])
    labels = torch.tensor([[0, IGNORE]])
    values = torch.tensor([[[math.log(0.5), math.log(0.3)], [0.0, -9.0]]])
    ids = torch.tensor([[[0, 1], [3, 3]]])
    for sparse in ("top_k", "top_k_tail", "sampled"):
        alone = causal_kd(s[:, :1], (values[:, :1], ids[:, :1]), labels[:, :1], kind="fkl", sparse=sparse)
        assert causal_kd(s, (values, ids), labels, kind="fkl", sparse=sparse).item() == pytest.approx(alone.item())


def test_estimators_at_t1_refuse_another_temperature_or_divergence():
    with pytest.raises(ValueError, match="T = 1, not T = 2.0"):
        causal_kd(torch.tensor([[Z_S]]), entries([0, 1]), LABELS, kind="fkl", temperature=2.0, sparse="top_k_tail")
    with pytest.raises(ValueError, match="forward KL only, not rkl"):
        causal_kd(torch.tensor([[Z_S]]), entries([0, 1]), LABELS, kind="rkl", sparse="sampled")


def test_top_k_full_by_hand_keeps_the_students_full_softmax():
    """top_k_full (DistillKit's top-k): the teacher renormalised over its k = 2 ids (0.5, 0.3) / 0.8 = (0.625, 0.375),
    the student's full softmax q read at those ids: loss sum_j p_j log(p_j / q_j), gradient q - p (p zero off the k),
    so the student's mass off the k is pushed down, unlike top_k; at k = 1 the loss is -log q_0, not 0."""
    q = softmax(Z_S)
    p = [0.625, 0.375]
    loss, grad = loss_and_grad(entries([0, 1]), "top_k_full")
    assert loss == pytest.approx(p[0] * math.log(p[0] / q[0]) + p[1] * math.log(p[1] / q[1]), abs=1e-6)
    assert grad == pytest.approx([q[0] - p[0], q[1] - p[1], q[2], q[3]], abs=1e-6)
    assert grad[2] > 0 and grad[3] > 0  # off the k: pushed down (top_k leaves them at 0)
    assert loss_and_grad(entries([0]), "top_k_full")[0] == pytest.approx(-math.log(q[0]), abs=1e-6)
    # T = 2: both at T, x T^2: p = softmax(log(0.5, 0.3) / 2), q = softmax(Z_S / 2) read at 0 and 1
    s = torch.tensor([[Z_S]], requires_grad=True)
    got = causal_kd(s, entries([0, 1]), LABELS, kind="fkl", temperature=2.0, sparse="top_k_full").item()
    p2 = softmax([math.log(0.5) / 2, math.log(0.3) / 2])
    q2 = softmax([z / 2 for z in Z_S])
    assert got == pytest.approx(4 * sum(a * math.log(a / b) for a, b in zip(p2, q2[:2], strict=False)), abs=1e-6)
