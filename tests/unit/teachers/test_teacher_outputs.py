"""The teacher-output store, the truncated teacher and length-grouped batches (teacher work done once per sweep)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from datasets import Dataset
from helpers import FAST, compose_cfg, records, run_cli_preloaded
from transformers import BertConfig, BertForSequenceClassification

from distill_sweep.cli.run_job import run_job
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


# --------------------------------------------------------------------------------------------- real jobs
def _comparable_epochs(record: dict) -> list[dict]:
    return [{k: v for k, v in e.items() if k.startswith("loss") or k in ("stage", "epoch", "train_loss")}
            for e in record["epochs"]]


# what stage 1 runs of the teacher: att_kl at init 3 maps student layers 1,2,3 to teacher layers 1,2,3, so 3 of
# the 6 layers; hid_cls reads only [CLS] states, which the store holds (embeddings and the skip layers 2,4,6 of
# init 1), so none; vanilla_kd has no stage 1
DEPTH = {"vanilla_kd": None, "att_kl": 3, "hid_cls": 0}


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
@pytest.mark.parametrize("objective, init", [("vanilla_kd", 1), ("att_kl", 3), ("hid_cls", 1)])
def test_a_job_with_the_store_gives_the_record_it_gives_without(tmp_path: Path, shared_cache: Path, objective: str,
                                                                init: int) -> None:
    common = [*FAST, f"objective={objective}", f"init={init}", "epochs=2", f"cache_dir={shared_cache}"]
    stored = run_job(compose_cfg([*common, f"results_dir={tmp_path / 'store'}"]))
    live = run_job(compose_cfg([*common, "teacher_outputs=live", f"results_dir={tmp_path / 'live'}"]))
    assert stored["teacher_outputs"]["mode"] == "store" and live["teacher_outputs"]["mode"] == "live"
    assert live["teacher_outputs"]["reason"] == "teacher_outputs=live"
    assert stored["teacher_outputs"]["depth"] == DEPTH[objective]
    assert stored["teacher_outputs"]["cls_layers"] == ([0, 2, 4, 6] if objective == "hid_cls" else [])
    assert stored["best"]["dev"] == live["best"]["dev"]
    for a, b in zip(_comparable_epochs(stored), _comparable_epochs(live), strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if key.startswith("loss") or key == "train_loss":
                assert a[key] == pytest.approx(b[key], abs=1e-5), (a, b)
            else:
                assert a[key] == b[key]
    assert all(1.0 <= r <= 1.15 for r in stored["padding"].values()), stored["padding"]


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_the_store_is_built_once_for_the_jobs_of_a_task(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    built = []
    for objective, seed in (("vanilla_kd", 1), ("att_mse", 2), ("vanilla_kd", 3)):  # one logits store
        cfg = compose_cfg([*FAST, f"objective={objective}", f"seed={seed}", f"results_dir={tmp_path / 'r'}",
                           f"cache_dir={cache}", "teacher.finetune.epochs=1"])
        built.append(run_job(cfg)["teacher_outputs"]["built"])
    assert built == [True, False, False]
    assert len([p for p in (cache / "teacher_outputs" / "toy").iterdir() if p.is_dir()]) == 1


@pytest.mark.parametrize("procedure", ["finetune", "fastbert"])
def test_procedures_where_the_store_would_be_wrong_or_unused_refuse_it(procedure: str) -> None:
    cfg = compose_cfg([*FAST, f"procedure={procedure}", "teacher_outputs=store"])
    with pytest.raises(ConfigError, match=f"teacher_outputs=store: procedure={procedure} does not distil"):
        identify(cfg)
    identify(compose_cfg([*FAST, f"procedure={procedure}"]))  # auto: the teacher runs live, nothing refused


def test_an_objective_without_a_logit_stage_records_why_it_ran_live(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_cfg([*FAST, "objective=att_kl", "objective.stages=[intermediate]", "init=3",
                       f"results_dir={tmp_path}", f"cache_dir={shared_cache}"])
    record = run_job(cfg)
    assert record["teacher_outputs"] == {"mode": "live", "depth": 3,
                                         "reason": "no stage of the objective reads the teacher's logits"}


def test_batching_random_keeps_the_hash_of_jobs_from_before_the_key(tmp_path: Path) -> None:
    random = identify(compose_cfg([*FAST, "batching=random"]))
    grouped = identify(compose_cfg(FAST))
    assert random.digest != grouped.digest and random.legacy_dirs and not grouped.legacy_dirs
    assert identify(compose_cfg([*FAST, "teacher_outputs=live"])).digest == grouped.digest


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_a_sweep_builds_the_store_first_and_the_dry_run_counts_it(tmp_path: Path) -> None:
    grid = [*FAST, "objective=vanilla_kd,att_mse", "init=3", "max_steps_per_epoch=3", "teacher.finetune.epochs=1",
            f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'cache'}", "-m"]
    dry = run_cli_preloaded([*grid, "+dry_run=true"], cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr[-2000:]
    # vanilla_kd: 1 stage of 3 steps x 32; att_mse: intermediate + prediction. With the store only att_mse's
    # intermediate stage runs the teacher (96), plus one build over the 256 rows; without, all 3 stages (288).
    assert "frozen-teacher forwards: 352 sample-passes with the teacher-output store (1 store(s) to build, 256 " \
           "rows), 288 without" in dry.stdout, dry.stdout[-1500:]
    run = run_cli_preloaded(grid, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "building the teacher outputs of 1 task(s) first" in run.stdout
    recs = records(tmp_path / "r")
    assert len(recs) == 2 and all(r["teacher_outputs"]["mode"] == "store" for r in recs)
    assert not any(r["teacher_outputs"]["built"] for r in recs)  # the build job built it
    again = run_cli_preloaded([*grid[:-1], "seed=2", "-m"], cwd=tmp_path)  # the store exists: no build job
    assert again.returncode == 0 and "building the teacher outputs" not in again.stdout
