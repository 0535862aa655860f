"""The lm-eval stage's likelihood requests with procedure.logit_chunk (procedures/lm_eval_likelihoods.py): the same
(log-likelihood, greedy) answers as the harness's own `_loglikelihood_tokens`, in request order, with requests longer
than the model's window, while the LM head never makes more rows than a chunk (or the batch's one position each)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import tiny_llama

from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
from distill_sweep.procedures.lm_eval_stage import _row_seeded_lm, harness_tokenizer


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """The machine's rule: one intra-op thread."""


def test_chunked_likelihoods_equal_the_harnesss_own(tmp_path: Path) -> None:
    tok, bos = harness_tokenizer(build_toy_tokenizer(tmp_path))
    model = tiny_llama(layers=2)
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    torch.manual_seed(4)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    g = torch.Generator().manual_seed(0)

    def ids(n: int) -> list[int]:
        return torch.randint(5, len(tok), (n,), generator=g).tolist()

    # contexts and continuations of several lengths; the last two are longer than the 64-position window (cut)
    requests = [(("c", str(i)), ids(c), ids(n)) for i, (c, n) in
                enumerate([(3, 1), (10, 4), (7, 2), (1, 6), (20, 3), (5, 1), (60, 8), (70, 2)])]
    answers = {}
    rows: list[int] = []
    hook = model.lm_head.register_forward_hook(lambda m, args, out: rows.append(args[0].reshape(-1, args[0].shape[-1])
                                                                                .shape[0]))
    for chunk in (0, 2):
        rows.clear()
        lm = _row_seeded_lm()(pretrained=model, tokenizer=tok, batch_size=3, add_bos_token=bos, chunk=chunk)
        assert lm.max_length == 64
        answers[chunk] = lm._loglikelihood_tokens(requests)
        if chunk:
            assert max(rows) <= 3  # a chunk's 2 rows, or the forward's one position of each of the batch's 3 rows
        else:
            assert max(rows) >= 3 * 64  # the harness's: every position of the batch at once
    hook.remove()
    assert len(answers[2]) == len(requests)
    for (whole, greedy), (chunked, greedy_c) in zip(answers[0], answers[2], strict=True):
        assert chunked == pytest.approx(whole, abs=1e-5, rel=1e-5) and greedy_c == greedy
    # hand-checked for one request: the continuation's log-probabilities after its context, summed
    _, ctx, cont = requests[1]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ctx + cont[:-1]])).logits[0].float(), -1)
    want = sum(float(logp[len(ctx) - 1 + j, t]) for j, t in enumerate(cont))
    assert answers[2][1][0] == pytest.approx(want, abs=1e-5)
