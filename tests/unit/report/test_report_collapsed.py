"""Collapsed runs (analysis/collapse.py; report/collapsed.py): a run at the dev majority-class level, or with
(near) constant dev predictions, is named in its table's footnotes with its cell's value without it, and every
run's value per seed is in runs_<table>.csv."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import write_record

from distill_sweep.analysis import collapse
from distill_sweep.records.predictions import write_predictions
from distill_sweep.report.cli import main

N = 50
LABELS = np.array([0] * 27 + [1] * 23)  # dev majority class 0: 27/50 = 0.54


def _run(root: Path, objective: str, seed: int, preds: np.ndarray) -> Path:
    score = float(np.mean(preds == LABELS))
    path = write_record(root, objective=objective, seed=seed, score=score)
    write_predictions(path.parent, {"validation": preds}, {"validation": LABELS}, {"validation": "d"}, "prediction", 1)
    return path


def _learned(wrong: int, seed: int) -> np.ndarray:
    preds = LABELS.copy()
    idx = np.random.default_rng(seed).choice(N, size=wrong, replace=False)
    preds[idx] = 1 - preds[idx]
    return preds


def test_the_rule_by_hand() -> None:
    assert collapse.majority_score(LABELS, "accuracy") == pytest.approx(0.54)
    assert collapse.majority_score(LABELS, "f1") == pytest.approx(2 * 0.46 / 1.46)  # predicting 1 everywhere
    assert collapse.majority_score(LABELS, "mcc") == 0.0
    assert collapse.at_baseline(0.545, 0.54) and not collapse.at_baseline(0.56, 0.54)
    assert "class 0 for 100%" in collapse.reason(0.54, "accuracy", 0.54, np.zeros(N, dtype=np.int16), LABELS)
    assert collapse.reason(0.9, "accuracy", 0.54, _learned(5, 0), LABELS) is None


def test_a_collapsed_run_is_named_with_its_cell_without_it(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    good = {s: _learned(w, s) for s, w in ((0, 8), (1, 10))}  # accuracy 0.84 and 0.80
    for s, preds in good.items():
        _run(tmp_path, "att_kl", s, preds)
    victim = _run(tmp_path, "att_kl", 2, np.zeros(N, dtype=np.int16))  # the majority class everywhere: 0.54
    for s in range(3):
        _run(tmp_path, "att_mse", s, _learned(12 + s, 10 + s))
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "collapsed run:" in x]
    assert str(victim.parent) in line and "att_kl" in line and "seed 2" in line
    assert "class 0 for 100%" in line and "accuracy 54.0 at the dev majority-class level (54.0)" in line
    assert "its cell without it: 82.0±2.83 (2)" in line  # mean of 84 and 80, std sqrt(8)
    runs = pd.read_csv(tmp_path / "tables" / "runs_table1.csv")
    mine = runs[runs["system"] == "att_kl"].sort_values("seed")
    assert mine["value"].tolist() == pytest.approx([84.0, 80.0, 54.0])
    assert mine["collapsed"].tolist() == [False, False, True]
    assert set(mine["cell_min"]) == {54.0} and set(mine["cell_max"]) == {84.0}
    assert mine["mean_without_collapsed"].tolist() == pytest.approx([82.0] * 3)
    assert not runs[runs["system"] == "att_mse"]["collapsed"].any()


def _att_kl_seed_2_collapsed(tmp_path: Path) -> None:
    """att_kl's seed 2 predicts class 0 for every example; its seeds 0 and 1 and att_mse's three learned."""
    for s, wrong in ((0, 8), (1, 10)):
        _run(tmp_path, "att_kl", s, _learned(wrong, s))
    _run(tmp_path, "att_kl", 2, np.zeros(N, dtype=np.int16))
    for s in range(3):
        _run(tmp_path, "att_mse", s, _learned(12 + s, 10 + s))


def test_the_tests_and_the_example_comparisons_that_use_a_collapsed_run_say_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _att_kl_seed_2_collapsed(tmp_path)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    assert "these tests pair 1 collapsed run(s), kept" in out and "toy / att_kl / seed 2" in out
    (line,) = [x for x in out.splitlines() if "collapsed run (kept in the comparison)" in x]
    assert "att_kl" in line and "seed 2" in line and "class 0 for 100%" in line
    examples = pd.read_csv(tmp_path / "tables" / "examples_table1.csv")
    assert examples["seeds_collapsed"].astype(str).tolist() == ["2"]


def test_a_layouts_table_flags_its_collapsed_runs_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for s in range(2):
        for objective, wrong in (("vanilla_kd", 8), ("logit_mse", 12)):
            preds = np.zeros(N, dtype=np.int16) if (objective, s) == ("logit_mse", 1) else _learned(wrong, s)
            score = float(np.mean(preds == LABELS))
            path = write_record(tmp_path, objective=objective, seed=s, score=score, student="bilstm")
            write_predictions(path.parent, {"validation": preds}, {"validation": LABELS}, {"validation": "d"},
                              "prediction", 1)
    assert main([str(tmp_path), "table=bilstm", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "collapsed run:" in x]
    assert "logit MSE" in line and "seed 1" in line and "its cell without it: 76.0 (1)" in line  # 1 - 12/50
    runs = pd.read_csv(tmp_path / "tables" / "runs_bilstm.csv")
    assert runs["collapsed"].sum() == 1


def test_a_decoder_run_at_its_dev_baseline_is_marked_and_named(tmp_path: Path) -> None:
    """The decoder demo's choice accuracies 0.26-0.31 stood with no reference (guessing gives 1/3): the table now
    prints the dev baseline and marks a cell whose run is at or below it, naming the run."""
    import json

    from distill_sweep.report import decoder

    rows = []
    for objective, seed, choice in (("fkl", 1, 0.62), ("fkl", 2, 0.30), ("rkl", 1, 0.70), ("rkl", 2, 0.66)):
        path = tmp_path / f"{objective}-{seed}" / "result.json"
        path.parent.mkdir()
        path.write_text(json.dumps({
            "task": "causal_toy_instructions", "config": {"procedure": {"name": "causal_lm"}},
            "final": {"dev": {"perplexity": 3.0, "token_accuracy": 0.5, "choice_accuracy": choice}},
            "init": {"layers": [1]}, "teacher": {"dev": {"perplexity": 1.5, "choice_accuracy": 0.9},
                                                 "majority_baseline": {"token_accuracy": 0.2, "choice_accuracy": 0.34}},
            "causal_lm": {"data": {"key": "k"}}}))
        rows.append({"procedure": "causal_lm", "status": "completed", "path": str(path), "init_name": "bottom",
                     "student_name": "truncated", "task": "causal_toy_instructions", "teacher_name": "tiny_llama",
                     "student_layers": 1, "objective": objective, "seed": seed})
    frame = decoder.runs(pd.DataFrame(rows))
    ((_, headers, cells, _, _, teacher),) = decoder.tables(frame, ddof=1, alpha=0.05)
    choice = headers.index("choice acc")
    by_objective = {r[0]: r for r in cells}
    assert by_objective["fkl"][choice].endswith("‡") and not by_objective["rkl"][choice].endswith("‡")
    assert "dev baseline" in teacher and "choice acc 0.340" in teacher
    (line, rule) = decoder.collapsed_notes(decoder.setting_parts(frame)[0])
    assert "fkl" in line and "seed 2" in line and "choice_accuracy 0.300 at or below" in line and "(0.340)" in line


def test_the_cell_with_a_collapsed_run_is_marked_and_its_hover_lists_the_seeds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _att_kl_seed_2_collapsed(tmp_path)
    assert main([str(tmp_path), "table=1", "paper=false"]) == 0
    out = capsys.readouterr().out
    table = out.split("== Table 1: objectives")[1].split("\n\n")[1]
    (att_kl,) = [x for x in table.splitlines() if x.startswith("att_kl")]
    (att_mse,) = [x for x in table.splitlines() if x.startswith("att_mse")]
    assert "72.7±16.29 (3) ‡" in att_kl and "‡" not in att_mse  # mean of 84, 80, 54; std by hand
    html = (tmp_path / "tables" / "report.html").read_text()
    assert "per seed: seed 0: 84.0, seed 1: 80.0, seed 2: 54.0 ‡ (min-max 54.0-84.0)" in html
