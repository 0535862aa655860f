"""Attention and value-relation transfer: Att-MSE, Att-KL, Val-KL (paper Sec. 3).

Student layer i is paired with teacher layer m(i) of the layer map (no embedding pair here); each term is
summed over pairs.  Everything is computed in float32 from the captured q/k/v (capture.py), per head:
scores S = q k^T / sqrt(d_head), each model with its own d_head (only the head COUNT must match).

Masking (default): only real tokens count.
* att_mse: MSE of the PRE-softmax scores (never the scores with the additive mask added), averaged over
  heads and over the valid (query, key) pairs of the batch:
  sum_{b,h,i,j valid} (S^S - S^T)^2 / (H * sum_b n_b^2).
* att_kl:  (1 / (T H)) sum_t sum_h KL(a^T_{t,h} || a^S_{t,h}), a = softmax over the valid keys, averaged
  over the valid query rows of the whole batch.  Padded keys get a finite large negative score
  (NEG_FILL, never -inf), so their probability is exactly 0 in both distributions and no 0 * log 0,
  inf - inf or NaN can reach the value or the gradient.
* val_kl:  MiniLM value relation VR = softmax(V V^T / sqrt(d_head)) per head, KL(VR^T || VR^S) with padded
  positions excluded as rows and as columns, averaged like att_kl.

``reference_compat: true`` reproduces the reference implementation, pad positions included:
att_mse zeroes the scores in padded key columns (the reference maps its -inf masked scores to 0) and, like
the reference, every score <= -100 on either side (REF_SCORE_ZERO), then averages over all B*H*S*S
entries; att_kl keeps the key mask, floors the student probabilities at 1e-7 inside the log
(REF_PROB_FLOOR, as the reference clamps them) and averages over all B*H*S query rows; val_kl masks
nothing and averages over all rows.  Not padding invariant, by construction.

The tiled autograd kernels that compute them, and the plain formulas the tests check them against:
attention_kernels.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .attention_kernels import kl_attention_loss, mse_scores_sum
from .inputs import STUDENT, TEACHER, LossInputs

__all__ = ["REF_PROB_FLOOR", "REF_SCORE_ZERO", "att_kl", "att_mse", "val_kl"]

# reference_compat only: the reference clamps the student's attention probabilities to >= 1e-7 before the
# log in Att-KL, and replaces every score <= -100 (meant for its -inf masked keys) by 0 in Att-MSE.
REF_PROB_FLOOR = 1e-7
REF_SCORE_ZERO = -100.0


def att_mse(x: LossInputs) -> Tensor:
    """Att-MSE: MSE of pre-softmax attention scores, averaged over heads and valid (query, key) pairs."""
    valid = x.valid
    b, s = valid.shape
    heads = x.student.num_heads
    keep = valid[:, :, None].to(torch.float32)  # (B, S, 1)
    if x.reference_compat:
        denom = float(b * heads * s * s)
    else:
        n = valid.sum(1).to(torch.float64)
        denom = float((n * n).sum()) * heads
    query_valid = None if x.reference_compat else valid
    zero_below = REF_SCORE_ZERO if x.reference_compat else None
    total: Tensor | None = None
    for s_layer, t_layer in x.layer_map:
        q_s, k_s, _ = x.qkv(STUDENT, s_layer)
        q_t, k_t, _ = x.qkv(TEACHER, t_layer)
        # Zeroed rows make every invalid (query, key) score exactly 0 on both sides.
        k_s, k_t = k_s * keep, k_t * keep
        if not x.reference_compat:
            q_s, q_t = q_s * keep, q_t * keep
        sq = mse_scores_sum(
            q_s, k_s, x.student.scaling, q_t, k_t, x.teacher.scaling, heads, query_valid, valid, zero_below
        )
        term = sq / max(denom, 1.0)
        total = term if total is None else total + term
    assert total is not None
    return total


def _row_weights(x: LossInputs, heads: int) -> Tensor:
    valid = x.valid
    b, s = valid.shape
    if x.reference_compat:
        return torch.full((b, 1, s), 1.0 / (b * heads * s), device=valid.device)
    rows = valid[:, None, :].to(torch.float32)
    return rows / (rows.sum().clamp_min(1.0) * heads)


def att_kl(x: LossInputs) -> Tensor:
    """Att-KL: KL(teacher || student) of attention distributions, per head and valid query row."""
    heads = x.student.num_heads
    w = _row_weights(x, heads)
    rows = None if x.reference_compat else x.valid
    floor = REF_PROB_FLOOR if x.reference_compat else 0.0
    total: Tensor | None = None
    for s_layer, t_layer in x.layer_map:
        q_s, k_s, _ = x.qkv(STUDENT, s_layer)
        q_t, k_t, _ = x.qkv(TEACHER, t_layer)
        term = kl_attention_loss(
            q_s, k_s, x.student.scaling, q_t, k_t, x.teacher.scaling, x.valid, w, heads, rows, prob_floor=floor
        )
        total = term if total is None else total + term
    assert total is not None
    return total


def val_kl(x: LossInputs) -> Tensor:
    """Val-KL: KL(teacher || student) of MiniLM value relations softmax(V V^T / sqrt(d_head))."""
    w = _row_weights(x, x.student.num_heads)
    key_valid = None if x.reference_compat else x.valid
    total: Tensor | None = None
    for s_layer, t_layer in x.layer_map:
        v_s, v_t = x.qkv(STUDENT, s_layer)[2], x.qkv(TEACHER, t_layer)[2]
        c_s, c_t = x.student.head_dim**-0.5, x.teacher.head_dim**-0.5
        term = kl_attention_loss(v_s, v_s, c_s, v_t, v_t, c_t, key_valid, w, x.student.num_heads, key_valid)
        total = term if total is None else total + term
    assert total is not None
    return total
