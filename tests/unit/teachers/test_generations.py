"""The teacher's generations for seq_kd (teachers/generations.py): its greedy responses to the training prompts,
built once, reused, rebuilt when a file is damaged, and checked against the data's prompts."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import tiny_llama

from distill_sweep.data.decoder import from_instructions, special_tokens
from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
from distill_sweep.teachers.generations import (
    GenerationsMismatchError,
    check_prompts,
    generations_key,
    open_or_build_generations,
)

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def toy(shared_cache: Path):
    tok = build_toy_tokenizer(shared_cache)
    data = from_instructions(InstructionSettings(num_examples=50, dev_examples=6), tok, max_seq_length=40)
    teacher = tiny_llama()
    teacher.resize_token_embeddings(len(tok))
    return tok, data, teacher


def build(toy, cache: Path, max_new_tokens: int = 4):
    tok, data, teacher = toy
    return open_or_build_generations(teacher, data, max_new_tokens=max_new_tokens, max_seq_length=40,
                                     tokens=special_tokens(tok), cache_dir=cache, group="g", precision="fp32",
                                     device=CPU)


def one_row_greedy(model, prompt: list[int], steps: int, eos: int) -> list[int]:
    ids, out = list(prompt), []
    for _ in range(steps):
        with torch.no_grad():
            token = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
        out.append(token)
        if token == eos:
            break
        ids.append(token)
    return out


@pytest.mark.slow  # a tiny model's generation: over 2 s
def test_the_training_responses_become_the_teachers_greedy_ones(toy, tmp_path: Path):
    tok, data, teacher = toy
    made, info = build(toy, tmp_path)
    assert info["built"] and info["rows"] == len(data.train) == len(made.train)
    _, eos, _ = special_tokens(tok)
    train = made.train
    for r in (0, 7, len(train) - 1):
        first = int(data.train.first_target[r])
        # the data's [BOS] and prompt (short: no cut), then what a one-row argmax loop generates, [EOS] included
        assert train.first_target[r] == first and train.ids[r, :first].tolist() == data.train.ids[r, :first].tolist()
        want = one_row_greedy(teacher, data.train.ids[r, :first].tolist(), 4, eos)
        assert train.ids[r, first:train.lengths[r]].tolist() == want
    # dev keeps its references; the data's content key follows its new responses
    assert made.dev is data.dev and made.key != data.key and made.info["responses"] == "teacher_greedy"
    assert (train.choice == -1).all()


@pytest.mark.slow  # a tiny model's generation: over 2 s
def test_built_once_reused_and_rebuilt_when_damaged(toy, tmp_path: Path, caplog: pytest.LogCaptureFixture):
    first, info = build(toy, tmp_path)
    again, info2 = build(toy, tmp_path)
    assert info["built"] and not info2["built"] and info2["path"] == info["path"]
    assert np.array_equal(again.train.ids, first.train.ids) and again.key == first.key
    # another max_new_tokens is another store
    assert build(toy, tmp_path, max_new_tokens=3)[1]["path"] != info["path"]

    ids = Path(info["path"]) / "ids.npy"
    ids.write_bytes(ids.read_bytes()[:-64])  # truncated, as a full disk leaves it
    with caplog.at_level(logging.WARNING, logger="distill_sweep"):
        rebuilt, info3 = build(toy, tmp_path)
    assert info3["built"] and np.array_equal(rebuilt.train.ids, first.train.ids)
    assert "ids.npy is not the file that was written (checksum differs)" in caplog.text
    assert len(list(Path(info["path"]).parent.glob(f"{Path(info['path']).name}.corrupt-*"))) == 1


def test_stored_rows_that_are_not_the_datas_prompts_are_refused_in_one_line(toy, tmp_path: Path):
    _, data, _ = toy
    made, info = build(toy, tmp_path)
    prompts = [made.train.ids[i, :made.train.first_target[i]] for i in range(len(made.train))]
    check_prompts(Path(info["path"]), made.train, prompts)  # its own prompts pass
    with pytest.raises(GenerationsMismatchError, match=r"row 0 does not start with the data's prompt") as err:
        check_prompts(Path(info["path"]), made.train, prompts[1:] + prompts[:1])
    assert "\n" not in str(err.value)


def test_the_stores_key_holds_the_clean_decoding_and_a_penalised_teacher_is_still_greedy(shared_cache: Path,
                                                                                          tmp_path: Path):
    """The key names the decoding that made the store (greedy from a clean config, no penalty, no n-gram block,
    [EOS]), and a teacher whose generation_config sets repetition_penalty=100 and no_repeat_ngram_size=2 stores
    the argmax responses all the same (a hand loop), in the store of the same teacher without them."""
    tok = build_toy_tokenizer(shared_cache)
    data = from_instructions(InstructionSettings(num_examples=20, dev_examples=4), tok, max_seq_length=40)
    teacher = tiny_llama()
    teacher.resize_token_embeddings(len(tok))
    teacher.generation_config.repetition_penalty = 100.0
    teacher.generation_config.no_repeat_ngram_size = 2
    _, eos, _ = special_tokens(tok)
    key = generations_key(teacher, data, 6, 40, "fp32", eos)
    decoding = key["decoding"]
    assert (decoding["strategy"], decoding["generation_config"], decoding["eos"]) == ("greedy", "clean", eos)
    assert decoding["repetition_penalty"] == 1.0 and decoding["no_repeat_ngram_size"] == 0
    made, info = open_or_build_generations(teacher, data, max_new_tokens=6, max_seq_length=40,
                                           tokens=special_tokens(tok), cache_dir=tmp_path, group="g",
                                           precision="fp32", device=CPU)
    train = made.train
    for i in range(len(train)):
        first, n = int(train.first_target[i]), int(train.lengths[i])
        assert train.ids[i, first:n].tolist() == one_row_greedy(teacher, train.ids[i, :first].tolist(), 6, eos), i
