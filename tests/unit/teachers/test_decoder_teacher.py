"""The decoder teacher (procedure=causal_lm) and its top-k store recover from damage, interruption, a moved cache
and concurrent jobs as encoder teachers and their stores do: one cache (teachers/cache.py), one store
(teachers/output_store.py), one driver (training/stages.py). Tiny teachers, real files, locks and processes."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import ROOT
from omegaconf import OmegaConf
from safetensors.torch import load_file

from distill_sweep.config.parse import parse
from distill_sweep.config.schema import CheckpointSettings, RunSettings, TeacherSettings
from distill_sweep.data.corpus_settings import CorpusSettings
from distill_sweep.data.decoder import CausalData, from_corpus, from_instructions
from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
from distill_sweep.teachers.decoder import TeacherRecipe, trained_teacher
from distill_sweep.teachers.output_store import StoreMismatchError
from distill_sweep.teachers.sparse_store import open_or_build_topk

CPU = torch.device("cpu")
RECIPE = TeacherRecipe(steps=12, lr=3e-3, batch_size=8)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """The machine's rule: one intra-op thread."""


def teacher_settings(name: str = "tiny_llama") -> TeacherSettings:
    block = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "teacher" / f"{name}.yaml"), resolve=True)
    return parse(TeacherSettings, block, "teacher")


def instructions(cache: Path) -> tuple[CausalData, object]:
    tok = build_toy_tokenizer(cache)
    return from_instructions(InstructionSettings(num_examples=48, dev_examples=8), tok, max_seq_length=40), tok


def teacher(cache: Path, data: CausalData, tok: object, name: str = "tiny_llama", run: RunSettings | None = None):
    return trained_teacher(teacher_settings(name), data, tok, RECIPE, cache_dir=cache, device=CPU, precision="fp32",
                           run=run or RunSettings())


def weights(path: str | Path) -> dict[str, torch.Tensor]:
    """Copies: the tensors load_file gives may be views of the file, which a test then damages."""
    return {k: v.clone() for k, v in load_file(str(Path(path) / "model.safetensors")).items()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# ------------------------------------------------------------------------------------------- the teacher
def test_a_truncated_cached_decoder_teacher_is_set_aside_and_trained_again(tmp_path: Path, caplog) -> None:
    data, tok = instructions(tmp_path)
    _, first = teacher(tmp_path, data, tok)
    assert first["cache"] == "built"
    trained = weights(first["path"])
    file = Path(first["path"]) / "model.safetensors"
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])  # a full disk cut it short
    with caplog.at_level(logging.WARNING, logger="distill_sweep"):
        _, again = teacher(tmp_path, data, tok)
    [warning] = warnings_of(caplog)  # one line, no traceback
    assert "\n" not in warning and "model.safetensors unreadable" in warning and "training it again" in warning
    assert again["cache"] == "built" and again["path"] == first["path"]
    assert same_weights(weights(again["path"]), trained)  # the same teacher, trained again
    [aside] = Path(first["path"]).parent.glob(f"{Path(first['path']).name}.corrupt-*")
    assert (aside / "teacher.json").exists()
    _, third = teacher(tmp_path, data, tok)
    assert third["cache"] == "reused"


