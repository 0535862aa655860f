"""Distillation objectives on hand-built features: hand-computed values, masking, padding, NaN safety.

Every expected number below is worked out from the paper's formula with ``math`` in the test itself, never
taken from the implementation.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from helpers import ROOT, compose_cfg, plain
from omegaconf import OmegaConf

import distill_sweep.objectives.attention_kernels as kernels
from distill_sweep.analysis.paper import OBJECTIVE_ORDER
from distill_sweep.errors import ConfigError
from distill_sweep.models.capture import Features
from distill_sweep.objectives import TERMS
from distill_sweep.objectives.attention_kernels import kl_attention_loss, mse_scores_sum, reference_kl_rows
from distill_sweep.objectives.core import build_objective
from distill_sweep.objectives.hidden import projected_mse
from distill_sweep.objectives.prediction import prediction_loss

# Tiny tensors: one intra-op thread (conftest.one_thread).
pytestmark = pytest.mark.usefixtures("one_thread")


INTERMEDIATE = ["hid_cls", "hid_seq", "att_mse", "att_kl", "val_kl"]


# ----------------------------------------------------------------------------------------------- helpers
# every objective preset, read from conf/objective/ (a new one is checked here with nothing to add: the guide's
# example is, docs/guide/add-objective.md); those with a next-token term read decoder LMs
OBJECTIVE_FILES = sorted(p.stem for p in (ROOT / "conf" / "objective").glob("*.yaml") if p.stem != "base")
DECODER_OBJECTIVES = tuple(n for n in OBJECTIVE_FILES if any(
    TERMS[t].next_token for t in OmegaConf.load(ROOT / "conf" / "objective" / f"{n}.yaml").get("terms") or {}))


def arch(hidden: int, heads: int, layers: int) -> SimpleNamespace:
    return SimpleNamespace(hidden_size=hidden, num_attention_heads=heads, num_hidden_layers=layers)


def obj_cfg(
    terms: dict[str, float],
    *,
    projection: str = "linear",
    shared_projection: bool = False,
    contrast: dict | None = None,
    **over: object,
) -> dict:
    """An objective config in the YAML's form: each term with its own settings."""
    settings: dict[str, dict] = {}
    for name, weight in terms.items():
        term: dict = {"weight": weight}
        if name in ("hid_cls", "hid_seq"):
            term.update(projection=projection, shared_projection=shared_projection)
        elif name == "hid_cls_contrast":
            term.update(contrast or {"dim": 8, "temperature": 0.07, "momentum": 0.5, "num_negatives": 3,
                                     "loss": "nce"})
        settings[name] = term
    cfg = {
        "name": "test",
        "stages": ["intermediate", "prediction"],
        "terms": settings,
        "alpha": 0.5,
        "temperature": 2.0,
        "reference_compat": False,
    }
    cfg.update(over)
    return cfg


def build(
    terms: dict[str, float],
    *,
    d_s: int = 4,
    d_t: int = 4,
    heads: int = 2,
    layer_map=((1, 1),),
    labels: torch.Tensor | None = None,
    **over: object,
):
    layers_s = max(s for s, _ in layer_map)
    layers_t = max(t for _, t in layer_map)
    return build_objective(
        obj_cfg(terms, **over),
        student_config=arch(d_s, heads, layers_s),
        teacher_config=arch(d_t, heads, layers_t),
        layer_map=list(layer_map),
        train_labels=labels,
        num_labels=2,
    )


def feats(
    hidden: list[torch.Tensor] | None,
    qkv: dict[int, tuple[torch.Tensor, ...]],
    heads: int,
    head_dim: int,
    scaling: float | None = None,
) -> Features:
    b = (hidden[0] if hidden else next(iter(qkv.values()))[0]).shape[0]
    return Features(
        logits=torch.zeros(b, 2),
        hidden_states=tuple(hidden) if hidden is not None else None,
        qkv=dict(qkv),
        num_heads=heads,
        head_dim=head_dim,
        scaling=head_dim**-0.5 if scaling is None else scaling,
    )


