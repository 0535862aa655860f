"""GLUE TSV quirks, hub failure, tokenisation cache and batching (tiny fixtures written into tmp_path)."""

import os
from pathlib import Path

import pytest
import torch
from helpers import ROOT, task_settings
from omegaconf import OmegaConf

from distill_sweep.analysis.paper import TASK_LABELS
from distill_sweep.data.batching import collate, make_loader
from distill_sweep.data.glue import load_raw, load_task_data, tokenize_splits
from distill_sweep.errors import DataError
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

TASKS = ROOT / "conf" / "task"


def task(name, data_dir=None, **keys):
    return task_settings(name, data_dir, **keys)


def write(path: Path, lines, bom=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join("\t".join(row) for row in lines) + "\n"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return build_toy_tokenizer(tmp_path_factory.mktemp("tok"))


def task_config_problems(directory: Path) -> list[str]:
    """What is wrong with the task configs in `directory`: a task the code knows (paper.TASK_LABELS: the GLUE
    seven, STS-B and toy) without one, or one that disagrees with itself."""
    found = {path.stem: OmegaConf.load(path) for path in sorted(directory.glob("*.yaml"))}
    problems = [f"{name}: no config" for name in sorted(set(TASK_LABELS) - set(found))]
    for stem, cfg in found.items():
        rules = {"name is the file's": cfg.name == stem, "primary metric among the metrics": cfg.primary_metric in
                 cfg.metrics, "num_labels": cfg.num_labels == (1 if cfg.is_regression else len(cfg.label_names))}
        if cfg.source == "glue":
            rules["a TSV file per split"] = set(cfg.tsv.files) == {"train", *cfg.dev_splits}
            rules["a TSV column per field"] = set(cfg.tsv.columns) == {*cfg.text_fields, "label"}
        problems += [f"{stem}: {rule}" for rule, ok in rules.items() if not ok]
    return problems


def test_all_task_configs_are_consistent():
    assert task_config_problems(TASKS) == []


def test_the_task_config_check_fails_on_an_empty_or_broken_directory(tmp_path):
    assert task_config_problems(tmp_path) == [f"{name}: no config" for name in sorted(TASK_LABELS)]
    for path in TASKS.glob("*.yaml"):
        (tmp_path / path.name).write_text(path.read_text())
    assert task_config_problems(tmp_path) == []
    rte = OmegaConf.load(tmp_path / "rte.yaml")
    rte.primary_metric, rte.tsv.columns = "f1", {"premise": 1, "label": 3}
    OmegaConf.save(rte, tmp_path / "rte.yaml")
    assert task_config_problems(tmp_path) == ["rte: primary metric among the metrics", "rte: a TSV column per field"]


def test_rte_string_labels_and_unbalanced_quotes(tmp_path):
    # A field that starts with `"` and never closes it: with csv quoting on, this row would swallow the
    # rest of the file. Labels are strings mapped through label_names.
    write(
        tmp_path / "RTE" / "train.tsv",
        [
            ["index", "sentence1", "sentence2", "label"],
            ["0", '"Hello, he said. And went on', "He spoke.", "entailment"],
            ["1", "A b c.", 'd "e f', "not_entailment"],
            ["2", "x", "y", "entailment"],
        ],
    )
    write(
        tmp_path / "RTE" / "dev.tsv",
        [["index", "sentence1", "sentence2", "label"], ["0", "p", "q", "not_entailment"]],
    )
    raw = load_raw(task("rte", tmp_path))
    assert set(raw) == {"train", "validation"}
    tr = raw["train"]
    assert tr.column_names == ["sentence1", "sentence2", "label"]
    assert list(tr["sentence1"]) == ['"Hello, he said. And went on', "A b c.", "x"]
    assert list(tr["sentence2"])[1] == 'd "e f'
    assert list(tr["label"]) == [0, 1, 0]
    assert list(raw["validation"]["label"]) == [1]


def test_files_directly_in_data_dir(tmp_path):
    write(
        tmp_path / "train.tsv", [["index", "sentence1", "sentence2", "label"], ["0", "a", "b", "entailment"]]
    )
    write(tmp_path / "dev.tsv", [["index", "sentence1", "sentence2", "label"], ["0", "a", "b", "entailment"]])
    assert len(load_raw(task("rte", tmp_path))["train"]) == 1


def test_mrpc_bom_and_real_header(tmp_path):
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    rows = [header, ["1", "702876", "702977", "Amrozi accused his brother .", "Referring to him as ..."]]
    rows.append(["0", "2108705", "2108831", "Yucaipa owned Dominick 's .", 'Yucaipa bought "Dominick'])
    write(tmp_path / "MRPC" / "train.tsv", rows, bom=True)
    write(tmp_path / "MRPC" / "dev.tsv", rows[:2], bom=True)
    raw = load_raw(task("mrpc", tmp_path))
    assert raw["train"].column_names == ["sentence1", "sentence2", "label"]
    assert list(raw["train"]["label"]) == [1, 0]
    assert list(raw["train"]["sentence2"]) == ["Referring to him as ...", 'Yucaipa bought "Dominick']


def test_cola_has_no_header(tmp_path):
    rows = [
        ["gj04", "1", "", "Our friends won't buy this analysis."],
        ["gj04", "0", "*", "They drank the pub."],
    ]
    write(tmp_path / "CoLA" / "train.tsv", rows)
    write(tmp_path / "CoLA" / "dev.tsv", rows[1:])
    raw = load_raw(task("cola", tmp_path))
    assert len(raw["train"]) == 2  # the first row is data, not a header
    assert list(raw["train"]["sentence"]) == ["Our friends won't buy this analysis.", "They drank the pub."]
    assert list(raw["train"]["label"]) == [1, 0]


def test_mnli_two_dev_files(tmp_path):
    head = ["index", "promptID", "pairID", "genre", "s1bp", "s2bp", "s1p", "s2p", "sentence1", "sentence2"]
    write(
        tmp_path / "MNLI" / "train.tsv",
        [head + ["label1", "gold_label"], ["0"] * 8 + ["p", "h", "neutral", "neutral"]],
    )
    dev_head = head + ["label1", "label2", "label3", "label4", "label5", "gold_label"]
    row = ["0"] * 8 + ["p", "h"] + ["x"] * 5
    write(tmp_path / "MNLI" / "dev_matched.tsv", [dev_head, row + ["contradiction"], row + ["entailment"]])
    write(tmp_path / "MNLI" / "dev_mismatched.tsv", [dev_head, row + ["neutral"]])
    raw = load_raw(task("mnli", tmp_path))
    assert set(raw) == {"train", "validation_matched", "validation_mismatched"}
    assert raw["train"].column_names == ["premise", "hypothesis", "label"]
    assert list(raw["train"]["label"]) == [1]
    assert list(raw["validation_matched"]["label"]) == [2, 0]
    assert list(raw["validation_mismatched"]["label"]) == [1]


def test_qqp_skips_a_few_malformed_rows(tmp_path, caplog):
    head = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    good = [[str(i), "1", "2", f"q{i}?", f"r{i}?", str(i % 2)] for i in range(200)]
    write(
        tmp_path / "QQP" / "train.tsv",
        [head, *good[:100], ["999", "1", "2", "a question without a pair"], *good[100:]],
    )
    write(tmp_path / "QQP" / "dev.tsv", [head, *good[:3]])
    raw = load_raw(task("qqp", tmp_path))
    assert len(raw["train"]) == 200
    assert "skipped 1/201 malformed rows" in caplog.text


def test_mostly_malformed_file_is_a_data_error(tmp_path):
    # An RTE file with a column missing in every row: the wrong file, not a few bad lines.
    write(
        tmp_path / "RTE" / "train.tsv",
        [["index", "sentence1", "sentence2", "label"], ["0", "a", "entailment"]],
    )
    write(
        tmp_path / "RTE" / "dev.tsv",
        [["index", "sentence1", "sentence2", "label"], ["0", "a", "b", "entailment"]],
    )
    with pytest.raises(DataError, match=r"train\.tsv: 1/1 rows have the wrong number of fields"):
        load_raw(task("rte", tmp_path))


def test_missing_column_is_a_data_error(tmp_path):
    write(tmp_path / "SST-2" / "train.tsv", [["text", "label"], ["good", "1"]])
    write(tmp_path / "SST-2" / "dev.tsv", [["sentence", "label"], ["good", "1"]])
    with pytest.raises(DataError, match=r"train\.tsv: missing column 'sentence'"):
        load_raw(task("sst2", tmp_path))


def test_unknown_label_string_is_a_data_error(tmp_path):
    head = ["index", "question", "sentence", "label"]
    write(
        tmp_path / "QNLI" / "train.tsv", [head, ["0", "q?", "s.", "entailment"], ["1", "q?", "s.", "entails"]]
    )
    write(tmp_path / "QNLI" / "dev.tsv", [head, ["0", "q?", "s.", "entailment"]])
    with pytest.raises(DataError, match=r"train\.tsv:3: unknown label 'entails'"):
        load_raw(task("qnli", tmp_path))


def test_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match=r"train\.tsv not found"):
        load_raw(task("rte", tmp_path))


