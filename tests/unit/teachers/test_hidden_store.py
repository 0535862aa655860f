"""procedure.teacher_logits=hidden (teachers/hidden_store.py): the teacher's last hidden states stored, its LM head
applied at train time. Every next-token term and the CE from the store equal the live teacher's (value and
gradient), whole or in chunks, for Llama (separate and tied head) and GPT-2, with padding, a prompt and T != 1; the
stored states are what the head reads; the store's bytes; a damaged store set aside and rebuilt; a batch of other
rows refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import tiny_gpt2, tiny_llama

from distill_sweep.data.decoder import CausalData, Sequences
from distill_sweep.objectives import parse_objective
from distill_sweep.objectives.core import build_objective
from distill_sweep.procedures.causal_lm_loss import distill_loss
from distill_sweep.teachers.hidden_store import READS, last_hidden, open_or_build_hidden
from distill_sweep.teachers.output_store import StoreMismatchError

CPU = torch.device("cpu")
MODELS = {"llama": lambda: tiny_llama(layers=2), "llama_tied": lambda: tiny_llama(tied=True, layers=2),
          "gpt2": lambda: tiny_gpt2(layers=2)}
# every term that reads the teacher's logits, at T = 1 and T != 1, with the CE beside them
OBJECTIVES = {"fkl": {"fkl": {"weight": 1.0, "temperature": 1.0}},
              "rkl_t2": {"rkl": {"weight": 1.0, "temperature": 2.0}},
              "gjsd_t15": {"gjsd": {"weight": 0.7, "temperature": 1.5, "beta": 0.3}},
              "fkl_rkl_t3": {"fkl": {"weight": 0.5, "temperature": 3.0}, "rkl": {"weight": 0.5, "temperature": 1.0}}}


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """The machine's rule: one intra-op thread."""


def toy_data() -> CausalData:
    """6 right-padded rows of width 9 over ids 1..49: lengths 9 down to 5, prompts of 1 to 3 tokens."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 50, size=(6, 9))
    lengths = np.array([9, 7, 6, 9, 5, 8])
    ids[np.arange(9)[None, :] >= lengths[:, None]] = 0
    split = Sequences(ids=ids, lengths=lengths, first_target=np.array([1, 2, 3, 1, 2, 3]), choice=-np.ones(6, int))
    return CausalData("toy_hidden", split, split, 0, [], {"key": "toy-hidden-rows"})


def models(name: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(a perturbed frozen teacher, a differently perturbed student in train mode) of one family."""
    teacher, student = MODELS[name](), MODELS[name]()
    torch.manual_seed(2)
    for p in teacher.parameters():
        p.data.add_(torch.randn_like(p) * 0.3)
        p.requires_grad_(False)
    torch.manual_seed(1)
    for p in student.parameters():
        p.data.add_(torch.randn_like(p) * 0.05)
    return teacher, student


def terms_of(block: dict, student: torch.nn.Module, teacher: torch.nn.Module):
    return build_objective(parse_objective({"name": "x", "stages": ["intermediate"], "terms": block}),
                           student_config=student.config, teacher_config=teacher.config, layer_map=[(1, 2)],
                           train_labels=None, num_labels=2)


