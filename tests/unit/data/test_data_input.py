"""Data input that is wrong or unusual: unreadable TSV files, pilot subsets, an unreachable hub."""

from __future__ import annotations

import gzip
import http.server
import logging
import random
import threading
import time
from pathlib import Path

import datasets.config
import huggingface_hub.constants as hub_constants
import numpy as np
import pytest
import torch
from helpers import ROOT, task_settings

from distill_sweep.data.glue import load_raw, load_task_data
from distill_sweep.errors import ConfigError, DataError
from distill_sweep.models import hub
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

TASKS = ROOT / "conf" / "task"
RTE_HEADER = ["index", "sentence1", "sentence2", "label"]


def task(name, data_dir=None, **keys):
    return task_settings(name, data_dir, **keys)


def write_tsv(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")


def rte_dir(tmp_path: Path, train: bytes | None = None, n: int = 3) -> Path:
    """A valid RTE data_dir; `train` replaces train.tsv's bytes."""
    rows = [RTE_HEADER, *[[str(i), f"p {i}", f"h {i}", "entailment" if i % 2 else "not_entailment"]
                          for i in range(n)]]
    write_tsv(tmp_path / "RTE" / "train.tsv", rows)
    write_tsv(tmp_path / "RTE" / "dev.tsv", rows)
    if train is not None:
        (tmp_path / "RTE" / "train.tsv").write_bytes(train)
    return tmp_path


def data_error(cfg) -> str:
    with pytest.raises(DataError) as err:
        load_raw(cfg)
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 400, msg  # one line, for `distill_sweep: error: ...`
    return msg


# ------------------------------------------------------------------------------ unreadable files


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (bytes(range(256)) * 20, "binary file"),
        (gzip.compress(b"index\tsentence1\tsentence2\tlabel\n"), "gzip-compressed"),
        (b"PK\x03\x04" + b"\x00" * 100, "zip archive"),
        ("index\tsentence1\tsentence2\tlabel\n0\tcaf\u00e9\tb\tentailment\n".encode("latin-1"), "not UTF-8"),
    ],
    ids=["binary", "gzip", "zip", "latin-1"],
)
def test_binary_or_undecodable_train_file_names_the_file(tmp_path, content, problem):
    msg = data_error(task("rte", rte_dir(tmp_path, content)))
    assert str(tmp_path / "RTE" / "train.tsv") in msg and problem in msg


def test_undecodable_byte_deep_in_the_file_is_reported(tmp_path):
    good = "".join(f"{i}\tp\th\tentailment\n" for i in range(5000)).encode()
    content = b"index\tsentence1\tsentence2\tlabel\n" + good + b"9\tp\xff\th\tentailment\n"
    msg = data_error(task("rte", rte_dir(tmp_path, content)))
    assert "train.tsv: not UTF-8 text near line" in msg and "\\xff" in msg


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty file"),
        (b"index\tsentence1\tsentence2\tlabel\n", "no data rows (only a header row)"),
        (b"index\tsentence1\tsentence2\tlabel\n\n\n", "no data rows (only a header row)"),
        (b"index\tsentence1\tsentence2\n0\ta\tb\n", "missing column 'label'"),
        (b"index,sentence1,sentence2,label\n0,a,b,entailment\n", "comma-separated?"),
        (b"index\tsentence1\tsentence2\tlabel\n0\ta\tb\tyes\n", "unknown label 'yes' (expected one of"),
        (b"index\tsentence1\tsentence2\tlabel\n0\ta\tb\t0\n", "unknown label '0'"),
    ],
    ids=["empty", "header-only", "header-blank-lines", "no-label-column", "csv", "bad-label", "id-not-name"],
)
def test_ill_formed_train_file_names_the_file_and_the_problem(tmp_path, content, problem):
    msg = data_error(task("rte", rte_dir(tmp_path, content)))
    assert str(tmp_path / "RTE" / "train.tsv") in msg and problem in msg, msg


def test_wrong_label_values_in_int_and_float_tasks(tmp_path):
    write_tsv(tmp_path / "SST-2" / "train.tsv", [["sentence", "label"], ["good", "1"], ["bad", "2"]])
    write_tsv(tmp_path / "SST-2" / "dev.tsv", [["sentence", "label"], ["good", "1"]])
    assert "train.tsv:3: label 2 outside 0..1" in data_error(task("sst2", tmp_path))

    head = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2",
            "score"]
    rows = [head, ["0", "g", "f", "2012", "1", "s", "s", "A.", "B.", "nan"]]
    write_tsv(tmp_path / "STS-B" / "train.tsv", rows)
    write_tsv(tmp_path / "STS-B" / "dev.tsv", rows)
    assert "train.tsv:2: label 'nan' is not a finite number" in data_error(task("stsb", tmp_path))


