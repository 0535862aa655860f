"""The report's comparisons over seeds and dev examples (report.examples): from the records' dev predictions,
a note for records without them (written before they were kept), a changed dev set left out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import write_record
from scipy import stats as sps

from distill_sweep.records.predictions import write_predictions
from distill_sweep.report.cli import main

N = 400


def _run(root: Path, objective: str, seed: int, accuracy: float, labels: np.ndarray, dev_hash: str = "dev1",
         with_predictions: bool = True, **record: Any) -> np.ndarray:
    """A record on toy whose dev predictions score `accuracy` (the record's score is theirs); `record`: more
    of write_record's keys (init, student, ...)."""
    rng = np.random.default_rng(hash((objective, seed, *sorted(record.items()))) % 2**32)
    wrong = rng.choice(N, size=round((1 - accuracy) * N), replace=False)
    preds = labels.copy()
    preds[wrong] = 1 - preds[wrong]
    path = write_record(root, task="toy", objective=objective, seed=seed, score=float(np.mean(preds == labels)),
                        **record)
    if with_predictions:
        write_predictions(path.parent, {"validation": preds}, {"validation": labels}, {"validation": dev_hash},
                          "prediction", 1)
    return preds


def test_multi_bootstrap_rows_from_the_records_predictions(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    labels = np.random.default_rng(0).integers(0, 2, N)
    by_seed = []
    for seed in range(3):
        a = _run(tmp_path, "att_kl", seed, 0.80, labels)
        b = _run(tmp_path, "att_mse", seed, 0.72, labels)
        by_seed.append(100 * (np.mean(a == labels) - np.mean(b == labels)))
        if seed == 0:
            first = (a, b)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    assert "Table 1: comparisons over seeds and dev examples" in out
    frame = pd.read_csv(tmp_path / "tables" / "examples_table1.csv")
    (row,) = frame.to_dict("records")
    sign = 1.0 if row["a"] == "att_kl" else -1.0  # the table's pair order (the paper's objective order)
    assert row["seeds"] == 3 and row["examples"] == N
    assert row["mean_diff"] == pytest.approx(sign * np.mean(by_seed))  # the seed-level difference, from predictions
    assert row["ci_low"] < row["mean_diff"] < row["ci_high"] and 0 < sign * row["mean_diff"] and row["p"] < 0.01
    assert not row["ci_low"] < 0 < row["ci_high"]
    # several seeds: no one-seed test beside the methods' comparison, in the table or its CSV
    assert not any(k.startswith("one_seed") for k in row) and "p (one seed)" not in out and "McNemar" not in out
    assert not (tmp_path / "tables" / "two_runs_table1.csv").exists()
    del first


def test_a_one_seed_pair_is_a_test_of_two_runs_in_its_own_section(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """One matched seed: McNemar on the two runs, named as a test of two runs (dev-example sampling only), in a
    section after the tables, not in the comparisons over seeds (which it is no multi-bootstrap of)."""
    labels = np.random.default_rng(5).integers(0, 2, N)
    a = _run(tmp_path, "att_kl", 0, 0.80, labels)
    b = _run(tmp_path, "att_mse", 0, 0.70, labels)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    assert "comparisons over seeds and dev examples" not in out
    assert not (tmp_path / "tables" / "examples_table1.csv").exists()
    head = "Table 1: tests of two single runs over dev examples (not of the methods)"
    assert head in out and out.index(head) > out.index("Table 1 paired t-tests")
    assert "not whether the methods do" in out
    (row,) = pd.read_csv(tmp_path / "tables" / "two_runs_table1.csv").to_dict("records")
    sign = 1 if row["a"] == "att_kl" else -1
    right_a, right_b = (a == labels, b == labels)[::sign]
    n_ab, n_ba = int(np.sum(right_a & ~right_b)), int(np.sum(~right_a & right_b))
    assert row["one_seed"] == 0 and row["one_seed_test"] == f"McNemar ({n_ab} vs {n_ba} discordant)"
    assert row["one_seed_p"] == pytest.approx(sps.chi2.sf((abs(n_ab - n_ba) - 1) ** 2 / (n_ab + n_ba), df=1))
    assert row["mean_diff"] == pytest.approx(100 * (np.mean(right_a) - np.mean(right_b)))


def test_records_without_predictions_get_the_seed_level_statistics_and_a_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = np.random.default_rng(1).integers(0, 2, N)
    for seed in range(2):
        _run(tmp_path, "att_kl", seed, 0.80, labels, with_predictions=False)  # as an older version wrote them
        _run(tmp_path, "att_mse", seed, 0.70, labels, with_predictions=False)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    assert "Table 1 paired t-tests" in out  # the seed-level statistics as before
    assert ("note: 1 pair(s) x task without dev predictions in their records (written before records kept them): "
            "seed-level statistics only") in out
    assert not (tmp_path / "tables" / "examples_table1.csv").exists()


def test_a_seed_scored_on_another_dev_set_is_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = np.random.default_rng(2).integers(0, 2, N)
    for seed in range(3):
        _run(tmp_path, "att_kl", seed, 0.80, labels, dev_hash="dev2" if seed == 2 else "dev1")
        _run(tmp_path, "att_mse", seed, 0.70, labels)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    frame = pd.read_csv(tmp_path / "tables" / "examples_table1.csv")
    # the record names no dev set, its own predictions file (which gives its accuracy back) another one: the run
    # is out of every statistic, the t-test's pairs and the matched seeds too
    assert list(frame["seeds"]) == [2] and list(frame["seeds_matched"]) == [2]
    assert list(pd.read_csv(tmp_path / "tables" / "ttests_table1.csv")["n"]) == [2]
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "left out of every statistic" in x]
    assert "seed 2" in line and "att_kl" in line and "another dev set" in line


def test_table3_compares_the_inits_of_each_row_over_seeds_and_examples(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = np.random.default_rng(3).integers(0, 2, N)
    preds: dict[tuple[str, int], np.ndarray] = {}
    for seed in range(3):
        for init, accuracy in (("1", 0.82), ("3", 0.74)):
            preds[(init, seed)] = _run(tmp_path, "att_kl", seed, accuracy, labels, init=init)
        _run(tmp_path, "att_mse", seed, 0.75, labels, init="1", with_predictions=False)  # an older record
        _run(tmp_path, "att_mse", seed, 0.70, labels, init="3", with_predictions=False)
    assert main([str(tmp_path), "table=3", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    assert "Table 3: comparisons over seeds and dev examples" in out
    frame = pd.read_csv(tmp_path / "tables" / "examples_table3.csv")
    (row,) = frame.to_dict("records")  # att_kl's two inits; att_mse has no predictions
    assert row["system"] == "att_kl" and {row["a"], row["b"]} == {"4,8,12", "1,2,3"}  # inits 1 and 3 of 12 layers
    first = "1" if row["a"] == "4,8,12" else "3"
    second = "3" if first == "1" else "1"
    by_seed = [100 * (np.mean(preds[(first, s)] == labels) - np.mean(preds[(second, s)] == labels)) for s in range(3)]
    assert row["seeds"] == 3 and row["mean_diff"] == pytest.approx(np.mean(by_seed))
    assert row["ci_low"] < row["mean_diff"] < row["ci_high"]
    assert "one_seed_test" not in row  # three seeds: no test of two runs beside the inits' comparison
    assert ("note: 1 pair(s) x task without dev predictions in their records (written before records kept them): "
            "seed-level statistics only") in out


def test_a_layouts_pairs_against_its_baseline_over_examples(tmp_path: Path) -> None:
    labels = np.random.default_rng(4).integers(0, 2, N)
    preds = {}
    for seed in range(2):
        for objective, accuracy in (("vanilla_kd", 0.78), ("logit_mse", 0.70)):
            preds[(objective, seed)] = _run(tmp_path, objective, seed, accuracy, labels, student="bilstm")
    assert main([str(tmp_path), "table=bilstm", "paper=false", "format=text"]) == 0
    (row,) = pd.read_csv(tmp_path / "tables" / "examples_bilstm.csv").to_dict("records")
    assert (row["a"], row["b"]) == ("BiLSTM / logit MSE", "BiLSTM / vanilla KD")  # the layout's pair
    by_seed = [100 * (np.mean(preds[("logit_mse", s)] == labels) - np.mean(preds[("vanilla_kd", s)] == labels))
               for s in range(2)]
    assert row["seeds"] == 2 and row["mean_diff"] == pytest.approx(np.mean(by_seed))


@pytest.mark.parametrize("damage", ["truncated", "unequal"])
def test_a_damaged_predictions_file_leaves_its_run_out_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             damage: str) -> None:
    """A partial copy (BadZipFile) or arrays of unequal length (ValueError) took the whole report down; now the
    run is left out of the per-example comparisons and named, with the reason on one line."""
    labels = np.random.default_rng(5).integers(0, 2, N)
    for seed in range(3):
        _run(tmp_path, "att_kl", seed, 0.80, labels)
        _run(tmp_path, "att_mse", seed, 0.70, labels)
    (victim,) = tmp_path.glob("toy/att_kl/*/seed-1/*/dev_predictions.npz")
    if damage == "truncated":
        victim.write_bytes(victim.read_bytes()[:300])
    else:
        write_predictions(victim.parent, {"validation": labels[:-1]}, {"validation": labels}, {"validation": "dev1"},
                          "prediction", 1)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    frame = pd.read_csv(tmp_path / "tables" / "examples_table1.csv")
    assert list(frame["seeds"]) == [2] and list(frame["seeds_matched"]) == [3]
    (line,) = [x for x in out.splitlines() if str(victim) in x]
    assert "left out" in line and ("unreadable" in line or "differ in shape" in line)


def _set_dev_hash(result: Path, dev_hash: str) -> None:
    """The record at `result` as a job of this version writes it: with its dev split's content hash."""
    raw = json.loads(result.read_text())
    raw["data"]["dev_hash"] = {"validation": dev_hash}
    result.write_text(json.dumps(raw))


def test_the_first_seeds_file_from_another_dev_set_drops_only_that_run_with_the_true_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The first seed's A file made on another dev set than its record's: the old code judged every seed against
    it, dropped the whole pair and said the records "predate stored predictions". Now only that run is left out,
    named, because its predictions are not on its record's dev set."""
    labels = np.random.default_rng(6).integers(0, 2, N)
    for seed in range(3):
        _run(tmp_path, "att_kl", seed, 0.80, labels, dev_hash="other" if seed == 0 else "dev1")
        _run(tmp_path, "att_mse", seed, 0.70, labels)
    for result in tmp_path.glob("toy/*/*/seed-*/*/result.json"):
        _set_dev_hash(result, "dev1")  # every record was scored on dev1
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    frame = pd.read_csv(tmp_path / "tables" / "examples_table1.csv")
    assert list(frame["seeds"]) == [2] and list(frame["seeds_left_out"].astype(str)) == ["0"]
    assert "predate" not in out and "written before records kept them" not in out
    (line,) = [x for x in out.splitlines() if "predictions left out" in x]
    assert "att_kl" in line and "seed 0" in line and "another dev set than its record's" in line


def test_predictions_that_do_not_give_their_records_metric_are_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Edited predictions (the review: -12.7 points at p = 5e-43 where the records give -1.07) were used as they
    were; a run whose stored predictions do not give its record's accuracy back is now left out and named."""
    labels = np.random.default_rng(7).integers(0, 2, N)
    for seed in range(3):
        _run(tmp_path, "att_kl", seed, 0.80, labels)
        _run(tmp_path, "att_mse", seed, 0.70, labels)
    (victim,) = tmp_path.glob("toy/att_mse/*/seed-2/*/dev_predictions.npz")
    edited = 1 - labels  # accuracy 0, where the record says 0.70
    write_predictions(victim.parent, {"validation": edited}, {"validation": labels}, {"validation": "dev1"},
                      "prediction", 1)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    frame = pd.read_csv(tmp_path / "tables" / "examples_table1.csv")
    assert list(frame["seeds"]) == [2] and list(frame["seeds_left_out"].astype(str)) == ["2"]
    (line,) = [x for x in out.splitlines() if "predictions left out" in x]
    assert "att_mse" in line and "seed 2" in line and "accuracy 0.0000 where its record says 0.7000" in line
