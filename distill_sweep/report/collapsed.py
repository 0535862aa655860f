"""Collapsed runs in a table (the rule: analysis/collapse.py): each flagged run named in the table's footnotes
with the reason and its cell's value without it, and every run's value per seed in `runs_<table>.csv` (per cell
its min and max, and the mean without the collapsed runs).

The dev majority-class level comes from the run's own dev labels where its predictions can stand for it
(analysis/prediction_checks.py), else from the record's `teacher.majority_baseline` (records written before it
was scored with the dev split's majority class hold the training split's: a lower bar, so fewer flags).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from distill_sweep.analysis import collapse, prediction_checks
from distill_sweep.records.predictions import PredictionsError, read_predictions
from distill_sweep.records.record import Record, RecordError, load_record
from distill_sweep.report.tables import Table

MARK = "‡"  # the footnote mark of a collapsed run


def _evidence(path: str) -> tuple[Record | None, Any]:
    """The record at `path` and its predictions where they can stand for it (else None)."""
    try:
        rec = load_record(Path(path))
    except RecordError:
        return None, None
    try:
        got = read_predictions(Path(path).parent)
    except PredictionsError:
        return rec, None
    if got is None or prediction_checks.reason(got, rec) is not None:
        return rec, None
    return rec, got


def run_reason(path: str, metric: str, value: float) -> str | None:
    """Why the run at `path` (its `metric` scored `value` percent) is collapsed, None if it is not."""
    rec, got = _evidence(path)
    score = value / 100.0
    split = prediction_checks.scored_split(got) if got is not None else None
    if got is not None and split in got.preds:
        labels = got.labels[split]
        return collapse.reason(score, metric, collapse.majority_score(labels, metric), got.preds[split], labels)
    stated = ((rec.teacher.majority_baseline if rec is not None else None) or {}).get(metric)
    baseline = float(stated) if isinstance(stated, (int, float)) else (0.0 if metric in collapse.CHANCE_METRICS
                                                                        else math.nan)
    return collapse.reason(score, metric, baseline)


def flag(scores: pd.DataFrame, row_of: dict[tuple[str, str], str]) -> tuple[list[str], pd.DataFrame]:
    """Footnotes naming each collapsed run of `scores` (a table's per-run scores: path, task, system, init_label,
    seed, metric, value in percent) and the per-seed frame for `runs_<table>.csv`. `row_of`: (system, init) ->
    the row's name in the table."""
    if scores.empty:
        return [], pd.DataFrame()
    frame = scores[["system", "init_label", "task", "metric", "seed", "value", "path"]].copy()
    frame["row"] = [row_of.get((s, i), s) for s, i in zip(frame["system"], frame["init_label"], strict=True)]
    frame["collapse_reason"] = [run_reason(p, m, v) or "" for p, m, v in
                                zip(frame["path"], frame["metric"], frame["value"], strict=True)]
    frame["collapsed"] = frame["collapse_reason"] != ""
    cells = frame.groupby(["system", "init_label", "task"], sort=False)
    frame["cell_min"] = cells["value"].transform("min")
    frame["cell_max"] = cells["value"].transform("max")
    kept = frame["value"].where(~frame["collapsed"])
    frame["mean_without_collapsed"] = kept.groupby([frame["system"], frame["init_label"], frame["task"]]
                                                   ).transform("mean")
    frame["n_without_collapsed"] = kept.notna().groupby([frame["system"], frame["init_label"], frame["task"]]
                                                        ).transform("sum").astype(int)
    notes = []
    for r in frame[frame["collapsed"]].to_dict("records"):
        others = frame[(frame["system"] == r["system"]) & (frame["init_label"] == r["init_label"])
                       & (frame["task"] == r["task"]) & ~frame["collapsed"]]["value"].to_numpy()
        without = (f"{np.mean(others):.1f}" + (f"±{np.std(others, ddof=1):.2f}" if len(others) > 1 else "")
                   + f" ({len(others)})") if len(others) else "no run left"
        notes.append(f"{MARK} collapsed run: {r['task']} / {r['row']} / seed {r['seed']} "
                     f"({Path(r['path']).parent}): {r['collapse_reason']}; its cell without it: {without}")
    if notes:
        notes.append(f"{MARK} collapsed (analysis/collapse.py): dev predictions one class for >= "
                     f"{collapse.CONSTANT_SHARE:.0%} of the examples, or a score at most {100 * collapse.MARGIN:g} "
                     "point above the dev split's majority-class (MCC, Pearson: chance) level; the cell above "
                     "includes it; every run's value per seed, the cell's min-max and its mean without collapsed "
                     "runs are in the table's runs_*.csv")
    return notes, frame.drop(columns=["path"]).assign(path=frame["path"])