def random_feats(
    b: int, s: int, d: int, heads: int, layers: int, *, grad: bool, seed: int, scale: float = 1.0
) -> Features:
    g = torch.Generator().manual_seed(seed)

    def r(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * scale).requires_grad_(grad)

    hidden = [r(b, s, d) for _ in range(layers + 1)]
    qkv = {i: (r(b, s, d), r(b, s, d), r(b, s, d)) for i in range(1, layers + 1)}
    return feats(hidden, qkv, heads, d // heads)


def mask_of(lengths: list[int], s: int) -> torch.Tensor:
    return (torch.arange(s)[None, :] < torch.tensor(lengths)[:, None]).long()


def pad_features(f: Features, extra: int, seed: int) -> Features:
    """The same features with ``extra`` garbage positions appended (what padding to a longer batch does)."""
    g = torch.Generator().manual_seed(seed)

    def grow(t: torch.Tensor) -> torch.Tensor:
        junk = torch.randn(t.shape[0], extra, *t.shape[2:], generator=g) * 5
        return torch.cat([t, junk.to(t.dtype)], dim=1)

    return Features(
        logits=f.logits,
        hidden_states=tuple(grow(h) for h in f.hidden_states),
        qkv={k: tuple(grow(t) for t in v) for k, v in f.qkv.items()},
        num_heads=f.num_heads,
        head_dim=f.head_dim,
        scaling=f.scaling,
    )


def clone_as_teacher(f: Features) -> Features:
    return Features(
        logits=f.logits.detach(),
        hidden_states=tuple(h.detach().clone() for h in f.hidden_states),
        qkv={k: tuple(t.detach().clone() for t in v) for k, v in f.qkv.items()},
        num_heads=f.num_heads,
        head_dim=f.head_dim,
        scaling=f.scaling,
    )


def softmax(xs: list[float]) -> list[float]:
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    return [v / sum(e) for v in e]


def kl(p: list[float], q: list[float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q, strict=True) if a > 0)


# One head, head_dim 1 (scaling 1), two real tokens; a third, padded position carries garbage.
#   student q = [1, 2, G], k = [3, 4, G'];  teacher q = [1, 1, 0], k = [1, 2, 7]
#   => student scores [[3, 4], [6, 8]], teacher scores [[1, 2], [1, 2]] on the real tokens.
Q_S, K_S, Q_T, K_T = [1.0, 2.0, 1.0], [3.0, 4.0, 9.0], [1.0, 1.0, 0.0], [1.0, 2.0, 7.0]
MASK3 = torch.tensor([[1, 1, 0]])


def one_head(q: list[float], k: list[float], v: list[float] | None = None, grad: bool = False) -> Features:
    t = lambda xs: torch.tensor(xs).view(1, len(xs), 1).requires_grad_(grad)  # noqa: E731
    v = v if v is not None else q
    return feats(None, {1: (t(q), t(k), t(v))}, heads=1, head_dim=1, scaling=1.0)


def run(obj, s: Features, t: Features, mask: torch.Tensor) -> torch.Tensor:
    return obj(s, t, {"attention_mask": mask, "input_ids": torch.zeros_like(mask)})[0]


# ----------------------------------------------------------------------------------------------- hand values
def test_att_mse_hand_value() -> None:
    obj = build({"att_mse": 1.0}, d_s=1, d_t=1, heads=1)
    s, t = one_head(Q_S, K_S), one_head(Q_T, K_T)
    # valid pairs only: diffs 2, 2, 5, 6 -> (4 + 4 + 25 + 36) / 4
    assert run(obj, s, t, MASK3).item() == pytest.approx(69 / 4)
    # reference_compat: padded key column zeroed on both sides, padded query row kept, mean over 3 x 3.
    #   row 3: student [1*3, 1*4, 0], teacher [0, 0, 0] -> 9 + 16
    compat = build({"att_mse": 1.0}, d_s=1, d_t=1, heads=1, reference_compat=True)
    assert run(compat, s, t, MASK3).item() == pytest.approx((69 + 9 + 16) / 9)


def test_att_kl_hand_value() -> None:
    obj = build({"att_kl": 1.0}, d_s=1, d_t=1, heads=1)
    s, t = one_head(Q_S, K_S), one_head(Q_T, K_T)
    kl1 = kl(softmax([1, 2]), softmax([3, 4]))
    kl2 = kl(softmax([1, 2]), softmax([6, 8]))
    assert run(obj, s, t, MASK3).item() == pytest.approx((kl1 + kl2) / 2, rel=1e-5)
    # compat keeps the key mask but averages over all three query rows; row 3: teacher [0, 0], student [3, 4]
    kl3 = kl(softmax([0, 0]), softmax([3, 4]))
    compat = build({"att_kl": 1.0}, d_s=1, d_t=1, heads=1, reference_compat=True)
    assert run(compat, s, t, MASK3).item() == pytest.approx((kl1 + kl2 + kl3) / 3, rel=1e-5)


def test_val_kl_hand_value() -> None:
    obj = build({"val_kl": 1.0}, d_s=1, d_t=1, heads=1)
    # value relations (head_dim 1 -> scale 1): student v = [1, 2] -> [[1, 2], [2, 4]],
    # teacher v = [2, 1] -> [[4, 2], [2, 1]]; the padded third value is garbage.
    s = one_head(Q_S, K_S, v=[1.0, 2.0, 3.0])
    t = one_head(Q_T, K_T, v=[2.0, 1.0, -5.0])
    expect = (kl(softmax([4, 2]), softmax([1, 2])) + kl(softmax([2, 1]), softmax([2, 4]))) / 2
    assert run(obj, s, t, MASK3).item() == pytest.approx(expect, rel=1e-5)
    # compat: nothing masked, three rows of three
    vs, vt = [1.0, 2.0, 3.0], [2.0, 1.0, -5.0]
    rows = [
        kl(softmax([a * b for b in vt]), softmax([c * d for d in vs])) for a, c in zip(vt, vs, strict=True)
    ]
    compat = build({"val_kl": 1.0}, d_s=1, d_t=1, heads=1, reference_compat=True)
    assert run(compat, s, t, MASK3).item() == pytest.approx(sum(rows) / 3, rel=1e-5)


def test_val_kl_uses_each_models_head_dim() -> None:
    # head_dim 4 on both sides, v = e_1 * a: VR logits = a_i a_j / 2
    obj = build({"val_kl": 1.0}, d_s=4, d_t=4, heads=1)

    def f(vals: list[float]) -> Features:
        v = torch.zeros(1, len(vals), 4)
        v[0, :, 0] = torch.tensor(vals)
        return feats(None, {1: (v, v, v)}, heads=1, head_dim=4)

    a, b = [1.0, 3.0], [2.0, 2.0]
    expect = (
        sum(
            kl(softmax([x * y / 2 for y in b]), softmax([u * w / 2 for w in a]))
            for x, u in zip(b, a, strict=True)
        )
        / 2
    )
    assert run(obj, f(a), f(b), torch.ones(1, 2).long()).item() == pytest.approx(expect, rel=1e-5)


def hidden_case() -> tuple[Features, Features, torch.Tensor]:
    # B = 2, S = 3, D = 2, layer map [(1, 1)] -> pairs (embeddings, layer 1); example 2 has 2 real tokens.
    hs0 = torch.tensor([[[1.0, 2.0], [0.0, 1.0], [3.0, 3.0]], [[2.0, 0.0], [1.0, 1.0], [9.0, 9.0]]])
    ht0 = torch.tensor([[[1.0, 0.0], [0.0, 3.0], [3.0, 1.0]], [[0.0, 0.0], [1.0, 2.0], [-9.0, 4.0]]])
    hs1, ht1 = hs0 * 2, ht0 + 1
    return (
        feats([hs0, hs1], {}, heads=1, head_dim=2),
        feats([ht0, ht1], {}, heads=1, head_dim=2),
        torch.tensor([[1, 1, 1], [1, 1, 0]]),
    )


def sq(a: list[float], b: list[float]) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b, strict=True))


