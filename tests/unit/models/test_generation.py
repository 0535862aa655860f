"""Generated responses (models/generation.py): a row's sampled tokens are a plain one-row sampling loop's with the
same generator, whatever batch it is generated in; the per-row draws follow softmax(scores / T) over the nucleus."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import tiny_gpt2, tiny_llama

from distill_sweep.errors import NonFiniteLossError
from distill_sweep.models.generation import RowSampler, generate_responses, sampler

EOS, PAD = 2, 0


def prompts(n: int) -> list[np.ndarray]:
    """[BOS]=1 and a prompt of 2 + (i mod 4) tokens each (several lengths: left padding in one batch)."""
    rng = np.random.default_rng(0)
    return [np.concatenate([[1], rng.integers(3, 50, size=2 + i % 4)]) for i in range(n)]


def generators(seeds: list[int]) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(s) for s in seeds]


def one_row_sample(model, prompt: np.ndarray, steps: int, temperature: float, top_p: float, seed: int) -> list[int]:
    """Sampling by hand, without a cache: the last position's logits / T, the nucleus kept (sorted descending, the
    tokens before the cumulative probability first exceeds top_p, and that one), Gumbel noise from the row's own
    generator, argmax; up to and including [EOS]."""
    g = torch.Generator().manual_seed(seed)
    ids, out = [int(t) for t in prompt], []
    for _ in range(steps):
        with torch.no_grad():
            scores = model(input_ids=torch.tensor([ids])).logits[0, -1].float() / temperature
        probs = scores.softmax(-1)
        order = probs.argsort(descending=True)
        before = probs[order].cumsum(0) - probs[order]  # mass of the tokens ranked above each
        keep = torch.zeros_like(scores, dtype=torch.bool)
        keep[order[before < top_p]] = True
        noise = -torch.log(-torch.log(torch.rand(scores.shape[-1], generator=g).clamp(min=1e-20)))
        token = int(torch.where(keep, scores, torch.tensor(-float("inf"))).add(noise).argmax())
        out.append(token)
        if token == EOS:
            break
        ids.append(token)
    return out


@pytest.mark.slow  # a tiny model's generation: over 2 s
@pytest.mark.parametrize("build", [tiny_llama, tiny_gpt2])
@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_sampled_rows_are_a_one_row_loops_draws_in_any_batch(build, temperature: float, top_p: float):
    model, rows, steps = build(), prompts(6), 6
    seeds = [11 + 7 * i for i in range(6)]
    together = generate_responses(model, rows, max_new_tokens=steps, eos=EOS, pad=PAD, device=torch.device("cpu"),
                                  processors=sampler(temperature, top_p, generators(seeds)))
    # the same rows in two other batches (other widths of left padding, other neighbours)
    split = [*generate_responses(model, rows[4:], max_new_tokens=steps, eos=EOS, pad=PAD, device=torch.device("cpu"),
                                 processors=sampler(temperature, top_p, generators(seeds[4:]))),
             *generate_responses(model, rows[:4], max_new_tokens=steps, eos=EOS, pad=PAD, device=torch.device("cpu"),
                                 processors=sampler(temperature, top_p, generators(seeds[:4])))]
    assert together == split[2:] + split[:2]
    assert together == [one_row_sample(model, p, steps, temperature, top_p, s) for p, s in zip(rows, seeds)]
    assert len({tuple(r) for r in together}) > 1  # the draws differ between rows
    assert not model.training


def test_greedy_without_generators_takes_the_argmax():
    model, rows = tiny_llama(), prompts(3)
    out = generate_responses(model, rows, max_new_tokens=4, eos=EOS, pad=PAD, device=torch.device("cpu"),
                             processors=sampler(1.0, 1.0, None))
    for prompt, response in zip(rows, out):
        ids = [int(t) for t in prompt]
        for token in response:
            with torch.no_grad():
                assert token == int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
            ids.append(token)


def test_row_draws_follow_the_tempered_nucleus_distribution():
    """4000 rows of one score vector: each token's frequency is its probability under softmax(scores / T) renormalised
    over the nucleus (within 4 standard errors), and no token outside it is drawn."""
    scores = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
    # softmax(scores / 0.8) = 0.646, 0.185, 0.099, 0.053, ...: the mass before the 4th token (0.930) passes 0.9
    n, temperature, top_p = 4000, 0.8, 0.9
    processors = sampler(temperature, top_p, generators(list(range(n))))
    drawn = processors(torch.zeros((n, 1), dtype=torch.long), scores.repeat(n, 1)).argmax(-1)
    p = (scores / temperature).softmax(-1)
    # the nucleus by hand: p sorted descending is already this order; keep while the mass before is < top_p
    before = p.cumsum(0) - p
    nucleus = before < top_p
    expected = torch.where(nucleus, p, torch.zeros(())) / p[nucleus].sum()
    freq = torch.bincount(drawn, minlength=len(scores)).double() / n
    se = (expected * (1 - expected) / n).sqrt()
    assert bool((freq[~nucleus] == 0).all()) and int(nucleus.sum()) == 3
    assert bool(((freq - expected).abs() <= 4 * se + 1e-12).all()), (freq, expected)


def test_a_rows_draws_do_not_depend_on_the_other_rows():
    scores = torch.randn(3, 20, generator=torch.Generator().manual_seed(0))
    alone = RowSampler(generators([5]))(torch.zeros((1, 1), dtype=torch.long), scores[1:2])
    among = RowSampler(generators([9, 5, 7]))(torch.zeros((3, 1), dtype=torch.long), scores)
    assert torch.equal(alone[0], among[1])


def penalised(model):
    """`model` with a generation_config as hub checkpoints ship it: a repetition penalty and no repeated bigram."""
    model.generation_config.repetition_penalty = 100.0
    model.generation_config.no_repeat_ngram_size = 2
    return model


def one_row_argmax(model, prompt: np.ndarray, steps: int) -> list[int]:
    ids, out = [int(t) for t in prompt], []
    for _ in range(steps):
        with torch.no_grad():
            token = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
        out.append(token)
        if token == EOS:
            break
        ids.append(token)
    return out


def test_greedy_is_the_argmax_whatever_the_models_generation_config():
    """A tiny Llama whose generation_config sets repetition_penalty=100 and no_repeat_ngram_size=2: HF's generate
    reading it departs from the argmax; generate_responses is the hand argmax loop still, and its samples are those
    of the same model without the penalties (the documented tempered top-p draw, nothing else)."""
    rows, steps = prompts(4), 8
    model = penalised(tiny_llama())
    want = [one_row_argmax(model, p, steps) for p in rows]
    inherited = [model.generate(input_ids=torch.as_tensor(p)[None], attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                do_sample=False, max_new_tokens=steps, eos_token_id=EOS, pad_token_id=PAD
                                )[0, len(p):].tolist() for p in rows]
    assert [r[:len(w)] for r, w in zip(inherited, want, strict=True)] != want  # the penalties change greedy
    got = generate_responses(model, rows, max_new_tokens=steps, eos=EOS, pad=PAD, device=torch.device("cpu"))
    assert got == want
    assert model.generation_config.repetition_penalty == 100.0  # the model's own config is left as it was
    seeds = [3, 5, 7, 9]
    sampled = generate_responses(model, rows, max_new_tokens=steps, eos=EOS, pad=PAD, device=torch.device("cpu"),
                                 processors=sampler(0.7, 0.9, generators(seeds)))
    plain = generate_responses(tiny_llama(), rows, max_new_tokens=steps, eos=EOS, pad=PAD,
                               device=torch.device("cpu"), processors=sampler(0.7, 0.9, generators(seeds)))
    assert sampled == plain


def test_a_temperature_that_overflows_the_scores_stops_the_draw_with_a_clear_error():
    """At T = 1e-300 the float32 logits divided by T are inf/NaN: the draw would be one token for every row (an empty
    [EOS] response); the run-time guard raises instead (the settings refuse T < 1e-6 before any work). The smallest
    accepted T still draws finite scores, which are the argmax's."""
    model, rows = tiny_llama(), prompts(3)
    with pytest.raises(NonFiniteLossError, match=r"non-finite scores while sampling at temperature 1e-300"):
        generate_responses(model, rows, max_new_tokens=4, eos=EOS, pad=PAD, device=torch.device("cpu"),
                           processors=sampler(1e-300, 1.0, generators([1, 2, 3])))
    from distill_sweep.procedures.causal_lm_settings import (
        MIN_TEMPERATURE,  # the floor the settings refuse below
    )

    assert torch.isfinite(torch.tensor([20.0, -20.0]) / torch.tensor(MIN_TEMPERATURE, dtype=torch.float32)).all()
    cold = generate_responses(model, rows, max_new_tokens=4, eos=EOS, pad=PAD, device=torch.device("cpu"),
                              processors=sampler(MIN_TEMPERATURE, 1.0, generators([1, 2, 3])))
    assert cold == generate_responses(model, rows, max_new_tokens=4, eos=EOS, pad=PAD, device=torch.device("cpu"))
