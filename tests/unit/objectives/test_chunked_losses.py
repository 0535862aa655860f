"""The next-token losses over chunks of positions (objectives/chunked.py, procedure.logit_chunk) against the same
terms on whole logits: value and gradient of every student parameter, for Llama (separate and tied head) and
GPT-2, a padded batch with ignored positions, T != 1, and a chunk that does not divide the rows; a hand-worked case;
and that no head ever makes more than a chunk of rows."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from tiny_models import tiny_gpt2, tiny_llama

from distill_sweep.models.capture import Features
from distill_sweep.models.lm_head import HeadLogits, forward_without_head
from distill_sweep.objectives.causal import IGNORE, SPARSE_KEYS, ForwardKL, GeneralizedJSD, ReverseKL
from distill_sweep.objectives.chunked import chunked_mean
from distill_sweep.objectives.inputs import LossInputs
from distill_sweep.objectives.shared_ids import first_ids
from distill_sweep.objectives.uld import StudentNLL

CHUNK = 3  # the batch below has 7 predicting rows: chunks of 3, 3, 1


class Spec:
    """What a term's constructor reads (TermSpec.settings)."""

    def __init__(self, temperature: float = 1.0, beta: float = 0.5) -> None:
        self.settings = type("S", (), {"temperature": temperature, "beta": beta})()