def test_hid_cls_hand_value() -> None:
    s, t, mask = hidden_case()
    # pair (0,0): CLS [1,2] vs [1,0], [2,0] vs [0,0]; pair (1,1): [2,4] vs [2,1], [4,0] vs [1,1]
    expect = (sq([1, 2], [1, 0]) + sq([2, 0], [0, 0])) / 4 + (sq([2, 4], [2, 1]) + sq([4, 0], [1, 1])) / 4
    for projection in ("none", "linear"):  # linear starts as the identity for equal widths
        obj = build({"hid_cls": 1.0}, d_s=2, d_t=2, heads=1, projection=projection)
        assert run(obj, s, t, mask).item() == pytest.approx(expect)
    # a learnable W_h really is applied: W = 2 I on every pair
    obj = build({"hid_cls": 1.0}, d_s=2, d_t=2, heads=1)
    with torch.no_grad():
        for lin in obj.terms["hid_cls"].proj.maps:
            lin.weight.copy_(2 * torch.eye(2))
    expect2 = (sq([2, 4], [1, 0]) + sq([4, 0], [0, 0])) / 4 + (sq([4, 8], [2, 1]) + sq([8, 0], [1, 1])) / 4
    assert run(obj, s, t, mask).item() == pytest.approx(expect2)