def test_stsb_float_labels(tmp_path):
    head = [
        "index",
        "genre",
        "filename",
        "year",
        "old_index",
        "source1",
        "source2",
        "sentence1",
        "sentence2",
        "score",
    ]
    rows = [head, ["0", "g", "f", "2012", "1", "s", "s", "A plane.", "An air plane.", "5.000"]]
    rows.append(["1", "g", "f", "2012", "4", "s", "s", "A man.", "A cat.", "0.5"])
    write(tmp_path / "STS-B" / "train.tsv", rows)
    write(tmp_path / "STS-B" / "dev.tsv", rows)
    raw = load_raw(task("stsb", tmp_path))
    assert list(raw["train"]["label"]) == [5.0, 0.5]


def test_hub_offline_is_a_clear_data_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as err:
        load_raw(task("rte"))
    msg = str(err.value)
    assert "task.data_dir" in msg and "task=toy" in msg and "\n" not in msg


def test_tokenize_columns_and_cache_hit(tmp_path, tokenizer):
    cfg = task("toy", **{"recipe.num_train": 40, "recipe.num_dev": 10})
    raw = load_raw(cfg)
    first = tokenize_splits(raw, tokenizer, cfg, tmp_path)
    assert set(first) == {"train", "validation"}
    tr = first["train"]
    assert set(tr.column_names) == {"input_ids", "attention_mask", "token_type_ids", "labels", "idx"}
    assert list(tr["idx"]) == list(range(40))
    assert list(tr["labels"]) == list(raw["train"]["label"])
    files = sorted((tmp_path / "tokenized").glob("*.arrow"))
    assert len(files) == 2
    mtimes = [f.stat().st_mtime_ns for f in files]

    second = tokenize_splits(load_raw(cfg), tokenizer, cfg, tmp_path)  # regenerated data, same content
    assert sorted((tmp_path / "tokenized").glob("*.arrow")) == files
    assert [f.stat().st_mtime_ns for f in files] == mtimes  # read back, not rewritten
    assert second["train"].cache_files[0]["filename"] in {str(f) for f in files}
    assert list(second["train"]["input_ids"]) == list(tr["input_ids"])

    cfg.max_seq_length = 8  # a different key -> a new file, truncated
    third = tokenize_splits(raw, tokenizer, cfg, tmp_path)
    assert len(list((tmp_path / "tokenized").glob("*.arrow"))) == 4
    assert max(len(x) for x in third["train"]["input_ids"]) == 8