def batch() -> dict[str, torch.Tensor]:
    """Two right-padded rows with a prompt (ignored labels) and padding: 7 predicting positions."""
    ids = torch.tensor([[3, 7, 9, 11, 4, 8], [5, 6, 2, 1, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    labels = torch.tensor([[IGNORE, 9, 11, 4, 8, IGNORE], [6, 2, 1, IGNORE, IGNORE, IGNORE]])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


MODELS = {"llama": lambda: tiny_llama(layers=2), "llama_tied": lambda: tiny_llama(tied=True, layers=2),
          "gpt2": lambda: tiny_gpt2(layers=2)}


@pytest.fixture(scope="module", params=sorted(MODELS))
def pair(request):
    student = MODELS[request.param]()
    torch.manual_seed(1)
    for p in student.parameters():
        p.data.add_(torch.randn_like(p) * 0.05)
    teacher = MODELS[request.param]()
    torch.manual_seed(2)
    for p in teacher.parameters():
        p.data.add_(torch.randn_like(p) * 0.3)
        p.requires_grad_(False)
    return student, teacher  # eval mode: GPT-2's dropout would draw other masks in the two forwards


def whole(student, teacher, b):
    with torch.no_grad():
        t = Features(logits=teacher(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits,
                     hidden_states=None)
    s = Features(logits=student(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits,
                 hidden_states=None)
    return s, t


def chunked(student, teacher, b, chunk=CHUNK):
    with torch.no_grad():
        t = forward_without_head(teacher, b, hidden=False, chunk=chunk)
    return forward_without_head(student, b, hidden=False, chunk=chunk), t


def value_and_grads(term, s, t, b, params):
    value = term(LossInputs(s, t, b, layer_map=((1, 1),)))
    return value, torch.autograd.grad(value, params, allow_unused=True)


def assert_same(student, term, b, s_t_whole, s_t_chunked):
    params = [p for p in student.parameters() if p.requires_grad]
    v0, g0 = value_and_grads(term, *s_t_whole, b, params)
    v1, g1 = value_and_grads(term, *s_t_chunked, b, params)
    assert v0.item() > 0
    torch.testing.assert_close(v1, v0, rtol=1e-5, atol=1e-7)
    for (name, _), a, c in zip(student.named_parameters(), g0, g1, strict=True):
        assert (a is None) == (c is None), name
        if a is not None:
            torch.testing.assert_close(c, a, rtol=1e-4, atol=1e-7, msg=name)


# ----------------------------------------------------------------------------------- dense teacher logits
@pytest.mark.parametrize("term", [ForwardKL(Spec(2.0)), ReverseKL(Spec(0.5)), GeneralizedJSD(Spec(2.0, beta=0.3))],
                         ids=["fkl_T2", "rkl_T0.5", "gjsd_T2"])
def test_dense_terms_equal_unchunked(pair, term):
    student, teacher = pair
    b = batch()
    assert_same(student, term, b, whole(student, teacher, b), chunked(student, teacher, b))


def test_one_chunk_per_row_and_one_chunk_for_all_equal_unchunked(pair):
    student, teacher = pair
    b = batch()
    for chunk in (1, 100):
        assert_same(student, ForwardKL(Spec(2.0)), b, whole(student, teacher, b), chunked(student, teacher, b, chunk))


# ----------------------------------------------------------------------------------------- sparse teachers
def sparse_entries(teacher, b, mode, k=4):
    """What the teacher-output store holds per position: log-probabilities (T = 1) and ids, top-k or k draws."""
    with torch.no_grad():
        logp = F.log_softmax(teacher(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits, -1)
    if mode == "sampled":
        g = torch.Generator().manual_seed(0)
        ids = torch.multinomial(logp.exp().reshape(-1, logp.shape[-1]), k, replacement=True, generator=g)
        ids = ids.reshape(*logp.shape[:2], k)
        return logp.gather(-1, ids), ids
    return logp.topk(k, dim=-1)


@pytest.mark.parametrize("mode,term", [("top_k", ForwardKL(Spec(2.0))), ("top_k", GeneralizedJSD(Spec(2.0, 0.3))),
                                       ("top_k_full", ForwardKL(Spec(2.0))), ("top_k_tail", ReverseKL(Spec())),
                                       ("sampled", ForwardKL(Spec()))],
                         ids=["top_k_fkl", "top_k_gjsd", "top_k_full", "top_k_tail_rkl", "sampled"])
def test_sparse_modes_equal_unchunked(pair, mode, term):
    student, teacher = pair
    b = batch()
    values, indices = SPARSE_KEYS[mode]
    b[values], b[indices] = sparse_entries(teacher, b, mode)
    none = Features(logits=None, hidden_states=None)
    s_whole, _ = whole(student, teacher, b)
    s_chunked, _ = chunked(student, teacher, b)
    assert_same(student, term, b, (s_whole, none), (s_chunked, none))


# ------------------------------------------------------------------------------------------ cross-entropy
def test_nll_term_and_cross_entropy_equal_unchunked(pair):
    student, teacher = pair
    b = batch()
    assert_same(student, StudentNLL(None), b, whole(student, teacher, b), chunked(student, teacher, b))


def test_shared_ids_cut_equals_unchunked(pair):
    student, teacher = pair
    b = batch()
    cut = [tuple(first_ids(f, 30) for f in fs) for fs in (whole(student, teacher, b), chunked(student, teacher, b))]
    assert cut[1][0].head.rows(cut[1][0].head.hidden[0, :2]).shape[-1] == 30
    assert_same(student, ForwardKL(Spec(2.0)), b, *cut)


# ----------------------------------------------------------------------------------------------- by hand
def test_hand_worked_forward_kl_in_chunks_of_one():
    """D = 1, V = 2. The student's head W = (ln 3, 0)^T: row a (h = 1) has logits (ln 3, 0), q = (3/4, 1/4); row b
    (h = 0) has (0, 0), q = (1/2, 1/2); row c (h = 5) is ignored. The teacher's head is zero: p = (1/2, 1/2).
    fkl = mean over a, b of KL(p || q) = [1/2 ln(2/3) + 1/2 ln 2 + 0] / 2. d/dz = (q - p) / N per row:
    row a (1/4, -1/4) / 2, row b 0; so dL/dh_a = W . (1/8, -1/8) = ln 3 / 8, dL/dW = (1/8, -1/8) h_a."""
    s_head = torch.nn.Linear(1, 2, bias=False)
    t_head = torch.nn.Linear(1, 2, bias=False)
    with torch.no_grad():
        s_head.weight.copy_(torch.tensor([[math.log(3.0)], [0.0]]))
        t_head.weight.zero_()
    hidden = torch.tensor([[[1.0], [0.0], [5.0]]], requires_grad=True)
    labels = torch.tensor([[0, 1, IGNORE]])
    b = {"input_ids": torch.zeros(1, 3, dtype=torch.long), "labels": labels}
    s = Features(logits=None, hidden_states=None, head=HeadLogits(hidden, s_head, False, torch.float32, chunk=1))
    t = Features(logits=None, hidden_states=None, head=HeadLogits(hidden.detach(), t_head, False, torch.float32, 1))
    loss = ForwardKL(Spec())(LossInputs(s, t, b, layer_map=((1, 1),)))
    expected = (0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25)) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    loss.backward()
    assert hidden.grad[0, :, 0].tolist() == pytest.approx([math.log(3.0) / 8, 0.0, 0.0], abs=1e-6)
    assert s_head.weight.grad[:, 0].tolist() == pytest.approx([0.125, -0.125], abs=1e-6)


# ----------------------------------------------------------------------------------------------- memory
class CountingHead(torch.nn.Module):
    """An LM head that records the most rows it was asked to make at once."""

    def __init__(self, head: torch.nn.Module) -> None:
        super().__init__()
        self.head, self.most = head, 0

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        self.most = max(self.most, rows.reshape(-1, rows.shape[-1]).shape[0])
        return self.head(rows)


def test_no_head_makes_more_than_a_chunk_of_rows_forward_or_backward(pair):
    student, teacher = pair
    b = batch()
    s, t = chunked(student, teacher, b)
    s.head = HeadLogits(**{**s.head.__dict__, "head": CountingHead(s.head.head)})
    t.head = HeadLogits(**{**t.head.__dict__, "head": CountingHead(t.head.head)})
    loss = GeneralizedJSD(Spec(2.0))(LossInputs(s, t, b, layer_map=((1, 1),)))
    loss.backward()
    assert s.head.head.most == CHUNK and t.head.head.most == CHUNK  # 7 rows, 2 x 6 positions: never all


def test_no_predicting_row_is_a_zero_that_keeps_the_graph(pair):
    student, teacher = pair
    b = batch()
    b["labels"] = torch.full_like(b["labels"], IGNORE)
    s, t = chunked(student, teacher, b)
    loss = ForwardKL(Spec())(LossInputs(s, t, b, layer_map=((1, 1),)))
    assert loss.item() == 0.0
    loss.backward()
    nan = chunked_mean(s.head, b["labels"], lambda z, y, sl: F.cross_entropy(z, y), CHUNK, empty="formula")
    assert math.isnan(nan.item())  # the cross-entropy's own 0/0, which the update step refuses, as unchunked


def test_under_bf16_autocast_the_head_runs_in_bf16_as_the_models_own_and_the_loss_matches(pair):
    """The loss runs with autocast off (inputs.fp32_region); the chunks' head re-enters the forward's autocast, so
    its logits are the bf16 ones the model's own head makes, and the loss equals the unchunked one at bf16's
    precision."""
    student, teacher = pair
    b = batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        s_t_whole, s_t_chunked = whole(student, teacher, b), chunked(student, teacher, b)
    head = s_t_chunked[0].head
    assert head.autocast and head.dtype == torch.bfloat16
    with torch.autocast("cpu", enabled=False):
        made = head.rows(head.hidden[0])
    assert made.dtype == torch.bfloat16
    torch.testing.assert_close(made, s_t_whole[0].logits[0])
    params = [p for p in student.parameters() if p.requires_grad]
    term = GeneralizedJSD(Spec(2.0, beta=0.3))
    v0, g0 = value_and_grads(term, *s_t_whole, b, params)
    v1, g1 = value_and_grads(term, *s_t_chunked, b, params)
    torch.testing.assert_close(v1, v0, rtol=1e-3, atol=1e-5)
    for a, c in zip(g0, g1, strict=True):
        torch.testing.assert_close(c, a, rtol=2e-2, atol=1e-4)
