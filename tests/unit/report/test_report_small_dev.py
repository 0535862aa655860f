"""A report on a small dev set and few seeds says so in words (report/examples.py, verdicts.py, build.py): what one
dev example weighs, an interval of zero width named as such, no `alpha/m = 0.05/0` nor `nan` where nothing could be
tested, and one sentence where the seeds are too few to tell anything apart."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import write_record

from distill_sweep.records.predictions import write_predictions
from distill_sweep.report.cli import main

N = 12  # dev examples: one is 100/12 = 8.3 points of accuracy


def _store(root: Path, seeds: int) -> None:
    """vanilla_kd and att_kl, every run right on the same 11 of the 12 examples (91.7 everywhere)."""
    labels = np.array([0, 1] * (N // 2))
    preds = labels.copy()
    preds[0] = 1 - preds[0]
    for objective in ("vanilla_kd", "att_kl"):
        for seed in range(1, seeds + 1):
            path = write_record(root, task="toy", objective=objective, seed=seed, score=float(np.mean(preds == labels)),
                                dev_size=N)
            write_predictions(path.parent, {"validation": preds}, {"validation": labels}, {"validation": "dev1"},
                              "prediction", 1)


def _page_text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))


def test_twelve_examples_and_two_seeds_are_said_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path, seeds=2)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    one = f"one example is 100/{N} = {100 / N:.2g} points of accuracy"  # 8.3
    assert one in out
    assert "zero width, at +0.00" in out and "[+0.00, +0.00]" not in out and "zero width: every resample" in out
    assert "alpha/m = 0.05/0" not in out and "(2 x 0)" not in out and "ASO and seeds: not computed" in out
    (row,) = [line for line in out.splitlines() if line.startswith("vanilla_kd  att_kl")]
    assert "nan" not in row and "differences have zero variance" in row
    few = "seeds: at most 2 per cell, so almost nothing here can be told apart"
    assert few in out
    assert main([str(tmp_path), "table=1", "paper=false", "format=html", "out=" + str(tmp_path / "h")]) == 0
    page = _page_text(tmp_path / "h" / "report.html")
    assert few in page and one in page and "zero width, at +0.00" in page


def test_three_seeds_get_no_few_seeds_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _store(tmp_path, seeds=3)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    assert "can be told apart" not in out
    assert f"100/{N} = {100 / N:.2g} points" in out  # (the dev set is as small)


def test_identical_runs_are_marked_and_one_example_is_in_the_main_notes(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Every run scored 11/12: each cell is 91.7±0.00 with the mark, and its footnote says the runs agree exactly
    and what one example weighs; the preamble says it for the task before any table (12 < 1000 examples)."""
    _store(tmp_path, seeds=3)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("vanilla_kd ") and "att_kl" not in line)
    assert f"{100 * 11 / N:.1f}±0.00§ (3)" in row
    note = next(line for line in out.splitlines() if line.startswith("§ ±0.00: the runs agree exactly"))
    assert f"toy: {N} dev examples, one example is {100 / N:.2g} points" in note  # 8.3
    main_line = f"dev set: toy: {N} dev examples, so one example is 100/{N} = {100 / N:.2g} points of accuracy"
    assert main_line in out and out.index(main_line) < out.index("== Table 1")
    md = (tmp_path / "tables" / "table1.md").read_text()
    assert "±0.00§ (3)" in md and "§ ±0.00: the runs agree exactly" in md
    assert r"\S{}" in (tmp_path / "tables" / "table1.tex").read_text()


def test_a_large_dev_set_and_unequal_runs_get_neither_line(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """1,000 dev examples and runs that differ: no mark, no footnote, no line of what one example weighs."""
    for objective in ("vanilla_kd", "att_kl"):
        for seed in (1, 2, 3):
            write_record(tmp_path, task="toy", objective=objective, seed=seed, score=0.8 + 0.01 * seed,
                         dev_size=1000)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    assert "§" not in out and "one example is" not in out
