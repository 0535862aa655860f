"""distill_sweep.analysis.paper: the paper's numbers, and comparing like with like only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers import ROOT, write_record

from distill_sweep.analysis import frames, paper, stats

PAPER_DIR = ROOT / "results" / "paper"


def _compare(root: Path, table: str = "table1_task_specific_objectives.csv") -> tuple[pd.DataFrame, pd.DataFrame]:
    sc, _ = frames.scores(frames.load_records(root), "paper")
    agg = stats.aggregate(sc)
    settings = sc[paper.SETTING_COLUMNS].drop_duplicates(["system", "init_label"])
    return paper.compare_with_paper(agg, stats.row_averages(agg), settings, paper.load_paper_table(PAPER_DIR / table))


def test_load_paper_table() -> None:
    table = paper.load_paper_table(PAPER_DIR / "table1_task_specific_objectives.csv")
    kd = table[(table["objective"] == "vanilla_kd") & (table["task"] == "cola")].iloc[0]
    assert kd["init_label"] == "4,8,12" and kd["mean"] == 69.1 and kd["std"] == 0.0
    avg = table[(table["objective"] == "vanilla_kd") & (table["task"] == "avg")].iloc[0]
    assert avg["mean"] == 71.8


def test_compare_with_paper_repo_csv(tmp_path: Path) -> None:
    for seed, score in enumerate([0.70, 0.72]):
        write_record(tmp_path, task="cola", seed=seed, score={"accuracy": score, "mcc": 0.1})
    write_record(tmp_path, task="toy", score=0.5)
    comp, excluded = _compare(tmp_path)
    assert list(comp["task"]) == ["cola"]  # toy is not in the paper
    assert comp.iloc[0]["ours"] == pytest.approx(71.0)
    assert comp.iloc[0]["delta"] == pytest.approx(71.0 - 69.1)
    assert excluded.empty


def test_only_the_papers_setting_is_compared(tmp_path: Path) -> None:
    """A 6-layer teacher's bottom student has layers 1,2,3 like the paper's (1,2,3) row: not compared."""
    write_record(tmp_path, task="qnli", objective="vanilla_kd", init="3", score=0.80)
    write_record(tmp_path, task="qnli", objective="vanilla_kd", init="3", score=0.70, teacher="tiny", teacher_layers=6)
    write_record(tmp_path, task="qnli", objective="vanilla_kd", init="3", score=0.60, student_layers=6)
    write_record(tmp_path, task="qnli", procedure="finetune", init="3", score=0.50)
    write_record(tmp_path, task="qnli", objective="vanilla_kd", init="[1,5,9]", score=0.40)  # custom rule
    comp, excluded = _compare(tmp_path, "table3_task_specific_init.csv")
    assert len(comp) == 1  # only the 12-layer teacher's truncated 3-layer bottom student
    row = comp.iloc[0]
    assert (row["objective"], row["init_label"], row["task"]) == ("vanilla_kd", "1,2,3", "qnli")
    assert row["ours"] == pytest.approx(80.0) and row["paper"] == pytest.approx(86.2)
    assert row["delta"] == pytest.approx(80.0 - 86.2)
    reasons = " | ".join(excluded["reason"])
    assert "teacher has 6 layers, the paper's 12" in reasons
    assert "student has 6 layers, the paper's 3" in reasons
    assert "procedure finetune, the paper's task_specific" in reasons
    assert "init custom, the paper's are skip/mixed/bottom" in reasons
    assert len(excluded) == 4


def test_not_paper_setting() -> None:
    assert paper.not_paper_setting("task_specific", 12, "truncated", 3, "mixed") is None
    assert paper.not_paper_setting("task_specific", 12, "fresh", 3, "skip") == "student fresh, the paper's truncated"
    assert paper.not_paper_setting("task_specific", None, "truncated", 3, "skip") == (
        "teacher has unknown layers, the paper's 12")


def test_column_metric_modes() -> None:
    assert paper.column_metric("mrpc", "header") == "f1"
    assert paper.column_metric("cola", "header") == "mcc"
    assert paper.column_metric("mrpc", "paper") == "accuracy"
    assert paper.column_metric("cola", "paper") == "accuracy"
    assert paper.column_metric("mnli", "paper") == "accuracy"
    assert paper.column_metric("toy", "header", "f1") == "f1"  # unknown task: its primary metric
    assert paper.norm_task("SST-2") == "sst2" and paper.norm_task("sts_b") == "stsb"
    # a task of the user's own keeps its name (the HTML once printed "causaltoyinstructions")
    assert paper.norm_task("causal_toy_instructions") == "causal_toy_instructions"
    assert paper.task_label(paper.norm_task("My_Task")) == "my_task"
    assert paper.objective_order(["zzz", "att_kl", "vanilla_kd"]) == ["vanilla_kd", "att_kl", "zzz"]
