"""The decoder evaluator's greedy responses to the dev prompts (teachers/decoder.py): batched, left-padded and
generated with the KV cache, they are the tokens a plain one-row argmax loop without a cache picks; the evaluator
scores them against the references."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import tiny_gpt2, tiny_llama

from distill_sweep.data.decoder import from_instructions, special_tokens
from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
from distill_sweep.teachers.decoder import greedy_responses, lm_evaluator


def one_row_greedy(model, prompt: list[int], steps: int, eos: int) -> list[int]:
    ids, out = list(prompt), []
    for _ in range(steps):
        with torch.no_grad():
            token = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
        if token == eos:
            break
        out.append(token)
        ids.append(token)
    return out


@pytest.mark.parametrize("build", [tiny_llama, tiny_gpt2])
def test_batched_greedy_responses_are_the_one_row_argmax_tokens(build, shared_cache: Path):
    tok = build_toy_tokenizer(shared_cache)
    # prompts of several lengths in one batch: left padding must not change what each row generates
    data = from_instructions(InstructionSettings(num_examples=40, dev_examples=7), tok, max_seq_length=48)
    assert len(set(data.dev.first_target.tolist())) > 1
    model = build()
    model.resize_token_embeddings(len(tok))
    model.train()  # left as it was found
    _, eos, _ = special_tokens(tok)
    responses, references = greedy_responses(model, data, tok, torch.device("cpu"), "fp32", batch_size=3)
    assert model.training
    dev = data.dev
    model.eval()
    for i in range(len(dev)):
        prompt = dev.ids[i, :dev.first_target[i]].tolist()
        start = 3 * (i // 3)
        steps = int(max(dev.lengths[j] - dev.first_target[j] for j in range(start, min(start + 3, len(dev)))))
        want = one_row_greedy(model, prompt, steps, eos)
        assert responses[i] == tok.decode(want, skip_special_tokens=True), i
        # the reference: the response's words, without [EOS]
        assert references[i] == tok.decode(dev.ids[i, dev.first_target[i]:dev.lengths[i] - 1].tolist())
        assert references[i] in ("good", "but", "bad")


def answers_good_then_stops(tok) -> torch.nn.Module:
    """A Llama whose layers add nothing and whose head reads the last token alone: after any token but "good" it
    predicts "good", after "good" [EOS]."""
    model = tiny_llama(layers=2)
    model.resize_token_embeddings(len(tok))
    good, (_, eos, _) = tok.convert_tokens_to_ids("good"), special_tokens(tok)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb, head = model.model.embed_tokens.weight, model.lm_head.weight
        emb.zero_()
        emb[:, 0] = 1.0
        emb[good] = 0.0
        emb[good, 1] = 1.0
        head.zero_()
        head[good, 0] = 10.0
        head[eos, 1] = 10.0
    return model


def test_the_evaluator_scores_greedy_responses_against_the_references(shared_cache: Path):
    tok = build_toy_tokenizer(shared_cache)
    data = from_instructions(InstructionSettings(num_examples=60, dev_examples=16), tok, max_seq_length=48)
    model = answers_good_then_stops(tok)
    dev = data.dev
    good = tok.convert_tokens_to_ids("good")
    # by hand: the response is "good", or nothing where the prompt itself ends with "good"
    want = ["" if dev.ids[i, dev.first_target[i] - 1] == good else "good" for i in range(len(dev))]
    references = [tok.decode(dev.ids[i, dev.first_target[i]:dev.lengths[i] - 1].tolist()) for i in range(len(dev))]
    assert 0 < sum(r == "good" for r in references) < len(dev)  # some right, some wrong
    responses, refs = greedy_responses(model, data, tok, torch.device("cpu"), "fp32", batch_size=5)
    assert responses == want and refs == references
    loaders = {"validation": lambda: data.dev_batches(4)}
    plain = lm_evaluator(data)(model, loaders, None, torch.device("cpu"), "fp32")
    assert "exact_match" not in plain and "rouge_l" not in plain  # without a tokenizer: no generation
    scored = lm_evaluator(data, tokenizer=tok, batch_size=5)(model, loaders, None, torch.device("cpu"), "fp32")
    hits = sum(w == r for w, r in zip(want, references, strict=True)) / len(dev)
    # one-word references: ROUGE-L F1 is 1 where the response is the reference, else 0
    assert scored["exact_match"] == pytest.approx(hits) and scored["rouge_l"] == pytest.approx(hits)
    assert scored["token_accuracy"] == pytest.approx(plain["token_accuracy"])