def test_hid_seq_hand_value() -> None:
    s, t, mask = hidden_case()
    s0, t0 = s.hidden_states[0].tolist(), t.hidden_states[0].tolist()
    s1, t1 = s.hidden_states[1].tolist(), t.hidden_states[1].tolist()
    real = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    expect = sum(sq(s0[b][i], t0[b][i]) for b, i in real) / (5 * 2) + sum(
        sq(s1[b][i], t1[b][i]) for b, i in real
    ) / (5 * 2)
    obj = build({"hid_seq": 1.0}, d_s=2, d_t=2, heads=1)
    assert run(obj, s, t, mask).item() == pytest.approx(expect)
    allpos = [(b, i) for b in range(2) for i in range(3)]
    expect_compat = (
        sum(sq(s0[b][i], t0[b][i]) for b, i in allpos) / 12
        + sum(sq(s1[b][i], t1[b][i]) for b, i in allpos) / 12
    )
    compat = build({"hid_seq": 1.0}, d_s=2, d_t=2, heads=1, reference_compat=True)
    assert run(compat, s, t, mask).item() == pytest.approx(expect_compat)


def test_projected_mse_gradients_by_hand_and_against_autograd() -> None:
    # h = [[1, 2], [0, 1]], W = [[2, 0], [1, 1]], t = [[1, 1], [0, 0]]  (loss = mean((h W^T - t)^2))
    #   h W^T = [[2, 3], [0, 1]] -> D = [[1, 2], [0, 1]], loss = (1 + 4 + 0 + 1) / 4 = 1.5
    #   G = 2 D / 4 = [[0.5, 1], [0, 0.5]];  dL/dh = G W = [[2, 1], [0.5, 0.5]];
    #   dL/dW = G^T h = [[0.5, 1], [1, 2.5]]
    h = torch.tensor([[1.0, 2.0], [0.0, 1.0]], requires_grad=True)
    w = torch.tensor([[2.0, 0.0], [1.0, 1.0]], requires_grad=True)
    t = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    loss = projected_mse(h, w, t)
    assert loss.item() == pytest.approx(1.5)
    loss.backward()
    assert h.grad.flatten().tolist() == pytest.approx([2.0, 1.0, 0.5, 0.5])
    assert w.grad.flatten().tolist() == pytest.approx([0.5, 1.0, 1.0, 2.5])
    # random shapes with d_S != d_T, batched input: same value and gradients as plain autograd
    g = torch.Generator().manual_seed(0)
    h3 = torch.randn(2, 5, 3, generator=g, requires_grad=True)
    w3 = torch.randn(4, 3, generator=g, requires_grad=True)
    t3 = torch.randn(2, 5, 4, generator=g)
    fast = projected_mse(h3, w3, t3)
    ref = ((h3 @ w3.t() - t3) ** 2).mean()
    torch.testing.assert_close(fast, ref)
    for a, r in zip(torch.autograd.grad(3 * fast, [h3, w3]), torch.autograd.grad(3 * ref, [h3, w3]), strict=True):
        torch.testing.assert_close(a, r)


def test_combination_is_weighted_sum_and_reports_terms() -> None:
    s, t, mask = hidden_case()
    single = {
        n: run(build({n: 1.0}, d_s=2, d_t=2, heads=1), s, t, mask).item() for n in ("hid_cls", "hid_seq")
    }
    obj = build({"hid_cls": 0.5, "hid_seq": 2.0}, d_s=2, d_t=2, heads=1)
    total, values = obj(s, t, {"attention_mask": mask})
    assert values == pytest.approx(single)
    assert total.item() == pytest.approx(0.5 * single["hid_cls"] + 2.0 * single["hid_seq"])


