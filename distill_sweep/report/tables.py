"""The table model: rows (systems, and inits in Table 3) x task columns of mean±std (n) cells."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from distill_sweep.analysis.frames import init_order, system_order
from distill_sweep.analysis.paper import GLUE_TASKS, column_metric, task_order


@dataclass
class Cell:
    mean: float = math.nan
    std: float = math.nan
    n: int = 0
    bold: bool = False
    ci_low: float = math.nan  # the CI of the mean over seeds (stats.mean_ci; the table's ci_method)
    ci_high: float = math.nan

    @property
    def present(self) -> bool:
        return self.n > 0 and not math.isnan(self.mean)


def cell_of(hit: Any) -> Cell:
    """A cell from a row of stats.aggregate (an itertuples row or a Series)."""
    return Cell(float(hit.mean), float(hit.std), int(hit.n), ci_low=float(hit.ci_low), ci_high=float(hit.ci_high))


@dataclass
class Row:
    labels: tuple[str, ...]  # system[, init]
    group: str  # rows of one group are compared for "best" (a column, or one system in Table 3)
    cells: dict[str, Cell]  # task -> cell; "avg" -> Avg (std/n unused)
    avg_reason: str = ""
    init: str = ""  # resolved init label ("4,8,12"), also for Table 1 rows
    system: str = ""
    procedure: str = ""
    objective: str = ""
    teacher: str = ""  # name#id
    student: str = ""  # name#id


@dataclass
class Table:
    key: str  # "table1" | "table3" | a layout's key (report.layouts)
    title: str
    row_headers: list[str]
    tasks: list[str]
    metrics: dict[str, str]  # task -> metric shown
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    avg_tasks: tuple[str, ...] = GLUE_TASKS  # what the Avg column averages (shown only when all are present)
    ci_method: str = "t"  # how the cells' CIs were computed (stats.CI_METHODS), named in the footnotes


def mark_best(rows: Sequence[Row], columns: Sequence[str]) -> None:
    """Bold the best mean per column within each row group, compared at display precision (one
    decimal) so two printed 89.2s are both bold; nothing is bold with fewer than two candidates."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    for members in groups.values():
        for col in columns:
            cands = [r.cells[col] for r in members if col in r.cells and r.cells[col].present]
            if len(cands) < 2:
                continue
            best = max(round(c.mean, 1) for c in cands)
            for c in cands:
                c.bold = round(c.mean, 1) == best


def build_table(
    key: str,
    title: str,
    records: pd.DataFrame,
    agg: pd.DataFrame,
    averages: pd.DataFrame,
    by_init: bool,
    metric_mode: str,
) -> Table:
    """Rows and columns come from every selected record (any status), so systems/tasks whose runs
    all failed or are still running still show up, as missing cells with n = 0. `agg` and `averages`
    are keyed by (system, init_label)."""
    tasks = task_order(records["task"].unique()) if not records.empty else []
    primary = records.groupby("task")["primary_metric"].first().to_dict() if not records.empty else {}
    metrics = {t: column_metric(t, metric_mode, primary.get(t)) for t in tasks}
    table = Table(key=key, title=title, row_headers=["Objective", "Init"] if by_init else ["Objective"],
                  tasks=tasks, metrics=metrics)
    cell_index = {(r.system, r.init_label, r.task): r for r in agg.itertuples(index=False)}
    avg_index = {(r.system, r.init_label): r for r in averages.itertuples(index=False)}
    inits = init_order(records)
    for system in system_order(records):
        mine = records[records["system"] == system]
        first = mine.iloc[0]
        present = set(mine["init_label"])
        for init in [i for i in inits if i in present]:
            cells = {}
            for task in tasks:
                hit = cell_index.get((system, init, task))
                cells[task] = cell_of(hit) if hit is not None else Cell()
            avg = avg_index.get((system, init))
            if avg is not None and not math.isnan(avg.avg):
                cells["avg"], reason = Cell(float(avg.avg), math.nan, 1), ""
            else:
                cells["avg"] = Cell()
                reason = avg.reason if avg is not None else "no completed runs"
            table.rows.append(Row(
                labels=(system, init) if by_init else (system,), group=system if by_init else "",
                cells=cells, avg_reason=reason, init=init, system=system, procedure=str(first["procedure"]),
                objective=str(first["objective"]), teacher=f"{first['teacher_name']}#{first['teacher_id']}",
                student=f"{first['student_name']}#{first['student_id']}"))
    mark_best(table.rows, [*tasks, "avg"])
    return table