def test_a_resumed_teacher_training_gives_the_uninterrupted_teacher(tmp_path: Path, caplog) -> None:
    """tiny_gpt2 has dropout: the resumed run must replay the data order and the random state from its step."""
    run = dataclasses.replace(RunSettings(), checkpoint=CheckpointSettings(every_steps=4))
    whole_cache, cut_cache = tmp_path / "whole", tmp_path / "cut"
    data, tok = instructions(whole_cache)
    _, whole = teacher(whole_cache, data, tok, "tiny_gpt2", run)
    calls = {"n": 0}

    def killed_at_the_tenth_step(module, _args, _out):
        if type(module).__name__ == "GPT2LMHeadModel":
            calls["n"] += 1
            if calls["n"] == 10:
                raise KeyboardInterrupt  # what a kill looks like from inside: training stops mid-way

    handle = torch.nn.modules.module.register_module_forward_hook(killed_at_the_tenth_step)
    try:
        with pytest.raises(KeyboardInterrupt):
            teacher(cut_cache, data, tok, "tiny_gpt2", run)
    finally:
        handle.remove()
    [partial] = (cut_cache / "teachers" / data.name).glob("*.partial")
    assert (partial / "checkpoint.pt").exists() and not list(partial.parent.glob("*/teacher.json"))
    with caplog.at_level(logging.INFO, logger="distill_sweep"):
        _, resumed = teacher(cut_cache, data, tok, "tiny_gpt2", run)
    assert any("resuming from" in m and "step 8" in m for m in (r.getMessage() for r in caplog.records))
    assert resumed["cache"] == "built" and Path(resumed["path"]).name == Path(whole["path"]).name
    assert same_weights(weights(resumed["path"]), weights(whole["path"]))
    assert resumed["dev"] == whole["dev"]


def test_a_moved_cache_directory_is_reused_not_rebuilt(tmp_path: Path) -> None:
    """The toy tokenizer lives in the cache: keys hash its ids, not its path."""
    corpus = CorpusSettings(name="toy", source="toy", num_documents=60, dev_documents=6)
    first, moved = tmp_path / "first", tmp_path / "elsewhere" / "moved"
    tok = build_toy_tokenizer(first)
    data = from_corpus(corpus, tok, first)
    model, info = teacher(first, data, tok)
    store = open_or_build_topk(model, data, 4, cache_dir=first, group="g", precision="fp32", device=CPU)
    assert info["cache"] == "built" and store.built
    moved.parent.mkdir(parents=True)
    os.rename(first, moved)
    tok = build_toy_tokenizer(moved)
    assert Path(tok.name_or_path).is_relative_to(moved)
    data = from_corpus(corpus, tok, moved)
    assert data.info["cache"] == "reused"
    model, again = teacher(moved, data, tok)
    assert again["cache"] == "reused" and Path(again["path"]).is_relative_to(moved)
    reopened = open_or_build_topk(model, data, 4, cache_dir=moved, group="g", precision="fp32", device=CPU)
    assert not reopened.built and reopened.key == store.key


# ---------------------------------------------------------------------------------------- the top-k store
def test_a_garbage_topk_array_is_detected_and_rebuilt(tmp_path: Path, caplog) -> None:
    data, tok = instructions(tmp_path)
    model, _ = teacher(tmp_path, data, tok)
    store = open_or_build_topk(model, data, 5, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    expected = np.array(store.values)
    meta = json.loads((store.path / "meta.json").read_text())
    assert meta["mode"] == "top_k" and meta["key"]["k"] == 5
    assert meta["arrays"]["values"]["dtype"] == "float16" and meta["arrays"]["indices"]["dtype"] == "uint16"
    file = store.path / "values.npy"
    raw = bytearray(file.read_bytes())
    header = len(raw) - expected.nbytes
    raw[header:] = np.random.default_rng(0).bytes(expected.nbytes)  # same size, same header: garbage values
    file.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="distill_sweep"):
        again = open_or_build_topk(model, data, 5, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    [warning] = warnings_of(caplog)
    assert "\n" not in warning and "values.npy is not the file that was written (checksum differs)" in warning
    assert again.built and again.path == store.path and np.array_equal(np.array(again.values), expected)
    assert len(list(store.path.parent.glob(f"{store.path.name}.corrupt-*"))) == 1


def test_topk_rows_are_checked_against_the_batch(tmp_path: Path) -> None:
    data, tok = instructions(tmp_path)
    model, _ = teacher(tmp_path, data, tok)
    store = open_or_build_topk(model, data, 3, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    batch = data.batch(data.train, np.array([4, 9]))
    store.gather(batch)  # its own rows pass
    batch["idx"] = torch.tensor([9, 4])  # the rows swapped in the index only
    with pytest.raises(StoreMismatchError, match=r"rows \[9, 4\] are not the rows it was built from"):
        store.gather(batch)
