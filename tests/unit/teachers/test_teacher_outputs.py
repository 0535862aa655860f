"""The teacher-output store, the truncated teacher and length-grouped batches (teacher work done once per sweep)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset
from helpers import FAST, compose_cfg
from transformers import BertConfig, BertForSequenceClassification

from distill_sweep.data.batching import (
    GROUP_BATCHES,
    LengthGroupedBatches,
    SortedBatches,
    collate,
    make_loader,
)
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.models.capture import run_with_features
from distill_sweep.teachers.output_store import StoreMismatchError, open_or_build, row_check


# ------------------------------------------------------------------------------------------ a small store
def _model(seed: int = 0, layers: int = 4) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32, num_labels=3)
    return BertForSequenceClassification(config).eval()


def _split(n: int = 37, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    ids = [[1, *rng.integers(3, 40, size=int(rng.integers(2, 20))).tolist(), 2] for _ in range(n)]
    ds = Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids],
                            "labels": rng.integers(0, 3, size=n).tolist(), "idx": list(range(n))})
    return ds.map(lambda b: b, batched=True, new_fingerprint=f"split-{n}-{seed}")  # a content key, as tokenising gives


def _open(model: torch.nn.Module, train: Dataset, cache: Path, precision: str = "fp32"):
    return open_or_build(model, train, cache_dir=cache, task="t", group="g", precision=precision,
                         device=torch.device("cpu"), batch_size=8, pad_token_id=0)


def _batch(train: Dataset, rows: list[int]) -> dict[str, torch.Tensor]:
    return collate(train.select(rows).to_dict(), pad_token_id=0)


def test_stored_logits_are_the_teachers_for_every_row_whatever_the_batch(tmp_path: Path) -> None:
    model, train = _model(), _split()
    store = _open(model, train, tmp_path)
    assert store.built and store.logits.shape == (len(train), 3)
    rows = [5, 0, 36, 17, 3]
    batch = _batch(train, rows)  # padded to this batch's longest row, unlike the build's batches
    with torch.no_grad():
        live = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    assert torch.allclose(store.gather(batch), live, atol=1e-5, rtol=0)


def test_second_open_reuses_the_store_and_other_inputs_get_other_stores(tmp_path: Path) -> None:
    model, train = _model(), _split()
    first = _open(model, train, tmp_path)
    again = _open(model, train, tmp_path)
    assert first.built and not again.built and again.path == first.path
    other_weights = _open(_model(seed=1), train, tmp_path)
    other_data = _open(model, _split(seed=1), tmp_path)
    other_precision = _open(model, train, tmp_path, precision="bf16")
    paths = {first.path, other_weights.path, other_data.path, other_precision.path}
    assert len(paths) == 4 and all(s.built for s in (other_weights, other_data, other_precision))


def test_misaligned_or_foreign_rows_are_refused(tmp_path: Path) -> None:
    model, train = _model(), _split()
    store = _open(model, train, tmp_path)
    batch = _batch(train, [1, 2, 3])
    batch["idx"] = torch.tensor([2, 1, 3])  # rows 1 and 2 swapped in the index only
    with pytest.raises(StoreMismatchError, match=r"rows \[2, 1\]"):
        store.gather(batch)
    foreign = _batch(_split(seed=7), [1, 2, 3])  # other data, same indices
    with pytest.raises(StoreMismatchError, match="not the rows it was built from"):
        store.gather(foreign)
    beyond = _batch(train, [1])
    beyond["idx"] = torch.tensor([len(train)])
    with pytest.raises(StoreMismatchError, match="has 37 rows"):
        store.gather(beyond)


def test_row_check_ignores_padding_and_tells_rows_apart() -> None:
    a = torch.tensor([[1, 7, 9, 2, 0, 0]])
    mask = (a != 0).long()
    padded_less = row_check(a[:, :4], mask[:, :4])
    assert torch.equal(row_check(a, mask), padded_less)
    swapped = torch.tensor([[1, 9, 7, 2]])  # the same tokens in another order
    assert not torch.equal(row_check(swapped, torch.ones_like(swapped)), padded_less)
    big = torch.full((1, 8192), 2**21 - 1)  # the largest ids and positions the docstring allows: no overflow
    assert int(row_check(big, torch.ones_like(big))[0, 0]) > 0


def test_a_damaged_store_is_refused_with_one_line_and_rebuilt(tmp_path: Path, caplog) -> None:
    model, train = _model(), _split()
    store = _open(model, train, tmp_path)
    expected = store.logits.clone()
    data = bytearray((store.path / "logits.npy").read_bytes())
    data[-4:] = b"\x00\x00\xc0\x7f"  # one stored value becomes NaN: same size, same header
    (store.path / "logits.npy").write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="distill_sweep"):
        again = _open(model, train, tmp_path)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "checksum differs" in warnings[0] and "\n" not in warnings[0]
    assert again.built and torch.equal(again.logits, expected)
    assert len(list(store.path.parent.glob(f"{store.path.name}.corrupt-*"))) == 1


def test_a_killed_build_leaves_nothing_taken_for_complete(tmp_path: Path) -> None:
    model, train = _model(), _split()
    calls = {"n": 0}

    def dies_on_the_third_batch(_module, _args, _out):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # what a kill looks like from inside: the build stops mid-way

    handle = model.register_forward_hook(dies_on_the_third_batch)
    with pytest.raises(KeyboardInterrupt):
        _open(model, train, tmp_path)
    handle.remove()
    root = tmp_path / "teacher_outputs" / "t"
    assert [p.suffix for p in root.iterdir() if p.is_dir()] == [".partial"]  # no finished-looking directory
    store = _open(model, train, tmp_path)
    assert store.built and torch.isfinite(store.logits).all()


# ------------------------------------------------------------------------------------- truncated teacher
def test_truncated_teacher_gives_the_full_teachers_mapped_layers() -> None:
    model = _model(layers=6)
    batch = _batch(_split(), [0, 1, 2])
    with torch.no_grad():
        full = run_with_features(model, batch, hidden=True, qkv_layers=[1, 3])
        cut = run_with_features(model, batch, hidden=True, qkv_layers=[1, 3], depth=3)
    assert len(cut.hidden_states) == 4 and cut.logits is None
    assert all(torch.equal(full.hidden_states[i], cut.hidden_states[i]) for i in range(4))
    assert all(torch.equal(a, b) for layer in (1, 3) for a, b in zip(full.qkv[layer], cut.qkv[layer]))
    assert len(model.bert.encoder.layer) == 6  # restored


# ---------------------------------------------------------------------------------------- length grouping
def _glue_like_lengths(n: int, seed: int = 0) -> np.ndarray:
    """Word-piece counts shaped like SST-2 / MRPC sentences: log-normal around 25, clipped to [4, 128]."""
    return np.clip(np.random.default_rng(seed).lognormal(math.log(25), 0.55, size=n), 4, 128).astype(int)


def _padding(lengths: np.ndarray, batches: list[list[int]]) -> float:
    return sum(len(b) * lengths[b].max() for b in batches) / lengths.sum()


def test_length_grouped_batches_are_a_function_of_the_seed_and_cover_every_row() -> None:
    lengths = _glue_like_lengths(5000)
    first = list(LengthGroupedBatches(lengths, 32, seed=11))
    assert first == list(LengthGroupedBatches(lengths, 32, seed=11))  # a replayed epoch: the same batches
    assert first != list(LengthGroupedBatches(lengths, 32, seed=12))  # the next epoch: others
    assert sorted(i for b in first for i in b) == list(range(5000))
    assert len(first) == math.ceil(5000 / 32) == len(LengthGroupedBatches(lengths, 32, seed=11))
    # sorted within groups of GROUP_BATCHES batches, then the batches shuffled: the longest rows of the
    # batches do not come in sorted order over the epoch (they would if the whole epoch were sorted)
    assert GROUP_BATCHES * 32 < 5000  # several groups in this epoch
    longest = [int(lengths[b].max()) for b in first]
    assert longest != sorted(longest, reverse=True) and longest != sorted(longest)


def test_length_grouping_cuts_padding_to_target_on_glue_like_lengths() -> None:
    lengths = _glue_like_lengths(20000)
    grouped = _padding(lengths, list(LengthGroupedBatches(lengths, 32, seed=1)))
    generator = torch.Generator().manual_seed(1)
    order = torch.randperm(len(lengths), generator=generator).tolist()
    uniform = _padding(lengths, [order[i:i + 32] for i in range(0, len(order), 32)])
    assert grouped <= 1.15 < uniform


def test_sorted_batches_cover_every_row_once_longest_first() -> None:
    lengths = np.array([3, 9, 1, 9, 5])
    batches = list(SortedBatches(lengths, 2))
    assert batches == [[1, 3], [4, 0], [2]]


def test_loader_by_length_keeps_each_rows_index() -> None:
    train = _split()
    for batch in make_loader(train, 8, shuffle=True, seed=3, pad_token_id=0, by_length=True):
        for row, idx in zip(batch["input_ids"], batch["idx"], strict=True):
            assert row[row != 0].tolist() == train[int(idx)]["input_ids"]


@pytest.mark.parametrize("procedure", ["finetune", "fastbert"])
def test_procedures_where_the_store_would_be_wrong_or_unused_refuse_it(procedure: str) -> None:
    cfg = compose_cfg([*FAST, f"procedure={procedure}", "teacher_outputs=store"])
    with pytest.raises(ConfigError, match=f"teacher_outputs=store: procedure={procedure} does not distil"):
        identify(cfg)
    identify(compose_cfg([*FAST, f"procedure={procedure}"]))  # auto: the teacher runs live, nothing refused


def test_batching_random_keeps_the_hash_of_jobs_from_before_the_key(tmp_path: Path) -> None:
    random = identify(compose_cfg([*FAST, "batching=random"]))
    grouped = identify(compose_cfg(FAST))
    assert random.digest != grouped.digest and random.legacy_dirs and not grouped.legacy_dirs
    assert identify(compose_cfg([*FAST, "teacher_outputs=live"])).digest == grouped.digest
