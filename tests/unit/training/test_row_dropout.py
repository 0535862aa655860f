"""training/row_dropout.py: a row's dropout masks are the same whether its global batch runs whole, in micro-batches
or in ranks' slices, in nn.Dropout and in sdpa attention's dropout; a gradient checkpoint's recompute draws them
again; outside a piece, torch's own dropout."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from distill_sweep.training import row_dropout


class _Block(nn.Module):
    """Hidden dropout and sdpa attention with a dropout, as transformers' layers call them."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.drop = nn.Linear(8, 24), nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(x.shape[0], x.shape[1], 3, 2, 4).permute(2, 0, 3, 1, 4)
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).tril()
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.2)
        return self.drop(x + a.transpose(1, 2).reshape(x.shape))


def _pieces(block: nn.Module, x: torch.Tensor, starts: list[int], ckpt: bool = False) -> tuple[torch.Tensor, list]:
    """The block's output over `x` run as pieces starting at `starts` (one key), and its weights' gradient."""
    torch.manual_seed(5)
    key, outs = row_dropout.batch_key(), []
    grads = [torch.zeros_like(p) for p in block.parameters()]
    for start, stop in zip(starts, [*starts[1:], x.shape[0]], strict=True):
        with row_dropout.piece(key, start, stop - start):
            y = checkpoint(block, x[start:stop], use_reentrant=False) if ckpt else block(x[start:stop])
            for g, d in zip(grads, torch.autograd.grad(y.pow(2).sum(), list(block.parameters())), strict=True):
                g += d
        outs.append(y.detach())
    return torch.cat(outs), grads


def test_a_rows_masks_do_not_depend_on_how_its_batch_is_split() -> None:
    torch.manual_seed(0)
    block, x = _Block().train(), torch.randn(6, 5, 8)
    whole, whole_grads = _pieces(block, x, [0])
    for starts in ([0, 2, 4], [0, 3], [0, 1, 5]):  # micro-batches, 2 ranks' halves, uneven slices
        split, grads = _pieces(block, x, starts)
        torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-6)
        for a, b in zip(grads, whole_grads, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # a gradient checkpoint recomputes the forward in the backward: the same masks, the same gradients
    _, recomputed = _pieces(block, x, [0, 3], ckpt=True)
    for a, b in zip(recomputed, whole_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # and the masks are dropout's: about p of the elements zeroed, the kept ones scaled by 1 / (1 - p)
    with row_dropout.piece(7, 0, 400):
        y = F.dropout(torch.ones(400, 50), 0.3, True)
    assert float((y == 0).float().mean()) == pytest.approx(0.3, abs=0.01)
    assert y.unique().tolist() == pytest.approx([0.0, 1 / 0.7])


def test_torch_draws_its_own_masks_outside_a_piece_and_none_in_eval() -> None:
    row_dropout.batch_key()  # (installed)
    torch.manual_seed(1)
    ours = F.dropout(torch.ones(4, 9), 0.5, True)
    torch.manual_seed(1)
    assert torch.equal(ours, torch.ops.aten.dropout(torch.ones(4, 9), 0.5, True))
    with row_dropout.piece(3, 0, 4):
        assert torch.equal(F.dropout(torch.ones(4, 9), 0.5, False), torch.ones(4, 9))