def flag_table(files: dict[str, Any], table: Table, scores: pd.DataFrame,
               row_of: dict[tuple[str, str], str] | None = None) -> list[str]:
    """A table's collapsed runs: each named in its footnotes with its cell's value without it, every run's value
    per seed in files["runs_<table>.csv"]. Returns the collapsed runs' names (for `tests_lines`). `row_of`:
    (system, init) -> the row's name (default: the table's rows)."""
    row_of = row_of or {(r.system, r.init): " / ".join(r.labels) for r in table.rows}
    notes, runs = flag(scores, row_of)
    table.notes += notes
    if runs.empty:
        return []
    files[f"runs_{table.key}.csv"] = runs
    return [f"{r['task']} / {r['row']} / seed {r['seed']}" for r in runs[runs["collapsed"]].to_dict("records")]


def tests_lines(flagged: list[str]) -> list[str]:
    """Under a tests table: the collapsed runs its pairs include (named under the table above)."""
    if not flagged:
        return []
    return [f"{MARK} these tests pair {len(flagged)} collapsed run(s), kept (see the table's footnotes): "
            + ", ".join(flagged)]


def _cell_runs(table: Table, runs: pd.DataFrame | None) -> list[dict[str, pd.DataFrame]]:
    """Per row of `table`, per task: its runs in `runs` (flag's frame; a row is named as flag named it)."""
    out: list[dict[str, pd.DataFrame]] = []
    for row in table.rows:
        if runs is None or runs.empty:
            out.append({})
            continue
        mine = runs[runs["row"].isin({" / ".join(row.labels), row.system})
                    & (runs["init_label"].astype(str) == str(row.init) if row.init else True)]
        out.append({task: group for task, group in mine.groupby("task")})
    return out


def _each_cell(table: Table, runs: pd.DataFrame | None) -> Iterator[tuple[int, int, pd.DataFrame]]:
    """(row index, column index in the rendered row, the cell's runs) for every cell of `table` that has runs."""
    for i, (row, cells) in enumerate(zip(table.rows, _cell_runs(table, runs), strict=True)):
        for j, task in enumerate(table.tasks):
            group = cells.get(task)
            if group is not None and not group.empty:
                yield i, len(row.labels) + j, group


def mark_cells(table: Table, runs: pd.DataFrame | None, body: list[list[str]]) -> list[list[str]]:
    """The rendered rows (labels, a cell per task, Avg) with MARK after each cell that includes a collapsed run."""
    out = [list(line) for line in body]
    for i, col, group in _each_cell(table, runs):
        if group["collapsed"].any():
            out[i][col] += f" {MARK}"
    return out


def seed_tips(table: Table, runs: pd.DataFrame | None, tips: list[list[str]]) -> list[list[str]]:
    """The HTML hover texts with each cell's values per seed (collapsed ones marked) and their min-max."""
    out = [list(line) for line in tips]
    for i, col, group in _each_cell(table, runs):
        group = group.sort_values("seed")
        values = ", ".join(f"seed {s}: {v:.1f}" + (f" {MARK}" if c else "")
                           for s, v, c in zip(group["seed"], group["value"], group["collapsed"], strict=True))
        out[i][col] += f"; per seed: {values} (min-max {group['value'].min():.1f}-{group['value'].max():.1f})"
    return out
