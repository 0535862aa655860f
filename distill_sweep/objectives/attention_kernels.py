"""The tiled autograd kernels of the attention terms (attention.py) and of MiniLMv2's relations (relations.py).

Each term's loss is a custom autograd function that computes dL/dq_s and dL/dk_s during the forward, tile by tile (the
loss is a scalar, so the backward only scales them, and no S x S buffer outlives its tile), and takes no logarithm
of an S x S tensor: KL(p_t || p_s) = sum_k p_t (S_t - S_s) - lse_t + lse_s, with lse = max_k S - log max_k p from
the softmax.  On CPU a tile is a group of heads of one example, cropped to its real tokens when the batch is
right-padded; elsewhere it is the whole batch with an additive key mask (docs/benchmarks/step.md says why and what
it gains).  ``reference_kl_rows`` and ``reference_mse_sum`` are the plain formulas, kept as the executable
definitions the tests check the fast paths against.  Padded keys get a finite large negative score (NEG_FILL,
never -inf), so their probability is exactly 0 in both distributions and no 0 * log 0, inf - inf or NaN can reach
the value or the gradient.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = [
    "CPU_TILE_ELEMS",
    "NEG_FILL",
    "TILED_DEVICES",
    "kl_attention_loss",
    "mse_scores_sum",
    "reference_kl_rows",
    "reference_mse_sum",
]

# Finite stand-in for -inf: exp() of it is exactly 0 in float32, and no inf/NaN arithmetic follows.
NEG_FILL = -1.0e30
# Devices on which the batch is walked in cache-sized tiles (tests set () to run the one-tile GPU path).
TILED_DEVICES: tuple[str, ...] = ("cpu",)
# Scores per CPU tile (1 MiB of float32): the few live tiles stay in L2/L3 across the elementwise passes;
# larger tiles lose the cache, smaller ones pay Python overhead per tile (measured on the bench config).
CPU_TILE_ELEMS = 1 << 18


# --------------------------------------------------------------------------------------------- reference
def reference_kl_rows(s_student: Tensor, s_teacher: Tensor, key_valid: Tensor | None) -> Tensor:
    """Row-wise KL(softmax(s_teacher) || softmax(s_student)) over the last dim, (B, H, S); plain autograd.

    ``key_valid`` (B, S) bool: keys that take part in the softmax; None = all.
    """
    if key_valid is not None:
        pad = ~key_valid[:, None, None, :]
        s_student = s_student.masked_fill(pad, NEG_FILL)
        s_teacher = s_teacher.masked_fill(pad, NEG_FILL)
    logp_t = s_teacher.log_softmax(-1)
    logp_s = s_student.log_softmax(-1)
    term = logp_t.exp() * (logp_t - logp_s)
    if key_valid is not None:
        term = term.masked_fill(pad, 0.0)  # p_t is exactly 0 there; make it explicit
    return term.sum(-1)


def reference_mse_sum(s_student: Tensor, s_teacher: Tensor, pair_valid: Tensor | None) -> Tensor:
    """sum of (s_student - s_teacher)^2 over the (query, key) pairs in ``pair_valid``; plain autograd."""
    sq = (s_student - s_teacher).square()
    return sq.sum() if pair_valid is None else (sq * pair_valid).sum()


# --------------------------------------------------------------------------------------------- tiling
def _prefix_lengths(valid: Tensor | None, s: int) -> list[int] | None:
    """Per-example lengths when ``valid`` (B, S) marks a prefix of each row (right padding), else None."""
    if valid is None:
        return None
    n = valid.sum(1)
    if not bool((valid == (torch.arange(s, device=valid.device)[None, :] < n[:, None])).all()):
        return None
    return [int(x) for x in n.tolist()]


class _Tiles:
    """Per-head (S, d) matrices of (B, S, H*d) projections, walked tile by tile.

    On CPU a tile is a group of heads of one batch element, taken as strided views of the projection
    (no layout copy in or out) and sized to about CPU_TILE_ELEMS scores so the elementwise passes run in
    cache.  With right padding a tile is also cropped to the example's real tokens: ``q_len`` query rows
    and ``k_len`` keys (the rest carry no weight / no probability), so padding costs nothing at all and
    no key mask is needed.  Elsewhere (GPU) there is one tile, the whole padded batch as a (B*H, S, d)
    stack with the additive key mask: launches, not memory traffic, are what costs there.
    """

    def __init__(
        self, q: Tensor, heads: int, q_len: list[int] | None = None, k_len: list[int] | None = None
    ) -> None:
        self.b, self.s, _ = q.shape
        self.h = heads
        self.tiled = q.device.type in TILED_DEVICES
        self.q_len = q_len if (self.tiled and q_len is not None) else [self.s] * self.b
        self.k_len = k_len if (self.tiled and k_len is not None) else [self.s] * self.b
        self.cropped_keys = self.tiled and k_len is not None
        self.cropped = min(self.q_len + self.k_len, default=self.s) < self.s
        if self.tiled:
            self.slices: list[tuple[int, int, int] | None] = []
            for i in range(self.b):
                area = self.q_len[i] * self.k_len[i]
                if area == 0:  # no real query or no real key: nothing to compare, zero loss and gradient
                    continue
                n_groups = -(-heads // max(1, CPU_TILE_ELEMS // area))  # ceil
                per = -(-heads // n_groups)  # even groups: a ragged last tile wastes a call
                self.slices += [(i, h0, min(heads, h0 + per)) for h0 in range(0, heads, per)]
        else:
            self.slices = [None]

    def mats(self, t: Tensor, sl: tuple[int, int, int] | None, n: int | None = None) -> Tensor:
        """The tile's (heads, n, d) matrices of ``t``: its first ``n`` positions (default all)."""
        if sl is None:
            return t.view(self.b, self.s, self.h, -1).transpose(1, 2).reshape(self.b * self.h, self.s, -1)
        i, h0, h1 = sl
        n = self.s if n is None else n
        return t[i, :n].view(n, self.h, t.shape[-1] // self.h)[:, h0:h1].transpose(0, 1)

    def lengths(self, sl: tuple[int, int, int] | None) -> tuple[int, int]:
        return (self.s, self.s) if sl is None else (self.q_len[sl[0]], self.k_len[sl[0]])

    def key_bias(self, bias: Tensor | None, sl: tuple[int, int, int] | None) -> Tensor | None:
        """(B, S) additive key bias -> broadcastable over the tile's scores (None once keys are cropped)."""
        if bias is None or self.cropped_keys:
            return None
        if sl is None:
            return (
                bias[:, None, None, :].expand(self.b, self.h, 1, self.s).reshape(self.b * self.h, 1, self.s)
            )
        return bias[sl[0]].view(1, 1, self.s)

    def rows(self, w: Tensor, sl: tuple[int, int, int] | None) -> Tensor:
        """(B, 1 or H, S) row weights -> broadcastable over the tile's rows."""
        if sl is None:
            return w.expand(self.b, self.h, self.s).reshape(self.b * self.h, self.s)
        i, h0, h1 = sl
        n = self.q_len[i]
        return w[i, :, :n] if w.shape[1] == 1 else w[i, h0:h1, :n]

    def grad_buffer(self, like: Tensor) -> Tensor:
        if not self.tiled:
            return like.new_empty((self.b * self.h, self.s, like.shape[-1] // self.h))
        if self.cropped:  # positions outside every tile get exactly zero gradient
            return torch.zeros_like(like)
        return torch.empty_like(like)  # every position is written by some tile

    def store(self, buf: Tensor | None, sl: tuple[int, int, int] | None, value: Tensor) -> None:
        """Write a tile's gradient (heads, n, d).  A strided ``out=`` would send bmm down a per-matrix slow
        path, so the product is made contiguous and copied in (measured: about twice as fast)."""
        assert buf is not None
        if sl is None:
            buf.copy_(value)
        else:
            self.mats(buf, sl, value.shape[1]).copy_(value)

    def grad_final(self, buf: Tensor) -> Tensor:
        """The gradient in the projection's (B, S, H*d) layout."""
        if not self.tiled:
            return buf.view(self.b, self.h, self.s, -1).transpose(1, 2).reshape(self.b, self.s, -1)
        return buf


def _scores(q: Tensor, k: Tensor, c: float, key_bias: Tensor | None) -> Tensor:
    """c q k^T (+ key_bias on the key axis) for a tile of matrices, scale and mask in one pass."""
    s = torch.bmm(q, k.transpose(1, 2))
    if key_bias is None:
        return s.mul_(c)
    return torch.add(key_bias, s, alpha=c, out=s)


def _softmax_lse(s: Tensor) -> tuple[Tensor, Tensor]:
    """softmax over the last dim and its log-normaliser max_k s - log max_k p (max_k p >= 1/S)."""
    p = torch.softmax(s, dim=-1)
    return p, s.amax(-1) - p.amax(-1).log()


def _floored_kl(
    s_t: Tensor, p_t: Tensor, lse_t: Tensor, s_s: Tensor, p_s: Tensor, lse_s: Tensor, log_floor: float
) -> tuple[Tensor, Tensor]:
    """Row-wise sum_k p_t (log p_t - max(log p_s, log_floor)) and its gradient w.r.t. the student scores.

    The logs are taken as S - lse (never log of a probability): a row whose keys are all masked then reads
    0 on both sides, as an uncropped tile must to agree with the cropped one that skips it.  The gradient
    is that of the floored log, which is 0 wherever the floor is active:
    d/dS_s[j] = p_s[j] sum_{k live} p_t[k] - p_t[j] [j live].
    """
    log_ps = s_s - lse_s.unsqueeze(-1)
    live = log_ps >= log_floor
    # Masked keys: p_t == 0 exactly and the bracket is finite (~NEG_FILL): the product is 0.
    kl = (s_t - lse_t.unsqueeze(-1)).sub_(log_ps.clamp_min_(log_floor)).mul_(p_t).sum(-1)
    p_live = p_t.mul_(live)  # p_t is not needed after this
    grad = p_s.mul_(p_live.sum(-1, keepdim=True)).sub_(p_live)
    return kl, grad


def _f32(t: Tensor, student: bool) -> Tensor:
    """Float32, contiguous (B, S, H*d); teacher tensors detached (they may be inference tensors: fine,
    the custom functions below never save them for backward)."""
    if not student:
        t = t.detach()
    return t.float().contiguous()


# --------------------------------------------------------------------------------------------- att_mse
class _ScoreMSE(torch.autograd.Function):
    """sum over (b, h, i, j) of (c_s q_s k_s^T - c_t q_t k_t^T)^2 per head; grads for q_s, k_s only.

    ``zero_below`` (reference_compat): scores <= it are replaced by 0 on each side first, with no gradient
    through the replaced student scores.

    The loss is a scalar and its gradient is linear in the incoming grad, so dL/dq_s and dL/dk_s are
    computed in the forward, tile by tile, while each difference tile is in cache; the backward only
    scales them.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        q_s: Tensor,
        k_s: Tensor,
        q_t: Tensor,
        k_t: Tensor,
        heads: int,
        c_s: float,
        c_t: float,
        q_len: list[int] | None,
        k_len: list[int] | None,
        zero_below: float | None,
    ) -> Tensor:
        want_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        tiles = _Tiles(q_s, heads, q_len, k_len)
        dq = tiles.grad_buffer(q_s) if want_grad else None
        dk = tiles.grad_buffer(k_s) if want_grad else None
        total = q_s.new_zeros(())
        for sl in tiles.slices:
            nq, nk = tiles.lengths(sl)
            qs, ks = tiles.mats(q_s, sl, nq), tiles.mats(k_s, sl, nk)
            s_t = torch.bmm(tiles.mats(q_t, sl, nq), tiles.mats(k_t, sl, nk).transpose(1, 2))
            dead = None
            if zero_below is None:
                # diff = c_s q_s k_s^T - c_t s_t in one matmul call, written over the teacher tile
                diff = torch.baddbmm(s_t, qs, ks.transpose(1, 2), beta=-c_t, alpha=c_s, out=s_t)
            else:
                s_t.mul_(c_t)
                s_t.masked_fill_(s_t <= zero_below, 0.0)
                s_s = torch.bmm(qs, ks.transpose(1, 2)).mul_(c_s)
                dead = s_s <= zero_below
                diff = s_s.masked_fill_(dead, 0.0).sub_(s_t)
            flat = diff.view(-1)
            total += torch.dot(flat, flat)
            if want_grad:  # dL/d(q k^T) = 2 c_s diff, 0 where the student score was replaced
                diff.mul_(2.0 * c_s)
                if dead is not None:
                    diff.masked_fill_(dead, 0.0)
                tiles.store(dq, sl, torch.bmm(diff, ks))
                tiles.store(dk, sl, torch.bmm(diff.transpose(1, 2), qs))
        if want_grad:
            ctx.save_for_backward(tiles.grad_final(dq), tiles.grad_final(dk))  # type: ignore[arg-type]
        return total

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        dq, dk = ctx.saved_tensors
        # In place: the buffers are ours and this backward runs once (retain_graph would double-scale).
        return dq.mul_(grad), dk.mul_(grad), None, None, None, None, None, None, None, None


def mse_scores_sum(
    q_s: Tensor,
    k_s: Tensor,
    c_s: float,
    q_t: Tensor,
    k_t: Tensor,
    c_t: float,
    heads: int,
    query_valid: Tensor | None = None,
    key_valid: Tensor | None = None,
    zero_below: float | None = None,
) -> Tensor:
    """sum over (B, H, i, j) of (c_s q_s k_s^T - c_t q_t k_t^T)^2 per head; inputs (B, S, H*d_*), teacher
    without grad.  Rows to exclude must already be zero in q and/or k; ``query_valid`` / ``key_valid``
    (B, S) only say which rows are zero, so that tiles can skip them.  ``zero_below``: scores <= it are
    set to 0 on each side before the difference (the reference's treatment, see REF_SCORE_ZERO)."""
    s = q_s.shape[1]
    return _ScoreMSE.apply(
        _f32(q_s, True),
        _f32(k_s, True),
        _f32(q_t, False),
        _f32(k_t, False),
        int(heads),
        float(c_s),
        float(c_t),
        _prefix_lengths(query_valid, s),
        _prefix_lengths(key_valid, s),
        None if zero_below is None else float(zero_below),
    )


# --------------------------------------------------------------------------------------------- KL terms
class _AttentionKL(torch.autograd.Function):
    """sum_{b,h,i} w[b, ., i] KL(softmax_j S_t || softmax_j S_s) per head; grads for q_s, k_s only.

    ``log_floor`` (reference_compat, None = off): the student log-probabilities are floored at it first,
    with no gradient through the floored ones (``_floored_kl``).

    The loss is a scalar and its gradient is linear in the incoming grad, so dL/dq_s and dL/dk_s are
    computed in the forward, tile by tile, while the probabilities are still in cache; no S x S buffer
    outlives its tile, and the backward only scales them.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        q_s: Tensor,
        k_s: Tensor,
        q_t: Tensor,
        k_t: Tensor,
        w: Tensor,
        heads: int,
        c_s: float,
        c_t: float,
        key_bias: Tensor | None,
        q_len: list[int] | None,
        k_len: list[int] | None,
        log_floor: float | None,
    ) -> Tensor:
        symmetric = q_s is k_s
        want_grad = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        tiles = _Tiles(q_s, heads, q_len, k_len)
        dq = tiles.grad_buffer(q_s) if want_grad else None
        dk = tiles.grad_buffer(k_s) if want_grad and not symmetric else None
        total = q_s.new_zeros(())
        for sl in tiles.slices:
            nq, nk = tiles.lengths(sl)
            bias, rows = tiles.key_bias(key_bias, sl), tiles.rows(w, sl)
            qs, ks = tiles.mats(q_s, sl, nq), tiles.mats(k_s, sl, nk)
            s_t = _scores(tiles.mats(q_t, sl, nq), tiles.mats(k_t, sl, nk), c_t, bias)
            p_t, lse_t = _softmax_lse(s_t)
            s_s = _scores(qs, ks, c_s, bias)
            p_s, lse_s = _softmax_lse(s_s)
            if log_floor is None:
                # Masked keys: p_t == 0 exactly and S_t - S_s is finite (both ~NEG_FILL): the product is 0.
                kl = s_t.sub_(s_s).mul_(p_t).sum(-1) - lse_t + lse_s  # in place on the teacher tile
                g = p_s.sub_(p_t) if want_grad else None  # dL/dS_s per unit row weight
            else:
                kl, g = _floored_kl(s_t, p_t, lse_t, s_s, p_s, lse_s, log_floor)
            total += (kl * rows).sum()
            if want_grad:
                assert g is not None
                d = g.mul_((rows * c_s).unsqueeze(-1))  # dL/d(q k^T) of this tile
                if symmetric:  # S = c v v^T (value relation, nq == nk): d/dv = (D + D^T) v
                    # two products instead of forming D + D^T: a transposed elementwise pass is slower
                    tiles.store(dq, sl, torch.baddbmm(torch.bmm(d, qs), d.transpose(1, 2), qs))
                else:
                    tiles.store(dq, sl, torch.bmm(d, ks))
                    tiles.store(dk, sl, torch.bmm(d.transpose(1, 2), qs))
        if want_grad:
            ctx.save_for_backward(*(tiles.grad_final(t) for t in (dq, dk) if t is not None))
        ctx.symmetric = symmetric
        return total

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        saved = ctx.saved_tensors
        # In place: the buffers are ours and this backward runs once (retain_graph would double-scale).
        dq = saved[0].mul_(grad)
        dk = None if ctx.symmetric else saved[1].mul_(grad)
        return dq, dk, None, None, None, None, None, None, None, None, None, None


def kl_attention_loss(
    q_s: Tensor,
    k_s: Tensor,
    c_s: float,
    q_t: Tensor,
    k_t: Tensor,
    c_t: float,
    key_valid: Tensor | None,
    row_weight: Tensor,
    heads: int,
    query_valid: Tensor | None = None,
    prob_floor: float = 0.0,
) -> Tensor:
    """sum_{b,h,i} row_weight[b, h or 0, i] * KL(softmax_j(S_t[b,h,i,:]) || softmax_j(S_s[b,h,i,:])).

    S = c q k^T per head; ``q_*``, ``k_*`` are (B, S, H*d) projections (pass the same tensor as q and k
    for a self-relation such as V V^T); ``key_valid`` (B, S) bool or None (no key mask); ``row_weight``
    (B, 1, S) or (B, H, S); ``query_valid`` (B, S) or None: rows outside it must have zero weight (they are
    then skipped).  ``prob_floor`` > 0: the student probabilities are clamped to at least it inside the
    log, as the reference does (REF_PROB_FLOOR).  Gradients flow to ``q_s`` and ``k_s`` only.
    """
    s = q_s.shape[1]
    key_bias = None
    if key_valid is not None:
        key_bias = torch.zeros(key_valid.shape, dtype=torch.float32, device=key_valid.device)
        key_bias.masked_fill_(~key_valid, NEG_FILL)
    symmetric_s, symmetric_t = k_s is q_s, k_t is q_t
    q_s = _f32(q_s, True)
    k_s = q_s if symmetric_s else _f32(k_s, True)  # keep identity: the symmetric gradient is cheaper
    q_t = _f32(q_t, False)
    k_t = q_t if symmetric_t else _f32(k_t, False)
    w = row_weight.to(torch.float32)
    q_len, k_len = _prefix_lengths(query_valid, s), _prefix_lengths(key_valid, s)
    if symmetric_s and q_len != k_len:  # V V^T tiles must stay square
        q_len = k_len = None
    log_floor = math.log(prob_floor) if prob_floor > 0 else None
    return _AttentionKL.apply(
        q_s, k_s, q_t, k_t, w, int(heads), float(c_s), float(c_t), key_bias, q_len, k_len, log_floor
    )
