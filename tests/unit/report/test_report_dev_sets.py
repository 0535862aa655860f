"""One dev set, one run set (report/build.py through analysis/frames.one_dev_set; report/decoder.py): a record
scored on another dev set than its task's other runs is named and left out of every statistic; decoder runs on
different data are different tables, never one cell."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import write_record

from distill_sweep.analysis import frames
from distill_sweep.report import decoder
from distill_sweep.report.cli import main

SCORES = {("att_kl", 0): 0.80, ("att_kl", 1): 0.84, ("att_kl", 2): 0.10,  # seed 2: scored on another dev set
          ("att_mse", 0): 0.70, ("att_mse", 1): 0.76, ("att_mse", 2): 0.73}


def _with_dev_hash(path: Path, dev_hash: str) -> None:
    raw = json.loads(path.read_text())
    raw["data"]["dev_hash"] = {"validation": dev_hash}
    path.write_text(json.dumps(raw))


def _store(root: Path) -> Path:
    for (objective, seed), score in SCORES.items():
        path = write_record(root, objective=objective, seed=seed, score=score)
        _with_dev_hash(path, "other" if (objective, seed) == ("att_kl", 2) else "dev1")
        if (objective, seed) == ("att_kl", 2):
            victim = path
    return victim


def test_a_record_on_another_dev_set_is_named_and_left_out_of_every_statistic(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = _store(tmp_path)
    assert main([str(tmp_path), "table=all", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if str(victim) in x and "left out of every statistic" in x]
    assert "att_kl" in line and "seed 2" in line and "another dev set" in line
    table = pd.read_csv(tmp_path / "tables" / "table1.csv")
    cell = table[(table["row"] == "att_kl") & (table["task"] == "toy")].iloc[0]
    assert cell["n"] == 2 and cell["mean"] == pytest.approx(100 * (0.80 + 0.84) / 2)  # by hand: seeds 0 and 1
    tests = pd.read_csv(tmp_path / "tables" / "ttests_table1.csv")
    assert list(tests["n"]) == [2]  # seed 2's pair is gone from the t-test too
    table3 = pd.read_csv(tmp_path / "tables" / "table3.csv")
    assert table3[(table3["row"] == "att_kl") & (table3["task"] == "toy")]["n"].tolist() == [2]


def test_one_dev_set_keeps_the_majority_and_leaves_unknown_hashes_pooled(tmp_path: Path) -> None:
    _store(tmp_path)
    write_record(tmp_path, objective="att_mse", seed=3, score=0.7)  # an older record: no hash
    kept, notes = frames.one_dev_set(frames.load_store(tmp_path).records)
    assert len(kept) == 6 and not any(kept["dev_hash"] == "other")
    assert any("1 completed toy run(s) name no dev set" in n for n in notes)


def _decoder_record(root: Path, name: str, seed: int, key: str, ppl: float) -> dict:
    path = root / name / "result.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"task": "causal_toy_instructions", "config": {"procedure": {"name": "causal_lm"}},
                                "final": {"dev": {"perplexity": ppl, "token_accuracy": 0.5}},
                                "init": {"layers": [1]}, "teacher": {"dev": {"perplexity": 1.5}},
                                "causal_lm": {"data": {"source": "instructions", "name": "toy_instructions",
                                                       "key": key}}}))
    return {"procedure": "causal_lm", "status": "completed", "path": str(path), "init_name": "bottom",
            "student_name": "truncated", "task": "causal_toy_instructions", "teacher_name": "tiny_llama",
            "student_layers": 1, "objective": "fkl" if name.startswith("f") else "rkl", "seed": seed}


def test_decoder_runs_on_different_data_are_different_tables_not_one_cell(tmp_path: Path) -> None:
    """A decoder job on the user's own JSONL is recorded under the demo's instructions name; the report averaged
    both data sets into one cell (or crashed with a broadcast error where seeds collided). Now the data's content
    key splits them into tables of their own."""
    rows = [_decoder_record(tmp_path, f"{o}-{k}-{s}", s, k, ppl) for o, k, s, ppl in
            [("f", "demo", 1, 3.0), ("f", "demo", 2, 3.2), ("r", "demo", 1, 3.3), ("r", "demo", 2, 3.6),
             ("f", "mine", 1, 9.0), ("f", "mine", 2, 9.4), ("f", "mine", 3, 9.1), ("r", "mine", 1, 9.9),
             ("r", "mine", 2, 9.7), ("r", "mine", 3, 9.5)]]
    frame = decoder.runs(pd.DataFrame(rows))
    got = decoder.tables(frame, ddof=1, alpha=0.05)
    assert len(got) == 2  # one table per data set
    titles = [t[0] for t in got]
    assert any("demo" in t for t in titles) and any("mine" in t for t in titles)
    for title, _, cells, _, tests, _ in got:
        fkl = next(r for r in cells if r[0] == "fkl")
        expected = "3.100±0.141 (2)" if "demo" in title else "9.167±0.208 (3)"  # mean±std by hand
        assert fkl[-2] == expected
        (test,) = tests
        assert test[2] == ("2" if "demo" in title else "3")  # pairs of its own data's seeds only


def test_an_older_record_is_judged_by_its_own_predictions_files_dev_set(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Records written before they named their dev set: a run whose predictions file (which gives its record's
    accuracy back, so it is that run's) was made on another dev set is left out of every statistic too."""
    import numpy as np

    from distill_sweep.records.predictions import write_predictions

    labels = np.array([0, 1] * 25)
    victim = None
    for (objective, seed), score in SCORES.items():
        preds = labels.copy()
        wrong = round((1 - score) * len(labels))
        preds[:wrong] = 1 - preds[:wrong]
        path = write_record(tmp_path, objective=objective, seed=seed, score=float(np.mean(preds == labels)))
        other = (objective, seed) == ("att_kl", 2)
        write_predictions(path.parent, {"validation": preds}, {"validation": labels},
                          {"validation": "other" if other else "dev1"}, "prediction", 1)
        victim = path if other else victim
    assert main([str(tmp_path), "table=all", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    assert any(str(victim) in x and "left out of every statistic" in x for x in out.splitlines())
    cell = pd.read_csv(tmp_path / "tables" / "table1.csv").query("row == 'att_kl' and task == 'toy'").iloc[0]
    assert cell["n"] == 2 and cell["mean"] == pytest.approx(100 * (0.80 + 0.84) / 2)
