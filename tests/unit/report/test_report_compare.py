"""Two results directories compared (report/compare.py): pairs by config hash or by job, per-task differences with
their t-interval and paired t-test worked by hand, and the jobs found on one side only."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from distill_sweep.records import files
from distill_sweep.report import compare


def _record(root: Path, task: str, objective: str, seed: int, score: float, digest: str) -> None:
    files.write_json_atomic(root / task / objective / f"seed-{seed}" / digest / "result.json", {
        "status": "completed", "task": task, "objective": objective, "seed": seed, "procedure": "task_specific",
        "primary_metric": "accuracy", "config_hash": digest, "init": {"spec": "skip"},
        "student": {"name": "truncated"}, "teacher": {"name": "tiny"}, "best": {"dev": {"accuracy": score}},
        "final": {"dev": {"accuracy": score}}, "epochs": [{"stage": "prediction", "dev": {"accuracy": score}}]})


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A: toy seeds 1-3 at 0.80, 0.70, 0.60 and rte seed 1 at 0.5; B: the same toy jobs at 0.80, 0.72, 0.65 (one
    identical), rte missing, and a job of its own."""
    a, b = tmp_path / "a", tmp_path / "b"
    for seed, (sa, sb) in enumerate([(0.80, 0.80), (0.70, 0.72), (0.60, 0.65)], start=1):
        _record(a, "toy", "vanilla_kd", seed, sa, f"{seed:02d}" * 8)
        _record(b, "toy", "vanilla_kd", seed, sb, f"{seed:02d}" * 8)
    _record(a, "rte", "vanilla_kd", 1, 0.5, "ff" * 8)
    _record(b, "toy", "att_mse", 1, 0.9, "ee" * 8)
    return a, b


def test_pairs_by_hash_with_the_differences_worked_by_hand(tmp_path: Path) -> None:
    a, b = _dirs(tmp_path)
    pairs, only_a, only_b = compare.pair(compare.completed_jobs(a), compare.completed_jobs(b), "hash")
    assert sorted(pairs["seed"]) == [1, 2, 3] and list(only_a["task"]) == ["rte"] and list(only_b["objective"]) == [
        "att_mse"]
    (row,) = compare.summary(pairs)
    # differences 0, 0.02, 0.05: mean 0.07/3; sd = sqrt(((0-m)^2 + (0.02-m)^2 + (0.05-m)^2) / 2)
    d = [0.0, 0.02, 0.05]
    m = sum(d) / 3
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / 2)
    half = 4.302652729911275 * sd / math.sqrt(3)  # t_{0.975, 2}
    t = m / (sd / math.sqrt(3))
    p = 2 * (1 - 0.5 * (1 + t / math.sqrt(2 + t * t)))  # Student t with 2 df: CDF = 1/2 + t / (2 sqrt(2 + t^2))
    assert row[:5] == ["toy", "accuracy", "3", "1", f"{100 * m:+.2f}"]
    assert row[5] == f"[{100 * (m - half):+.2f}, {100 * (m + half):+.2f}]"
    assert row[6] == f"{p:.3g}" and row[7] == "5.00"


def test_pairs_by_job_ignore_the_hash(tmp_path: Path) -> None:
    """Two grids whose configs differ (another hash) still pair by task, objective, init, seed..."""
    a, b = tmp_path / "a", tmp_path / "b"
    _record(a, "toy", "vanilla_kd", 1, 0.7, "aa" * 8)
    _record(b, "toy", "vanilla_kd", 1, 0.75, "bb" * 8)
    by_hash, _, _ = compare.pair(compare.completed_jobs(a), compare.completed_jobs(b), "hash")
    by_job, only_a, only_b = compare.pair(compare.completed_jobs(a), compare.completed_jobs(b), "job")
    assert by_hash.empty and len(by_job) == 1 and only_a.empty and only_b.empty
    assert by_job["diff"].iloc[0] == pytest.approx(0.05)


def test_the_command_writes_the_table_and_names_the_unpaired_jobs(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _dirs(tmp_path)
    assert compare.main([str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "compare.md").read_text()
    assert "| toy    | accuracy | 3       | 1           | +2.33" in text
    assert "1 job(s) only in A: rte/vanilla_kd init=skip seed=1 (ffffffffff)" in text
    assert "1 job(s) only in B: toy/att_mse" in text and text == capsys.readouterr().out
    assert len(pd.read_csv(tmp_path / "out" / "compare.csv")) == 3
    assert compare.main([str(a), str(tmp_path / "nowhere")]) == 2
