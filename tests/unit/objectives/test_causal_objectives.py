"""Next-token terms for causal LMs (objectives/causal.py) against hand-worked cases, an independent
implementation (values and gradients, with padding and a causal mask) and TRL's generalized_jsd_loss formula."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from tiny_models import tiny_llama

from distill_sweep.errors import ConfigError
from distill_sweep.models.capture import Features
from distill_sweep.objectives import parse_objective
from distill_sweep.objectives.causal import IGNORE, causal_kd
from distill_sweep.objectives.core import build_objective

KINDS = ["fkl", "rkl", "gjsd"]


# ------------------------------------------------------------------------------------------- by hand
def test_hand_worked_two_token_case():
    """Teacher p = (1/2, 1/2), student q = (3/4, 1/4) (logits ln 3, 0), T = 1, one predicting position."""
    s = torch.tensor([[[math.log(3.0), 0.0]]], requires_grad=True)
    t = torch.tensor([[[0.0, 0.0]]])
    labels = torch.tensor([[0]])
    fkl = 0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25)
    rkl = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    m = (0.625, 0.375)
    jsd = 0.5 * (0.5 * math.log(0.5 / m[0]) + 0.5 * math.log(0.5 / m[1])) \
        + 0.5 * (0.75 * math.log(0.75 / m[0]) + 0.25 * math.log(0.25 / m[1]))
    assert causal_kd(s, t, labels, kind="fkl").item() == pytest.approx(fkl, abs=1e-6)
    assert causal_kd(s, t, labels, kind="rkl").item() == pytest.approx(rkl, abs=1e-6)
    assert causal_kd(s, t, labels, kind="gjsd", beta=0.5).item() == pytest.approx(jsd, abs=1e-6)
    # d KL(p||q) / d z_s = q - p = (1/4, -1/4)
    causal_kd(s, t, labels, kind="fkl").backward()
    torch.testing.assert_close(s.grad, torch.tensor([[[0.25, -0.25]]]))
    # temperature 2: p stays uniform, q = softmax((ln 3)/2, 0) = (sqrt3, 1)/(sqrt3 + 1); loss x 4
    q = (math.sqrt(3) / (math.sqrt(3) + 1), 1 / (math.sqrt(3) + 1))
    fkl_t2 = 4 * (0.5 * math.log(0.5 / q[0]) + 0.5 * math.log(0.5 / q[1]))
    assert causal_kd(s, t, labels, kind="fkl", temperature=2.0).item() == pytest.approx(fkl_t2, abs=1e-6)


def test_beta_ends_are_forward_and_reverse_kl_and_nothing_predicted_is_zero():
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(2, 3, 5, generator=g), torch.randn(2, 3, 5, generator=g)
    labels = torch.tensor([[1, 2, IGNORE], [3, IGNORE, IGNORE]])
    for beta, kind in ((0.0, "fkl"), (1.0, "rkl")):
        torch.testing.assert_close(causal_kd(s, t, labels, kind="gjsd", beta=beta), causal_kd(s, t, labels, kind=kind))
    s.requires_grad_(True)
    none = causal_kd(s, t, torch.full((2, 3), IGNORE), kind="fkl")
    assert none.item() == 0.0
    none.backward()  # still a graph
    assert torch.count_nonzero(s.grad) == 0


# ------------------------------------------------------------------------------ independent implementation
def reference(s_logits, t_logits, labels, kind, temperature, beta):
    """Row by row in float64 with probabilities (not log-softmax), the divergence from its definition."""
    total, count = 0.0, 0
    for b in range(labels.shape[0]):
        for i in range(labels.shape[1]):
            if int(labels[b, i]) == IGNORE:
                continue
            p = torch.exp(t_logits[b, i].double() / temperature)
            p = p / p.sum()
            q = torch.exp(s_logits[b, i].double() / temperature)
            q = q / q.sum()
            if kind == "fkl" or (kind == "gjsd" and beta == 0):
                d = (p * torch.log(p / q)).sum()
            elif kind == "rkl" or (kind == "gjsd" and beta == 1):
                d = (q * torch.log(q / p)).sum()
            else:
                m = beta * p + (1 - beta) * q
                d = beta * (p * torch.log(p / m)).sum() + (1 - beta) * (q * torch.log(q / m)).sum()
            total = total + d
            count += 1
    return total / count * temperature**2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("temperature,beta", [(1.0, 0.5), (2.0, 0.1), (0.5, 0.9)])
def test_values_and_gradients_match_an_independent_implementation(kind, temperature, beta):
    g = torch.Generator().manual_seed(1)
    s = (torch.randn(3, 4, 7, generator=g) * 2).requires_grad_(True)
    t = torch.randn(3, 4, 7, generator=g) * 2
    labels = torch.tensor([[1, 2, 3, IGNORE], [4, IGNORE, IGNORE, IGNORE], [IGNORE, 5, 6, 0]])  # padding, prompts
    ours = causal_kd(s, t, labels, kind=kind, temperature=temperature, beta=beta)
    (g_ours,) = torch.autograd.grad(ours, s)
    s64 = s.detach().double().requires_grad_(True)
    ref = reference(s64, t.double(), labels, kind, temperature, beta)
    (g_ref,) = torch.autograd.grad(ref, s64)
    assert ours.item() == pytest.approx(ref.item(), rel=1e-5, abs=1e-6)
    torch.testing.assert_close(g_ours.double(), g_ref, rtol=1e-4, atol=1e-6)
    assert torch.count_nonzero(g_ours[labels == IGNORE]) == 0  # ignored positions get no gradient


def trl_generalized_jsd(student_logits, teacher_logits, labels, beta, temperature):
    """TRL GKDTrainer.generalized_jsd_loss's formula (batchmean over labels != -100), restated with F.kl_div:
    beta 0 -> KL(p_T||p_S), 1 -> KL(p_S||p_T), else beta KL(p_T||M) + (1-beta) KL(p_S||M) with log M a
    logsumexp of the two weighted log-distributions."""
    ls = F.log_softmax(student_logits / temperature, -1)
    lt = F.log_softmax(teacher_logits / temperature, -1)
    if beta == 0:
        jsd = F.kl_div(ls, lt, reduction="none", log_target=True)
    elif beta == 1:
        jsd = F.kl_div(lt, ls, reduction="none", log_target=True)
    else:
        b = torch.tensor(beta, dtype=ls.dtype)
        lm = torch.logsumexp(torch.stack([ls + torch.log(1 - b), lt + torch.log(b)]), dim=0)
        jsd = b * F.kl_div(lm, lt, reduction="none", log_target=True) \
            + (1 - b) * F.kl_div(lm, ls, reduction="none", log_target=True)
    mask = labels != -100
    return jsd[mask].sum() / mask.sum()


@pytest.mark.parametrize("beta", [0.0, 0.3, 0.5, 1.0])
def test_gjsd_is_trls_generalized_jsd_times_t_squared(beta):
    g = torch.Generator().manual_seed(2)
    s, t = torch.randn(2, 5, 11, generator=g), torch.randn(2, 5, 11, generator=g)
    labels = torch.tensor([[IGNORE, 1, 2, 3, IGNORE], [5, 6, IGNORE, IGNORE, IGNORE]])
    for temperature in (1.0, 2.0):
        ours = causal_kd(s, t, labels, kind="gjsd", beta=beta, temperature=temperature)
        torch.testing.assert_close(ours, trl_generalized_jsd(s, t, labels, beta, temperature) * temperature**2)


def test_top_k_restricts_both_distributions_to_the_teachers_tokens():
    g = torch.Generator().manual_seed(3)
    s, t = torch.randn(1, 3, 9, generator=g), torch.randn(1, 3, 9, generator=g)
    labels = torch.tensor([[0, 1, IGNORE]])
    values, indices = t.topk(4, dim=-1)
    ours = causal_kd(s, (values, indices), labels, kind="fkl")
    # by hand: renormalise both over the teacher's 4 tokens, then KL
    rows = []
    for i in range(2):
        p = torch.softmax(values[0, i], -1)
        q = torch.softmax(s[0, i, indices[0, i]], -1)
        rows.append((p * (p / q).log()).sum())
    torch.testing.assert_close(ours, torch.stack(rows).mean())
    full = causal_kd(s, t, labels, kind="fkl")  # k = V is the full divergence
    torch.testing.assert_close(causal_kd(s, t.topk(9, dim=-1), labels, kind="fkl"), full)


# ---------------------------------------------------------------------- through a real decoder, padded
def test_padded_batch_through_a_causal_lm_equals_its_unpadded_sequences():
    """Right padding with a causal mask: the batch loss is the token-weighted mean of each sequence's own loss
    computed alone, and the student's gradient is the same; what sits in the pad positions does not matter."""
    teacher, student = tiny_llama(), tiny_llama(layers=2)
    torch.manual_seed(5)
    for p in student.parameters():
        p.data.add_(torch.randn_like(p) * 0.02)
    seqs = [torch.tensor([3, 7, 9, 11, 4, 8]), torch.tensor([5, 6, 2])]
    width = max(len(x) for x in seqs)

    def batch(pad_id):
        ids = torch.full((2, width), pad_id)
        mask = torch.zeros(2, width, dtype=torch.long)
        labels = torch.full((2, width), IGNORE)
        for i, x in enumerate(seqs):
            ids[i, :len(x)], mask[i, :len(x)] = x, 1
            labels[i, :len(x) - 1] = x[1:]
        return ids, mask, labels

    def loss(ids, mask, labels, kind):
        with torch.no_grad():
            t = teacher(input_ids=ids, attention_mask=mask).logits
        return causal_kd(student(input_ids=ids, attention_mask=mask).logits, t, labels, kind=kind, temperature=2.0)

    params = list(student.parameters())
    for kind in KINDS:
        padded = loss(*batch(0), kind)
        g_padded = torch.autograd.grad(padded, params)
        other_pad = loss(*batch(17), kind)
        torch.testing.assert_close(other_pad, padded, rtol=1e-5, atol=1e-6)
        parts, counts = [], []
        for x in seqs:
            ids = x[None]
            labels = torch.full_like(ids, IGNORE)
            labels[0, :-1] = x[1:]
            parts.append(loss(ids, torch.ones_like(ids), labels, kind))
            counts.append(len(x) - 1)
        alone = sum(p * c for p, c in zip(parts, counts)) / sum(counts)
        torch.testing.assert_close(padded, alone, rtol=1e-5, atol=1e-6)
        g_alone = torch.autograd.grad(alone, params)
        for a, b in zip(g_padded, g_alone):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_terms_run_in_an_objective_and_are_refused_for_encoders():
    from transformers import BertConfig
    teacher = tiny_llama()
    objective = parse_objective({"name": "mix", "stages": ["intermediate"],
                                 "terms": {"gjsd": {"weight": 1.0, "beta": 0.2, "temperature": 2.0}, "fkl": 0.5}})
    terms = build_objective(objective, student_config=teacher.config, teacher_config=teacher.config,
                            layer_map=[(1, 1)], train_labels=None, num_labels=2)
    ids = torch.tensor([[1, 2, 3, 4]])
    labels = torch.tensor([[2, 3, 4, IGNORE]])
    feats = Features(logits=teacher(input_ids=ids).logits, hidden_states=None)
    total, parts = terms(feats, Features(logits=torch.randn(1, 4, 50), hidden_states=None),
                         {"input_ids": ids, "labels": labels})
    assert set(parts) == {"gjsd", "fkl"} and total.item() == pytest.approx(parts["gjsd"] + 0.5 * parts["fkl"], rel=1e-5)
    bert = BertConfig(hidden_size=32, num_attention_heads=4, num_hidden_layers=2)
    with pytest.raises(ConfigError, match="decoder LMs: the student is a bert model"):
        build_objective(objective, student_config=bert, teacher_config=teacher.config, layer_map=[(1, 1)],
                        train_labels=None, num_labels=2)


