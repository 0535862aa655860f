"""procedure.lm_eval.sampling_seeds (evaluation-sampling seeds: the tests that run a job, a command or processes
(its fast tests: tests/unit/procedures/test_lm_eval_sampling.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def _flat_model(tmp_path: Path):
    import torch
    from tiny_models import tiny_llama

    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    tokenizer = build_toy_tokenizer(tmp_path / "tok")
    model = tiny_llama(layers=2)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    torch.manual_seed(3)
    with torch.no_grad():  # flat-ish next-token distributions: samples differ from seed to seed
        model.lm_head.weight.normal_(0, 0.05)
    return model, tokenizer


def _responses(out: dict, task: str) -> list:
    return [s["filtered_resps"] for s in sorted(out["samples"][task], key=lambda s: s["doc_id"])]


def test_each_seed_is_the_stage_run_with_that_seed_and_the_scores_their_mean(tmp_path: Path):
    from distill_sweep.procedures.causal_lm_settings import LMEvalSettings
    from distill_sweep.procedures.lm_eval_stage import DRAWS, evaluate, scored

    model, tokenizer = _flat_model(tmp_path)
    settings = LMEvalSettings(tasks=["toy_instruct_rouge", "toy_instruct_choice"], limit=10, sampling_seeds=[5, 6])
    block, samples = scored(model, tokenizer, settings, 8)
    assert block["sampling"]["seeds"] == [5, 6] and block["sampling"]["tasks"] == ["toy_instruct_rouge"]
    assert block["sampling"]["gen_kwargs"] == {"do_sample": True, "temperature": 1.0, "top_p": 1.0}
    assert block["sampling"]["draws"] == DRAWS
    rouge = samples["toy_instruct_rouge"]
    assert rouge.seeds == [5, 6] and rouge.metrics["rouge_l"].shape == (2, 10)
    responses = []
    for row, seed in enumerate([5, 6]):  # each row: the task run alone with that seed
        own = evaluate(model, tokenizer, settings, 8, tasks=["toy_instruct_rouge"], seed=seed)
        want = [s["rouge_l"] for s in sorted(own["samples"]["toy_instruct_rouge"], key=lambda s: s["doc_id"])]
        assert np.allclose(rouge.metrics["rouge_l"][row], want, atol=1e-12)
        assert math.isclose(block["sampling"]["scores"]["toy_instruct_rouge"]["rouge_l"][row],
                            own["results"]["toy_instruct_rouge"]["rouge_l,none"], abs_tol=1e-12)
        responses.append(_responses(own, "toy_instruct_rouge"))
    assert responses[0] != responses[1]  # the seeds drew other responses: it samples
    per_seed = block["sampling"]["scores"]["toy_instruct_rouge"]["rouge_l"]
    assert math.isclose(block["scores"]["toy_instruct_rouge"]["rouge_l"], (per_seed[0] + per_seed[1]) / 2,
                        abs_tol=1e-12)
    # the likelihood task does not sample: scored once, as greedy scores it, one row
    greedy, _ = scored(model, tokenizer, LMEvalSettings(tasks=["toy_instruct_choice"], limit=10), 8)
    assert samples["toy_instruct_choice"].seeds is None
    assert block["scores"]["toy_instruct_choice"] == greedy["scores"]["toy_instruct_choice"]
    assert "sampling" not in greedy


def test_sampled_and_greedy_responses_do_not_depend_on_the_batch_size(tmp_path: Path):
    """eval_batch_size is not in the job's hash, so no score may depend on it (issue 48: the harness drew a batch
    from torch's global generator, ROUGE-L 0.3375 at 8 against 0.3038 at 64 under one hash; and a row of a batch
    went on past its [EOS], decoded without it, where alone it stopped). Every document's response, sampled with
    each seed or greedy, is the same at 1, 8 and 64 documents a batch, so the scores are equal."""
    from distill_sweep.procedures.causal_lm_settings import LMEvalSettings
    from distill_sweep.procedures.lm_eval_stage import evaluate, scored

    model, tokenizer = _flat_model(tmp_path)
    task = "toy_instruct_rouge"
    for seeds in ([5, 6], []):
        settings = LMEvalSettings(tasks=[task], sampling_seeds=seeds)  # all 48 documents
        runs = {size: evaluate(model, tokenizer, settings, size, seed=seeds[0] if seeds else None)
                for size in (1, 8, 64)}
        assert _responses(runs[1], task) == _responses(runs[8], task) == _responses(runs[64], task)
        blocks = {size: scored(model, tokenizer, settings, size)[0] for size in (8, 64)}
        assert blocks[8]["scores"] == blocks[64]["scores"]
        assert blocks[8].get("sampling") == blocks[64].get("sampling")
    assert blocks[8]["scores"][task]["rouge_l"] > 0  # (greedy) some responses score: the equality is not 0 == 0