def test_prediction_loss_hand_value() -> None:
    z_s, z_t, y, alpha, temp = [1.0, 2.0, 0.0], [0.5, 0.0, 1.0], 1, 0.3, 2.0
    ce = -math.log(softmax(z_s)[y])
    p_t, p_s = softmax([z / temp for z in z_t]), softmax([z / temp for z in z_s])
    expect = (1 - alpha) * ce + alpha * temp**2 * kl(p_t, p_s)
    got = prediction_loss(
        torch.tensor([z_s]),
        torch.tensor([z_t]),
        torch.tensor([y]),
        alpha=alpha,
        temperature=temp,
        regression=False,
    )
    assert got.item() == pytest.approx(expect, rel=1e-6)
    # regression (STS-B): MSE to the gold score and to the teacher's output
    zs, zt, gold = [1.0, 2.0], [1.5, 1.0], [0.5, 2.5]
    expect_r = 0.5 * (sq(zs, gold) / 2) + 0.5 * (sq(zs, zt) / 2)
    got_r = prediction_loss(
        torch.tensor(zs).view(2, 1),
        torch.tensor(zt).view(2, 1),
        torch.tensor(gold),
        alpha=0.5,
        temperature=2.0,
        regression=True,
    )
    assert got_r.item() == pytest.approx(expect_r)
    # under bf16 autocast the loss is still computed in float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got_b = prediction_loss(
            torch.tensor([z_s]).bfloat16(),
            torch.tensor([z_t]).bfloat16(),
            torch.tensor([y]),
            alpha=alpha,
            temperature=temp,
            regression=False,
        )
    assert got_b.dtype == torch.float32 and got_b.item() == pytest.approx(expect, rel=1e-2)


# ----------------------------------------------------------------------------------------------- properties
@pytest.mark.parametrize("term", INTERMEDIATE)
def test_zero_when_student_equals_teacher(term: str) -> None:
    s = random_feats(3, 7, 8, 2, 2, grad=True, seed=0)
    mask = mask_of([7, 4, 1], 7)
    obj = build({term: 1.0}, d_s=8, d_t=8, layer_map=((1, 1), (2, 2)))
    assert abs(run(obj, s, clone_as_teacher(s), mask).item()) < 1e-6