def test_rte_quote_quirks_still_read(tmp_path):
    rows = [RTE_HEADER, ["0", '"He said', 'x "y', "entailment"], ["1", "a", "b", "not_entailment"]]
    write_tsv(tmp_path / "RTE" / "train.tsv", rows)
    write_tsv(tmp_path / "RTE" / "dev.tsv", rows)
    raw = load_raw(task("rte", tmp_path))
    assert list(raw["train"]["sentence1"]) == ['"He said', "a"] and list(raw["train"]["label"]) == [0, 1]


# ------------------------------------------------------------------------------ pilot subsets


def toy(**keys):
    return task("toy", **{"recipe.num_train": 300, "recipe.num_dev": 80, **keys})


def texts(ds) -> list[tuple[str, str]]:
    return list(zip(ds["sentence1"], ds["sentence2"]))


def test_subset_sizes_and_a_limit_above_the_split_keeps_it_whole():
    full = load_raw(toy())
    raw = load_raw(toy(max_train_samples=50, max_dev_samples=1000))
    assert (len(raw["train"]), len(raw["validation"])) == (50, 80)
    assert set(texts(raw["train"])) <= set(texts(full["train"]))
    assert texts(raw["validation"]) == texts(full["validation"])


def test_subset_is_the_same_for_every_training_seed_and_changes_with_subset_seed():
    subsets = []
    for training_seed in (1, 2, 3):  # what seed_everything(cfg.seed) does before a job loads its data
        random.seed(training_seed)
        np.random.seed(training_seed)
        torch.manual_seed(training_seed)
        raw = load_raw(toy(max_train_samples=40, max_dev_samples=20))
        subsets.append((texts(raw["train"]), texts(raw["validation"]), list(raw["train"]["label"])))
    assert subsets[0] == subsets[1] == subsets[2]
    other = load_raw(toy(max_train_samples=40, max_dev_samples=20, subset_seed=1))
    assert texts(other["train"]) != subsets[0][0] and len(other["train"]) == 40


def test_subset_applies_to_every_dev_split(tmp_path):
    rows = [["index", "sentence1", "sentence2", "gold_label"],
            *[[str(i), f"p{i}", f"h{i}", "neutral"] for i in range(10)]]
    for name in ("train.tsv", "dev_matched.tsv", "dev_mismatched.tsv"):
        write_tsv(tmp_path / "MNLI" / name, rows)
    raw = load_raw(task("mnli", tmp_path, max_train_samples=6, max_dev_samples=3))
    assert {k: len(v) for k, v in raw.items()} == {"train": 6, "validation_matched": 3, "validation_mismatched": 3}


@pytest.mark.parametrize("key", ["max_train_samples", "max_dev_samples"])
@pytest.mark.parametrize("value", [0, -5, 2.5, "100", True])
def test_bad_subset_size_is_a_config_error(key, value):
    with pytest.raises(ConfigError) as err:  # the typed task refuses it, before any data is read
        load_raw(toy(**{key: value}))
    assert f"task.{key}" in str(err.value) and "\n" not in str(err.value)


def test_bad_subset_seed_is_a_config_error():
    with pytest.raises(ConfigError, match="task.subset_seed"):
        load_raw(toy(max_train_samples=5, subset_seed=-1))


def test_task_data_exposes_the_sizes_used(tmp_path):
    tokenizer = build_toy_tokenizer(tmp_path / "tok")
    full = load_task_data(toy(), tokenizer, tmp_path)
    pilot = load_task_data(toy(max_train_samples=64, max_dev_samples=16), tokenizer, tmp_path)
    assert (full.train_size, full.dev_sizes) == (300, {"validation": 80})
    assert (pilot.train_size, pilot.dev_sizes) == (64, {"validation": 16})
    assert list(pilot.train["idx"]) == list(range(64))  # idx indexes the subset (contrastive memory bank)


# ------------------------------------------------------------------------------ unreachable hub


@pytest.fixture()
def online(monkeypatch):
    """Offline mode off (helpers.py turns it on), probes forgotten; everything restored afterwards."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "_HUB_PROBES", {})


def test_unreachable_hub_fails_fast_with_one_line(online, monkeypatch, caplog):
    monkeypatch.setattr(hub_constants, "ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused
    cfg = task("rte", hub_id="nosuch-org/nosuch-glue")
    start = time.monotonic()
    with caplog.at_level(logging.WARNING):
        msg = data_error(cfg)
    assert time.monotonic() - start < 10  # huggingface_hub's retries alone take ~30 s
    assert "nosuch-org/nosuch-glue/rte" in msg and "hub is unreachable (http://127.0.0.1:9: " in msg
    assert "task.data_dir" in msg
    assert not [r for r in caplog.records if "Retry" in r.getMessage()]
    assert hub_constants.HF_HUB_OFFLINE and datasets.config.HF_HUB_OFFLINE  # later hub calls fail fast too


def test_reachable_hub_is_left_online(online, monkeypatch):
    class Quiet(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - the http.server API
            self.send_response(404)  # any answer means the hub is there
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(hub_constants, "ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        assert hub.go_offline_if_hub_unreachable() is None
        assert not hub_constants.HF_HUB_OFFLINE
    finally:
        server.shutdown()
        server.server_close()
