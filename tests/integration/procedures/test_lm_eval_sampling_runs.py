"""procedure.lm_eval.sampling_seeds (evaluation-sampling seeds: the tests that run a job, a command or processes
(its fast tests: tests/unit/procedures/test_lm_eval_sampling.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def test_each_seed_is_the_harness_run_with_that_torch_seed_and_the_scores_their_mean(tmp_path: Path):
    import torch
    from tiny_models import tiny_llama

    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
    from distill_sweep.procedures.causal_lm_settings import LMEvalSettings
    from distill_sweep.procedures.lm_eval_stage import evaluate, scored

    tokenizer = build_toy_tokenizer(tmp_path / "tok")
    model = tiny_llama(layers=2)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    torch.manual_seed(3)
    with torch.no_grad():  # flat-ish next-token distributions: samples differ from seed to seed
        model.lm_head.weight.normal_(0, 0.05)
    settings = LMEvalSettings(tasks=["toy_instruct_rouge", "toy_instruct_choice"], limit=10, sampling_seeds=[5, 6])
    block, samples = scored(model, tokenizer, settings, 8)
    assert block["sampling"]["seeds"] == [5, 6] and block["sampling"]["tasks"] == ["toy_instruct_rouge"]
    assert block["sampling"]["gen_kwargs"] == {"do_sample": True, "temperature": 1.0, "top_p": 1.0}
    rouge = samples["toy_instruct_rouge"]
    assert rouge.seeds == [5, 6] and rouge.metrics["rouge_l"].shape == (2, 10)
    responses = []
    for row, seed in enumerate([5, 6]):  # each row: the harness's own run of the task with that torch seed
        own = evaluate(model, tokenizer, settings, 8, tasks=["toy_instruct_rouge"], seed=seed)
        want = [s["rouge_l"] for s in sorted(own["samples"]["toy_instruct_rouge"], key=lambda s: s["doc_id"])]
        assert np.allclose(rouge.metrics["rouge_l"][row], want, atol=1e-12)
        assert math.isclose(block["sampling"]["scores"]["toy_instruct_rouge"]["rouge_l"][row],
                            own["results"]["toy_instruct_rouge"]["rouge_l,none"], abs_tol=1e-12)
        responses.append([s["filtered_resps"] for s in sorted(own["samples"]["toy_instruct_rouge"],
                                                              key=lambda s: s["doc_id"])])
    assert responses[0] != responses[1]  # the seeds drew other responses: it samples
    per_seed = block["sampling"]["scores"]["toy_instruct_rouge"]["rouge_l"]
    assert math.isclose(block["scores"]["toy_instruct_rouge"]["rouge_l"], (per_seed[0] + per_seed[1]) / 2,
                        abs_tol=1e-12)
    # the likelihood task does not sample: scored once, as greedy scores it, one row
    greedy, _ = scored(model, tokenizer, LMEvalSettings(tasks=["toy_instruct_choice"], limit=10), 8)
    assert samples["toy_instruct_choice"].seeds is None
    assert block["scores"]["toy_instruct_choice"] == greedy["scores"]["toy_instruct_choice"]
    assert "sampling" not in greedy