@pytest.mark.parametrize("family", sorted(MODELS))
def test_every_term_from_the_hidden_store_equals_the_live_teacher(family: str, tmp_path: Path) -> None:
    data = toy_data()
    teacher, student = models(family)
    store = open_or_build_hidden(teacher, data, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    batch = data.batch(data.train, np.array([1, 2, 4, 5]))  # width 8: a store row is cut to the batch's width
    assert int(batch["input_ids"].shape[1]) < store.hidden.shape[1]
    params = [p for p in student.parameters() if p.requires_grad]
    for name, block in OBJECTIVES.items():
        terms = terms_of(block, student, teacher)
        for chunk in (0, 3):  # whole logits; 3 rows at a time (the batch has 17 predicting rows: 3 do not divide it)
            live, live_parts = distill_loss(student, teacher, terms, 0.5, None, "full", chunk=chunk)(batch)
            live_grads = torch.autograd.grad(live, params)
            stored, parts = distill_loss(student, teacher, terms, 0.5, store, "hidden", chunk=chunk)(batch)
            grads = torch.autograd.grad(stored, params)
            assert set(parts) == set(live_parts) == {*block, "ce"}
            assert float(stored.detach()) == pytest.approx(float(live.detach()), abs=1e-5, rel=1e-5), (name, chunk)
            for key in parts:
                assert parts[key] == pytest.approx(live_parts[key], abs=1e-5, rel=1e-5), (name, chunk, key)
            for a, b in zip(grads, live_grads, strict=True):
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_the_stored_states_are_what_the_head_reads_and_cost_h_values_a_position(tmp_path: Path) -> None:
    """head(stored state) is the model's logits at every real position (Llama: after its RMSNorm; GPT-2: after
    ln_f). A float32 run stores 4H bytes a position, a bf16 run 2H (H = 32 here), and the record's bytes per
    trained token is the file over the trained positions: 6 x 9 x 32 x 4 bytes over 6 rows' targets."""
    data = toy_data()
    for family in ("llama", "gpt2"):
        teacher, _ = models(family)
        store = open_or_build_hidden(teacher, data, cache_dir=tmp_path / family, group="g", precision="fp32",
                                     device=CPU)
        batch = data.batch(data.train, np.arange(6))
        real = batch["attention_mask"].bool()
        with torch.no_grad():
            logits = teacher(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            made = teacher.get_output_embeddings()(store.gather(batch))
        torch.testing.assert_close(made[real], logits[real], rtol=1e-5, atol=1e-5)
        assert store.bytes_per_token() == 4 * 32
        targets = int(np.maximum(0, data.train.lengths - data.train.first_target).sum())
        assert store.bytes_per_trained_token(targets) == pytest.approx(6 * 9 * 32 * 4 / targets)
    teacher, _ = models("llama")
    half = open_or_build_hidden(teacher.to(torch.bfloat16), data, cache_dir=tmp_path / "bf16", group="g",
                                precision="bf16", device=CPU)
    assert half.bytes_per_token() == 2 * 32 <= 2 * teacher.config.hidden_size  # the bound: 2H
    assert half.describe()["dtype"] == "bfloat16" and half.gather(data.batch(data.train, np.arange(2))).dtype == \
        torch.bfloat16
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        batch = data.batch(data.train, np.arange(2))
        live = last_hidden(teacher, batch)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(half.gather(batch)[real].float(), live[real].float(), rtol=1e-2, atol=1e-2)


def test_a_damaged_hidden_store_is_set_aside_and_rebuilt_and_other_rows_are_refused(tmp_path: Path) -> None:
    data = toy_data()
    teacher, _ = models("llama")
    store = open_or_build_hidden(teacher, data, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    assert store.built and store.path.name.startswith("g-hidden-")
    assert json.loads((store.path / "meta.json").read_text())["mode"] == "hidden"
    first = np.array(store.hidden)
    again = open_or_build_hidden(teacher, data, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    assert not again.built
    file = store.path / "hidden.npy"
    raw = bytearray(file.read_bytes())
    raw[200:208] = b"\xff" * 8
    file.write_bytes(bytes(raw))
    rebuilt = open_or_build_hidden(teacher, data, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    assert rebuilt.built and np.array_equal(np.array(rebuilt.hidden), first)
    assert len(list(tmp_path.glob("teacher_outputs/toy_hidden/*corrupt*"))) == 1  # the damaged one, set aside
    batch = data.batch(data.train, np.array([0, 3]))
    batch["idx"] = torch.tensor([3, 0])
    with pytest.raises(StoreMismatchError, match="not the rows it was built from"):
        rebuilt.gather(batch)


def test_members_gathering_the_same_batch_read_the_store_once(tmp_path: Path) -> None:
    """A pack's members gather each batch in turn: the second member's gather of the same rows reads nothing."""
    data = toy_data()
    teacher, _ = models("gpt2")
    one = open_or_build_hidden(teacher, data, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    two = open_or_build_hidden(teacher, data, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    path = str(one.path)
    start = READS[path]
    for rows in (np.array([0, 1]), np.array([2, 5])):
        batch = data.batch(data.train, rows)
        assert torch.equal(one.gather(batch), two.gather(batch))
    assert READS[path] - start == 2