def test_hidden_terms_run_on_decoders_with_their_causal_mask():
    """fkl + hid_seq on a Llama teacher and a truncated student: the objective's own capture, gradients reach the
    student (and its projections), and what sits in the padded positions changes nothing."""
    from distill_sweep.models.inits import resolve_init
    from distill_sweep.students.base import BuildInputs
    from distill_sweep.students.truncated import build
    from distill_sweep.students.truncated_settings import TruncatedSettings

    teacher = tiny_llama()
    init = resolve_init("skip", 4, 2)
    student = build(TruncatedSettings(num_layers=2), BuildInputs(arch=None, teacher=teacher, init=init, num_labels=2,
                                                                 label_names=[]))
    objective = parse_objective({"name": "fkl_hid_seq", "stages": ["intermediate"],
                                 "terms": {"fkl": 1.0, "hid_seq": {"weight": 1.0, "projection": "linear"}}})
    terms = build_objective(objective, student_config=student.config, teacher_config=teacher.config,
                            layer_map=init.layer_map, train_labels=None, num_labels=2)

    def loss(pad_id):
        ids = torch.tensor([[3, 7, 9, 11, 4], [5, 6, 2, pad_id, pad_id]])
        mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
        labels = torch.tensor([[7, 9, 11, 4, IGNORE], [6, 2, IGNORE, IGNORE, IGNORE]])
        batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        with torch.no_grad():
            t = terms.features(teacher, batch, "teacher")
        return terms(terms.features(student, batch, "student"), t, batch)

    (total, parts), (other, _) = loss(0), loss(33)
    assert set(parts) == {"fkl", "hid_seq"} and parts["hid_seq"] > 0
    torch.testing.assert_close(total, other, rtol=1e-5, atol=1e-6)
    total.backward()
    assert all(p.grad is not None for p in terms.parameters())
    assert student.model.layers[0].mlp.down_proj.weight.grad.abs().sum() > 0
