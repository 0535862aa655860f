"""The lm-eval stage's likelihood requests scored with the logits made a chunk of positions at a time
(procedure.logit_chunk), so that a batch's full-vocabulary logits never exist at once: the harness's own
`HFLM._loglikelihood_tokens` makes log-softmax over (batch, length, vocabulary) at once, whose size grows with the
length; here only the continuation's positions are made into logits, `chunk` rows at a time, from the last hidden
states and the LM head (models/lm_head.py). The numbers are the harness's, taken its way: each request's input is its
context and continuation cut to the model's last `max_length + 1` tokens less the last, run without an attention
mask (right padding cannot reach the positions before it), the continuation's log-probabilities summed and whether
every one of its tokens is the argmax (float32 log-softmax: the harness's is in the logits' dtype). The requests run
in batches of `batch_size`, longest first, as the harness's do; results in request order, each also handed to the
harness's cache hook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from distill_sweep.models.lm_head import forward_without_head

Request = tuple[Any, list[int], list[int]]  # ((context, continuation) strings or None, their token ids)


@torch.no_grad()
def loglikelihoods(model: nn.Module, requests: list[Request], *, max_length: int, batch_size: int, chunk: int,
                   device: torch.device, pad: int = 0, hook: Callable[[Any, tuple[float, bool]], None] | None = None
                   ) -> list[tuple[float, bool]]:
    """(sum of the continuation's log-probabilities, whether greedy decoding gives the continuation) per request."""
    inputs = [torch.tensor((ctx + cont)[-(max_length + 1):][:-1], dtype=torch.long) for _, ctx, cont in requests]
    order = sorted(range(len(requests)), key=lambda i: (-len(inputs[i]), i))
    out: list[tuple[float, bool] | None] = [None] * len(requests)
    for start in range(0, len(order), max(1, batch_size)):
        rows = order[start:start + max(1, batch_size)]
        width = max(len(inputs[i]) for i in rows)
        batch = torch.full((len(rows), width), pad, dtype=torch.long)
        for r, i in enumerate(rows):
            batch[r, :len(inputs[i])] = inputs[i]
        head = forward_without_head(model, {"input_ids": batch.to(device)}, hidden=False, chunk=chunk).head
        assert head is not None
        picks, targets = [], []  # (row, position) of every continuation token, and the token
        for r, i in enumerate(rows):
            cont, n = requests[i][2], len(inputs[i])
            picks += [(r, p) for p in range(n - len(cont), n)]
            targets += cont
        where = torch.tensor(picks, dtype=torch.long, device=device).reshape(-1, 2)
        hidden = head.hidden[where[:, 0], where[:, 1]]
        gold = torch.tensor(targets, dtype=torch.long, device=device)
        logp, greedy = torch.empty(len(gold), device=device), torch.empty(len(gold), dtype=torch.bool, device=device)
        for begin in range(0, len(gold), chunk):
            sl = slice(begin, begin + chunk)
            rows_logp = F.log_softmax(head.rows(hidden[sl]).float(), -1)
            logp[sl] = rows_logp.gather(-1, gold[sl, None]).squeeze(-1)
            greedy[sl] = rows_logp.argmax(-1) == gold[sl]
            del rows_logp  # before the next chunk's are made
        at = 0
        for i in rows:
            n = len(requests[i][2])
            answer = (float(logp[at:at + n].sum()), bool(greedy[at:at + n].all()))
            at += n
            out[i] = answer
            if hook is not None and requests[i][0] is not None:
                hook(requests[i][0], answer)
    return [a for a in out if a is not None]
