"""MiniLMv2 relations (`rel_kl`): hand-worked values, MiniLMv2's per-example normalisation, other head counts
and widths, the plain formula's value and gradient, bad relation heads refused before any work, a toy job.

Every expected number is worked from the formula in the test: relation head a of a (S, width) projection X is
its columns a*d_r .. (a+1)*d_r - 1 (d_r = width / A_r), R = softmax(X_a X_a^T / sqrt(d_r)) over the real keys,
L = (1/B) sum_b 1/(A_r n_b) sum_{a, real rows} KL(R_T || R_S), summed over relations and layer pairs.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import FAST, compose_cfg

from distill_sweep.errors import ConfigError
from distill_sweep.job.prepare import prepare
from distill_sweep.models.capture import Features
from distill_sweep.objectives import TERMS, parse_objective
from distill_sweep.objectives.core import build_objective

pytestmark = pytest.mark.usefixtures("one_thread")
R2 = math.sqrt(2.0)


def softmax(xs: list[float]) -> list[float]:
    e = [math.exp(x - max(xs)) for x in xs]
    return [v / sum(e) for v in e]


def kl(p: list[float], q: list[float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q, strict=True) if a > 0)


def arch(hidden: int, heads: int, layers: int = 1) -> SimpleNamespace:
    return SimpleNamespace(hidden_size=hidden, num_attention_heads=heads, num_hidden_layers=layers)


def objective(relations: list[str], heads: int = 2, *, s: tuple[int, int] = (2, 1), t: tuple[int, int] = (4, 2),
              layer_map: tuple[tuple[int, int], ...] = ((1, 1),), name: str = "rel_kl"):
    """rel_kl alone; student (width, attention heads) `s`, teacher `t`: other head counts on purpose."""
    term = {"weight": 1.0, "relation_heads": heads, "relations": relations} if name == "rel_kl" else {"weight": 1.0}
    cfg = {"name": "t", "stages": ["intermediate", "prediction"], "terms": {name: term}}
    return build_objective(cfg, student_config=arch(s[0], s[1], max(p[0] for p in layer_map)),
                           teacher_config=arch(t[0], t[1], max(p[1] for p in layer_map)),
                           layer_map=list(layer_map), train_labels=None, num_labels=2)


def feats(layers: dict[int, tuple[list, list, list]], grad: bool = False) -> Features:
    """Features holding (q, k, v) per layer, each a (B, S, width) nested list."""
    qkv = {i: tuple(torch.tensor(x, dtype=torch.float32).requires_grad_(grad) for x in t) for i, t in layers.items()}
    b = next(iter(qkv.values()))[0].shape[0]
    return Features(logits=torch.zeros(b, 2), hidden_states=None, qkv=qkv, num_heads=1, head_dim=1)


def value(obj, s: Features, t: Features, mask: list[list[int]]) -> torch.Tensor:
    m = torch.tensor(mask)
    return obj(s, t, {"attention_mask": m, "input_ids": torch.zeros_like(m)})[0]


# One example, 2 real tokens and a padded third (garbage); A_r = 2: the student (2 wide) has relation heads of
# width 1 (its columns), the teacher (4 wide) of width 2 (columns 0-1 and 2-3, scale 1/sqrt 2).
Q_S = [[[1, 0], [2, 1], [9, 9]]]
K_S = [[[0, 1], [1, 1], [7, 7]]]
Q_T = [[[1, 1, 0, 1], [1, 0, 1, 1], [5, 5, 5, 5]]]
K_T = [[[1, 0, 0, 0], [0, 1, 1, 0], [3, 3, 3, 3]]]
MASK = [[1, 1, 0]]
# Q-Q, worked by hand.  Student head 0: x = [1, 2] -> rows [1, 2], [2, 4]; head 1: x = [0, 1] -> [0, 0], [0, 1].
# Teacher head 0: (1,1), (1,0) -> dots [2, 1], [1, 1]; head 1: (0,1), (1,1) -> [1, 1], [1, 2]; all / sqrt 2.
QQ_ROWS = [(softmax([2 / R2, 1 / R2]), softmax([1, 2])), (softmax([1 / R2, 1 / R2]), softmax([2, 4])),
           (softmax([1 / R2, 1 / R2]), softmax([0, 0])), (softmax([1 / R2, 2 / R2]), softmax([0, 1]))]
QQ_SUM = sum(kl(p, q) for p, q in QQ_ROWS)
# Q-K.  Student head 0: q = [1, 2], k = [0, 1] -> [0, 1], [0, 2]; head 1: q = [0, 1], k = [1, 1] -> [0, 0], [1, 1].
# Teacher head 0: q (1,1), (1,0), k (1,0), (0,1) -> [1, 1], [1, 0]; head 1: q (0,1), (1,1), k (0,0), (1,0)
# -> [0, 0], [0, 1]; all / sqrt 2.
QK_ROWS = [(softmax([1 / R2, 1 / R2]), softmax([0, 1])), (softmax([1 / R2, 0]), softmax([0, 2])),
           (softmax([0, 0]), softmax([0, 0])), (softmax([0, 1 / R2]), softmax([1, 1]))]
QK_SUM = sum(kl(p, q) for p, q in QK_ROWS)


def test_qq_relation_hand_value() -> None:
    s, t = feats({1: (Q_S, K_S, Q_S)}), feats({1: (Q_T, K_T, Q_T)})
    assert QQ_SUM > 0.05  # a value that could be wrong
    # 4 real rows (2 heads x 2 tokens): 1 / (A_r n) = 1/4; the padded row and column take no part
    assert value(objective(["qq"]), s, t, MASK).item() == pytest.approx(QQ_SUM / 4, rel=1e-5)


def test_qk_relation_hand_value() -> None:
    s, t = feats({1: (Q_S, K_S, Q_S)}), feats({1: (Q_T, K_T, Q_T)})
    assert value(objective(["qk"]), s, t, MASK).item() == pytest.approx(QK_SUM / 4, rel=1e-5)
    # relations add with unit weights
    both = value(objective(["qq", "qk"]), s, t, MASK).item()
    assert both == pytest.approx((QQ_SUM + QK_SUM) / 4, rel=1e-5)


def test_normalised_per_example_then_over_the_batch() -> None:
    """MiniLMv2: 1/(A_r n_b) per example, then the batch mean; a 1-token example has KL 0 (one key)."""
    second_s, second_t = [[3, 1], [8, 8], [8, 8]], [[1, 2, 3, 4], [6, 6, 6, 6], [6, 6, 6, 6]]
    q_s, q_t = [*Q_S, second_s], [*Q_T, second_t]
    s, t = feats({1: (q_s, q_s, q_s)}), feats({1: (q_t, q_t, q_t)})
    got = value(objective(["qq"]), s, t, [[1, 1, 0], [1, 0, 0]]).item()
    assert got == pytest.approx((QQ_SUM / (2 * 2) + 0.0) / 2, rel=1e-5)
    assert got != pytest.approx(QQ_SUM / (2 * 3), rel=1e-3)  # the token-pooled mean att_kl uses


def test_layer_pairs_add() -> None:
    s = feats({1: (Q_S, K_S, Q_S), 2: (K_S, K_S, K_S)})
    t = feats({1: (Q_T, K_T, Q_T), 3: (K_T, K_T, K_T)})
    one = value(objective(["qq"]), feats({1: (K_S, K_S, K_S)}), feats({1: (K_T, K_T, K_T)}), MASK).item()
    got = value(objective(["qq"], layer_map=((1, 1), (2, 3))), s, t, MASK).item()
    assert got == pytest.approx(QQ_SUM / 4 + one, rel=1e-5)


def plain_rel_kl(s: tuple, t: tuple, mask: torch.Tensor, heads: int, relations: list[str]) -> torch.Tensor:
    """The formula, example by example on its real tokens, with plain autograd."""
    total = torch.zeros(())
    b = mask.shape[0]
    for rel in relations:
        m, n = "qkv".index(rel[0]), "qkv".index(rel[1])
        for i in range(b):
            idx = mask[i].nonzero().squeeze(1)

            def scores(x: torch.Tensor, y: torch.Tensor, i: int = i, idx: torch.Tensor = idx) -> torch.Tensor:
                xs = x[i, idx].view(len(idx), heads, -1).transpose(0, 1)
                ys = y[i, idx].view(len(idx), heads, -1).transpose(0, 1)
                return xs @ ys.transpose(1, 2) / math.sqrt(xs.shape[-1])

            p_t = scores(t[m], t[n]).softmax(-1)
            log_s = scores(s[m], s[n]).log_softmax(-1)
            total = total + (p_t * (p_t.log() - log_s)).sum() / (heads * len(idx) * b)
    return total


@pytest.mark.parametrize("mask", [[[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]],  # right padding (cropped)
                                  [[0, 1, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]])  # left padding (key mask)
def test_matches_the_plain_formula_value_and_gradient(mask: list[list[int]]) -> None:
    g = torch.Generator().manual_seed(0)
    s = tuple(torch.randn(3, 5, 8, generator=g).requires_grad_(True) for _ in range(3))  # 8 wide: d_r 2
    t = tuple(torch.randn(3, 5, 12, generator=g) for _ in range(3))  # 12 wide: d_r 3
    m = torch.tensor(mask)
    relations = ["qq", "kk", "vv", "qk"]
    obj = objective(relations, heads=4, s=(8, 2), t=(12, 3))
    fs = Features(logits=torch.zeros(3, 2), hidden_states=None, qkv={1: s})
    ft = Features(logits=torch.zeros(3, 2), hidden_states=None, qkv={1: t})
    got = obj(fs, ft, {"attention_mask": m, "input_ids": torch.zeros_like(m)})[0]
    grads = torch.autograd.grad(got, s)
    want = plain_rel_kl(s, t, m, 4, relations)
    want_grads = torch.autograd.grad(want, s)
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    for a, b in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert all(float(a.abs().sum()) > 0 for a in grads)  # q, k and v of the student all learn


def test_other_head_counts_and_widths_are_allowed_for_rel_kl_only() -> None:
    assert TERMS["rel_kl"].uses_qkv and not TERMS["rel_kl"].same_heads and TERMS["att_kl"].same_heads
    assert objective(["qq"], heads=4, s=(32, 2), t=(64, 4)) is not None
    with pytest.raises(ConfigError, match="compares attention heads one to one"):
        objective([], s=(32, 2), t=(64, 4), name="att_kl")


@pytest.mark.parametrize("term, message", [
    ({"relation_heads": 0}, "relation_heads=0: must be >= 1"),
    ({"relations": []}, "relations is empty"),
    ({"relations": ["qq", "qq"]}, "a relation appears twice"),
    ({"relations": ["qx"]}, "relations[0]='qx': expected one of"),
])
def test_bad_term_settings_are_one_line(term: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_objective({"name": "x", "stages": ["intermediate"], "terms": {"rel_kl": term}})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_relation_heads_not_dividing_a_width_is_refused_before_any_work(tmp_path: Path) -> None:
    cfg = compose_cfg([*FAST, "objective=rel_kl", f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"])
    with pytest.raises(ConfigError) as err:
        prepare(cfg)  # the YAML's 48 (MiniLMv2's base setting) against the tiny models' 64
    assert str(err.value) == ("objective.terms.rel_kl.relation_heads=48 does not divide the student's width 64; use "
                              "a common divisor of the student's 64 and the teacher's 64: 1, 2, 4, 8, 16, 32, 64")
    cfg = compose_cfg([*FAST, "experiment=relations", "objective.terms.rel_kl.relation_heads=3",
                       f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"])
    with pytest.raises(ConfigError, match="relation_heads=3 does not divide the student's width 32; .*: 1, 2, 4, 8, 16, "
                                          "32$"):
        prepare(cfg)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()