def test_collate_pads_to_batch_max():
    batch = collate(
        {
            "input_ids": [[2, 10, 3], [2, 11, 12, 13, 3]],
            "attention_mask": [[1, 1, 1], [1, 1, 1, 1, 1]],
            "token_type_ids": [[0, 0, 0], [0, 0, 0, 1, 1]],
            "labels": [1, 0],
            "idx": [7, 3],
        },
        pad_token_id=0,
    )
    assert batch["input_ids"].tolist() == [[2, 10, 3, 0, 0], [2, 11, 12, 13, 3]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]]
    assert batch["labels"].dtype == torch.long and batch["labels"].tolist() == [1, 0]
    assert batch["idx"].tolist() == [7, 3]
    reg = collate({"input_ids": [[5]], "labels": [2.5], "idx": [0]}, pad_token_id=1)
    assert reg["labels"].dtype == torch.float and "token_type_ids" not in reg


def test_loader_shuffle_is_seeded_and_covers_every_row(tmp_path, tokenizer):
    cfg = task("toy", **{"recipe.num_train": 50, "recipe.num_dev": 10})
    data = load_task_data(cfg, tokenizer, tmp_path)
    assert data.label_names == ["positive", "mixed", "negative"] and data.num_labels == 3
    assert not data.is_regression and set(data.dev) == {"validation"}

    def order(seed):
        loader = make_loader(data.train, 16, shuffle=True, seed=seed, pad_token_id=tokenizer.pad_token_id)
        return [b["idx"].tolist() for b in loader], [b["idx"].tolist() for b in loader]

    (e1, e2), (again1, _) = order(1), order(1)
    assert e1 == again1  # same seed, same order
    assert e1 != e2  # but each epoch is reshuffled
    assert e1 != order(2)[0]
    assert sorted(sum(e1, [])) == list(range(50))
    assert [len(b) for b in e1] == [16, 16, 16, 2]

    loader = make_loader(
        data.dev["validation"], 4, shuffle=False, seed=0, pad_token_id=tokenizer.pad_token_id
    )
    batch = next(iter(loader))
    assert batch["idx"].tolist() == [0, 1, 2, 3]
    lengths = batch["attention_mask"].sum(1)
    assert batch["input_ids"].shape[1] == int(lengths.max())
    for row, n in zip(batch["input_ids"], lengths, strict=True):
        assert (row[n:] == tokenizer.pad_token_id).all() and row[0] == tokenizer.cls_token_id


@pytest.mark.skipif(os.environ.get("DISTILL_SWEEP_HUB_TESTS") != "1", reason="needs the HF hub")
def test_hub_rte_label_order():  # pragma: no cover - run by hand where the hub is reachable
    raw = load_raw(task("rte"))
    assert set(raw) == {"train", "validation"} and len(raw["validation"]) == 277