@pytest.mark.parametrize("term", INTERMEDIATE)
def test_padding_invariance_and_compat_difference(term: str) -> None:
    s = random_feats(3, 6, 8, 2, 2, grad=True, seed=1)
    t = random_feats(3, 6, 8, 2, 2, grad=False, seed=2)
    mask = mask_of([6, 4, 2], 6)
    longer = torch.cat([mask, torch.zeros(3, 5, dtype=torch.long)], 1)
    s2, t2 = pad_features(s, 5, seed=3), pad_features(t, 5, seed=4)
    obj = build({term: 1.0}, d_s=8, d_t=8, layer_map=((1, 1), (2, 2)))
    base = run(obj, s, t, mask).item()
    assert run(obj, s2, t2, longer).item() == pytest.approx(base, rel=1e-5)
    if term != "hid_cls":  # [CLS] never sees padding: compat is the same loss there
        compat = build({term: 1.0}, d_s=8, d_t=8, layer_map=((1, 1), (2, 2)), reference_compat=True)
        assert run(compat, s, t, mask).item() != pytest.approx(base, rel=1e-3)
        assert run(compat, s2, t2, longer).item() != pytest.approx(run(compat, s, t, mask).item(), rel=1e-3)


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("term", INTERMEDIATE)
def test_heavy_padding_is_finite(term: str, bf16: bool) -> None:
    dtype = torch.bfloat16 if bf16 else torch.float32
    s = random_feats(2, 16, 8, 2, 1, grad=False, seed=5, scale=8.0)  # large scores as well
    t = random_feats(2, 16, 8, 2, 1, grad=False, seed=6, scale=8.0)
    leaves = [x.to(dtype).requires_grad_() for x in (*s.hidden_states, *s.qkv[1])]
    s = feats(leaves[:2], {1: tuple(leaves[2:])}, heads=2, head_dim=4)
    t = feats([h.to(dtype) for h in t.hidden_states], {1: tuple(x.to(dtype) for x in t.qkv[1])}, 2, 4)
    mask = mask_of([16, 1], 16)  # one row has a single real token
    for compat in (False, True):
        obj = build({term: 1.0}, d_s=8, d_t=8, reference_compat=compat)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = run(obj, s, t, mask)
        assert loss.dtype == torch.float32 and torch.isfinite(loss)
        grads = torch.autograd.grad(loss, [x for x in leaves], allow_unused=True)
        assert all(g is None or torch.isfinite(g).all() for g in grads)
        assert any(g is not None and g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("tiled", [True, False])
@pytest.mark.parametrize("left_padded", [False, True])
def test_fast_attention_paths_match_plain_formulas(
    tiled: bool, left_padded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tiled custom-autograd KL/MSE equal the plain autograd formulas, value and gradient: one-tile (GPU)
    path, CPU tiles cropped to the real tokens (right padding), and CPU tiles with the key mask (left
    padding cannot be cropped)."""
    monkeypatch.setattr(kernels, "TILED_DEVICES", ("cpu",) if tiled else ())
    monkeypatch.setattr(kernels, "CPU_TILE_ELEMS", 2 * 5 * 5)  # several tiles even at this size
    torch.manual_seed(0)
    b, h, s, ds, dt = 3, 3, 5, 2, 3
    valid = mask_of([5, 3, 1], s).bool()
    if left_padded:
        valid = valid.flip(1)
    qs, ks, vs = (torch.randn(b, s, h * ds, requires_grad=True) for _ in range(3))
    qt, kt, vt = (torch.randn(b, s, h * dt) for _ in range(3))

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(b, s, h, -1).transpose(1, 2)

    def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return heads(q) @ heads(k).transpose(-1, -2) * heads(q).shape[-1] ** -0.5

    def check(fast: torch.Tensor, ref: torch.Tensor, inputs: list[torch.Tensor]) -> None:
        torch.testing.assert_close(fast, ref)
        for a, r in zip(torch.autograd.grad(fast, inputs), torch.autograd.grad(ref, inputs), strict=True):
            torch.testing.assert_close(a, r, atol=1e-5, rtol=1e-4)

    w_valid = valid[:, None, :].float() / (valid.sum() * h)
    w_all = torch.full((b, 1, s), 1.0 / (b * h * s))
    for key_valid, w, rows in ((valid, w_valid, valid), (valid, w_all, None), (None, w_all, None)):
        fast = kl_attention_loss(qs, ks, ds**-0.5, qt, kt, dt**-0.5, key_valid, w, h, rows)
        check(fast, (reference_kl_rows(scores(qs, ks), scores(qt, kt), key_valid) * w).sum(), [qs, ks])
        fast = kl_attention_loss(vs, vs, ds**-0.5, vt, vt, dt**-0.5, key_valid, w, h, rows)  # V V^T
        check(fast, (reference_kl_rows(scores(vs, vs), scores(vt, vt), key_valid) * w).sum(), [vs])
    keep = valid[:, :, None].float()
    fast = mse_scores_sum(qs * keep, ks * keep, ds**-0.5, qt * keep, kt * keep, dt**-0.5, h, valid, valid)
    pair = (valid[:, None, :, None] & valid[:, None, None, :]).float()
    check(fast, ((scores(qs, ks) - scores(qt, kt)).square() * pair).sum(), [qs, ks])
    # compat form: padded keys zeroed, padded query rows kept
    fast = mse_scores_sum(qs, ks * keep, ds**-0.5, qt, kt * keep, dt**-0.5, h, None, valid)
    ref = (scores(qs, ks * keep) - scores(qt, kt * keep)).square().sum()
    check(fast, ref, [qs, ks])


def test_attention_loss_without_grad_and_with_inference_teacher() -> None:
    s = random_feats(2, 5, 8, 2, 1, grad=True, seed=7)
    with torch.inference_mode():
        t = random_feats(2, 5, 8, 2, 1, grad=False, seed=8)
    mask = mask_of([5, 2], 5)
    for term in INTERMEDIATE:
        obj = build({term: 1.0}, d_s=8, d_t=8)
        loss = run(obj, s, t, mask)
        loss.backward()  # the teacher's inference tensors are never saved for backward
        with torch.no_grad():
            assert run(obj, s, t, mask).item() == pytest.approx(loss.item(), rel=1e-6)


# ----------------------------------------------------------------------------------------------- config
def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="heads"):
        build_objective(
            obj_cfg({"att_kl": 1.0}),
            student_config=arch(8, 2, 1),
            teacher_config=arch(8, 4, 1),
            layer_map=[(1, 1)],
            train_labels=None,
            num_labels=2,
        )
    with pytest.raises(ConfigError, match="projection=none"):
        build({"hid_seq": 1.0}, d_s=4, d_t=8, projection="none")
    with pytest.raises(ConfigError, match="unknown term 'att_foo'"):
        build({"att_foo": 1.0})
    with pytest.raises(ConfigError, match="out of range"):
        build_objective(
            obj_cfg({"hid_seq": 1.0}),
            student_config=arch(4, 2, 1),
            teacher_config=arch(4, 2, 2),
            layer_map=[(1, 3)],
            train_labels=None,
            num_labels=2,
        )
    with pytest.raises(ConfigError, match="hid_cls_contrast.loss='bogus'"):
        build(
            {"hid_cls_contrast": 1.0},
            labels=torch.tensor([0, 1]),
            contrast={"dim": 4, "temperature": 0.1, "momentum": 0.5, "num_negatives": 1, "loss": "bogus"},
        )
    with pytest.raises(ConfigError, match="regression"):
        build({"hid_cls_contrast": 1.0}, labels=None)
    # different widths are fine with a projection, and for attention terms (scores are S x S)
    assert build({"hid_seq": 1.0, "att_kl": 1.0, "val_kl": 1.0}, d_s=4, d_t=8) is not None
    assert build({}, stages=["prediction"]) is None


def test_registry_and_yaml_files() -> None:
    assert set(INTERMEDIATE + ["hid_cls_contrast"]) <= set(TERMS)
    names = set(OBJECTIVE_FILES)
    assert names >= {*OBJECTIVE_ORDER, "val_kl"}  # the paper's objectives and its third attention term
    assert set(DECODER_OBJECTIVES) >= {"fkl", "rkl", "gjsd", "fkl_hid_seq", "uld"}  # the next-token terms' presets
    for name in sorted(names):  # every file, as a job composes and builds it (an added one with nothing to add)
        cfg = compose_cfg([f"objective={name}"]).objective  # as a job composes it: base + the variant
        assert cfg.name == name
        assert {"name", "stages", "terms", "alpha", "temperature", "reference_compat"} <= set(cfg.keys())
        # equal widths (48: MiniLMv2's 48 relation heads divide it), 2 student layers (PKD compares
        # student layers 1..k-1): every term can run
        # the next-token terms (objectives/causal.py) read decoder LMs only
        model = SimpleNamespace(**vars(arch(48, 2, 2)), model_type="llama" if name in DECODER_OBJECTIVES else "bert")
        obj = build_objective(
            plain(cfg),
            student_config=model,
            teacher_config=model,
            layer_map=[(1, 1), (2, 2)],
            train_labels=torch.tensor([0, 1, 0, 1]),
            num_labels=2,
        )
        assert (obj is None) == (not cfg.terms)
        assert (not cfg.terms) == (list(cfg.stages) == ["prediction"])
    pairs = {
        "att_mse_hid_seq": {"att_mse", "hid_seq"},
        "att_kl_hid_seq": {"att_kl", "hid_seq"},
        "att_kl_val_kl": {"att_kl", "val_kl"},
    }
    for name, terms in pairs.items():
        assert set(OmegaConf.load(ROOT / "conf" / "objective" / f"{name}.yaml").terms) == terms


# ----------------------------------------------------------------------------------------------- edge cases
ATTENTION_TERMS = ["att_mse", "att_kl", "val_kl"]


@pytest.mark.parametrize("compat", [False, True])
@pytest.mark.parametrize("term", ATTENTION_TERMS)
def test_example_without_real_tokens_same_on_both_attention_paths(
    term: str, compat: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch row whose attention_mask is all zeros: the CPU tiles (cropped to 0 tokens) and the one-tile
    GPU path give the same value and gradients, and in the masked form the row adds nothing."""
    s = random_feats(3, 6, 8, 2, 2, grad=True, seed=11)
    t = random_feats(3, 6, 8, 2, 2, grad=False, seed=12)
    mask = mask_of([6, 0, 3], 6)
    obj = build({term: 1.0}, d_s=8, d_t=8, layer_map=((1, 1), (2, 2)), reference_compat=compat)
    leaves = [x for xs in s.qkv.values() for x in xs]
    results = []
    for tiled in (("cpu",), ()):
        monkeypatch.setattr(kernels, "TILED_DEVICES", tiled)
        loss = run(obj, s, t, mask)
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
        grads = [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads, strict=True)]
        results.append((loss, grads))
    (tiled_loss, tiled_grads), (one_loss, one_grads) = results
    assert torch.isfinite(tiled_loss) and tiled_loss.item() > 0
    torch.testing.assert_close(tiled_loss, one_loss)
    for a, b in zip(tiled_grads, one_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    if not compat:  # (compat Val-KL masks nothing, as the reference: there the empty row's values count)
        assert all(a[1].abs().max() == 0 for a in tiled_grads)  # nothing of the empty example is trained
        # masked averages count real tokens only: the same loss as without the empty example
        keep = [0, 2]

        def rows(f: Features) -> Features:
            return feats(None, {k: tuple(x[keep] for x in v) for k, v in f.qkv.items()}, 2, 4)

        assert run(obj, rows(s), rows(t), mask[keep]).item() == pytest.approx(tiled_loss.item(), rel=1e-5)


@pytest.mark.parametrize("tiled", [True, False])
def test_reference_compat_matches_reference_formulas_at_large_scores(
    tiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reference_compat reproduces the reference code's Att-KL (student probabilities clamped to >= 1e-7
    before the log) and Att-MSE (scores <= -100 replaced by 0), value and gradient, on scores large enough
    for both to matter.  The reference formulas are written out below in plain torch."""
    monkeypatch.setattr(kernels, "TILED_DEVICES", ("cpu",) if tiled else ())
    b, h, s, dh = 2, 2, 4, 2
    g = torch.Generator().manual_seed(4)
    # std 7 entries, head_dim 2: scores of std ~50, the regime where the reference's clamp and cut-off act
    q_s, k_s, q_t, k_t = (torch.randn(b, s, h * dh, generator=g) * 7 for _ in range(4))
    q_s.requires_grad_()
    k_s.requires_grad_()
    mask = mask_of([4, 3], s)

    def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """(B*H, S, S) like the reference's, -inf on padded keys (pad query rows are kept)."""
        qh, kh = (x.view(b, s, h, dh).transpose(1, 2).reshape(b * h, s, dh) for x in (q, k))
        sc = qh @ kh.transpose(1, 2) * dh**-0.5
        pad = (mask == 0).repeat_interleave(h, 0)[:, None, :]
        return sc.masked_fill(pad, float("-inf"))

    def ref_mse() -> torch.Tensor:
        """reference Att-MSE: where(s <= -100, 0, s) on both sides, mean over all B*H*S*S entries"""
        ss, st = scores(q_s, k_s), scores(q_t, k_t)
        zero = torch.zeros(())
        return torch.nn.functional.mse_loss(torch.where(ss <= -100, zero, ss), torch.where(st <= -100, zero, st))

    def ref_kl() -> torch.Tensor:
        """reference Att-KL: log of clamp(softmax(s), 1e-7, 1), KL summed and divided by B*H*S"""
        log_ps = torch.clamp(torch.softmax(scores(q_s, k_s), -1), 1e-7, 1).log()
        p_t = torch.softmax(scores(q_t, k_t), -1)
        return torch.nn.functional.kl_div(log_ps, p_t, reduction="sum") / (b * h * s)

    ss, st = scores(q_s, k_s).detach(), scores(q_t, k_t)
    # the case really exercises both: real scores below -100, real keys the clamp cuts off
    real = torch.isfinite(ss)
    assert (ss[real] <= -100).any() and (st[torch.isfinite(st)] <= -100).any()
    assert ((torch.softmax(ss, -1) < 1e-7) & (torch.softmax(st, -1) > 1e-3)).any()
    # ... and they matter: the unclamped KL is far from the clamped one
    plain_kl = torch.nn.functional.kl_div(
        torch.log_softmax(ss.masked_fill(~real, -1e30), -1), torch.softmax(st, -1), reduction="sum"
    ) / (b * h * s)
    assert plain_kl.item() > 1.5 * ref_kl().item()

    student = feats(None, {1: (q_s, k_s, q_s)}, heads=h, head_dim=dh)
    teacher = feats(None, {1: (q_t, k_t, q_t)}, heads=h, head_dim=dh)
    for term, ref_fn in (("att_mse", ref_mse), ("att_kl", ref_kl)):
        obj = build({term: 1.0}, d_s=h * dh, d_t=h * dh, heads=h, reference_compat=True)
        got = run(obj, student, teacher, mask)
        ref = ref_fn()
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
        got_grads, ref_grads = torch.autograd.grad(got, [q_s, k_s]), torch.autograd.grad(ref, [q_s, k_s])
        for a, r in zip(got_grads, ref_grads, strict=True):
            torch.testing.assert_close(a, r, rtol=1e-4, atol=1e-6)
