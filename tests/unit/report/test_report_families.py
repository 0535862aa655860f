"""Multiplicity as stated: one Holm family per table for every p column that makes a claim, Table 3's per-task
matrices together, the multi-bootstrap's and the tests of two runs' p-values corrected too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from test_report_examples import N, _run

from distill_sweep.report import figures
from distill_sweep.report.cli import main


def _two_task_scores() -> tuple[pd.DataFrame, float]:
    """Two tasks, rows r1 and r2, 4 seeds each; on each task r1 - r2 = 1, 2, 1.5, 3.5 (p = 0.034 alone)."""
    diffs = [1.0, 2.0, 1.5, 3.5]
    rows = []
    for task in ("rte", "mrpc"):
        for seed, d in enumerate(diffs):
            base = 70.0 + 5 * seed
            rows += [(task, seed, "r1", base + d), (task, seed, "r2", base)]
    return pd.DataFrame(rows, columns=["task", "seed", "row", "value"]), float(sps.ttest_1samp(diffs, 0.0).pvalue)


def test_table3_per_task_matrices_are_one_family() -> None:
    """Each task alone has p < 0.05 (its own family of one marked it "*"); over both tasks Holm gives
    min(1, 2 p) > 0.05 for both: no "*" in either matrix, and the hover says the corrected p."""
    scores, p = _two_task_scores()
    assert 0.025 < p < 0.05
    svg = figures.per_task_matrices(scores, ["r1", "r2"], 0.05)
    assert svg.count("<svg") >= 2  # one matrix per task
    texts = [t for t in (s.split(">")[-1] for s in svg.split("</text>")) if t.startswith("d ")]
    assert texts and not any("*" in t for t in texts)
    assert f"p (Holm) = {min(1.0, 2 * p):.4f}" in svg


def test_examples_tables_p_values_are_holm_corrected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three rows, three pairs on toy over 2 seeds: the multi-bootstrap p column is Holm-adjusted over the
    table's pairs (hand-worked: sorted p's times 3, 2, 1, running maximum, capped at 1)."""
    labels = np.random.default_rng(9).integers(0, 2, N)
    for seed in range(2):
        for objective, acc in (("vanilla_kd", 0.80), ("att_kl", 0.78), ("att_mse", 0.70)):
            _run(tmp_path, objective, seed, acc, labels)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    frame = pd.read_csv(tmp_path / "tables" / "examples_table1.csv")
    assert len(frame) == 3
    p = frame["p"].to_numpy()
    order = np.argsort(p)
    adj = np.empty(3)
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (3 - k) * p[i]))
        adj[i] = running
    assert frame["p_holm"].to_numpy() == pytest.approx(adj)
    assert "Holm over its 3 multi-bootstrap p-values" in out
