"""The table model: rows (systems, and inits in Table 3) x task columns of mean±std (n) cells."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from distill_sweep.analysis import replication
from distill_sweep.analysis.frames import init_order, system_order
from distill_sweep.analysis.paper import GLUE_TASKS, column_metric, task_order
from distill_sweep.analysis.stats import holm, paired_ttest


@dataclass
class Cell:
    mean: float = math.nan
    std: float = math.nan
    n: int = 0
    bold: bool = False
    ci_low: float = math.nan  # the CI of the mean over seeds (stats.mean_ci; the table's ci_method)
    ci_high: float = math.nan
    runs: int = 0  # the runs behind the n units (more than n where a grid crosses another source's seed)
    ci_cut: bool = False  # the CI was cut at what the metric can be (stats.clip_to_range)

    @property
    def present(self) -> bool:
        return self.n > 0 and not math.isnan(self.mean)


def cell_of(hit: Any) -> Cell:
    """A cell from a row of stats.aggregate (an itertuples row or a Series)."""
    runs = getattr(hit, "runs", hit.n)
    return Cell(float(hit.mean), float(hit.std), int(hit.n), ci_low=float(hit.ci_low), ci_high=float(hit.ci_high),
                runs=int(runs), ci_cut=bool(getattr(hit, "ci_cut", False)))


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


Scores = Callable[[Row, str], "pd.Series | None"]  # a row's scores of a column, indexed by (task, seed)


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
    best_note: str = ""  # how "best" was decided (mark_best), the footnote's words
    scores: Scores | None = None  # a row's scores per column (score_lookup): the figures' tests against a baseline


def score_lookup(scores: pd.DataFrame, key: Callable[[Row], tuple[Any, ...]], by: Sequence[str],
                 avg_tasks: Sequence[str]) -> Scores:
    """`mark_best`'s scores from a scores frame (columns by..., task, seed, value): a column's are the row's
    seeds of that task; the Avg's, the row's (task, seed) pairs over `avg_tasks`. The runs of one master seed (a
    grid crossing another source's seed) are averaged first: the unit of replication (analysis/replication.py)."""
    units = replication.unit_means(scores, [*by, "task"]) if not scores.empty else scores
    index = {k if isinstance(k, tuple) else (k,): g.set_index(["task", "seed"])["value"]
             for k, g in units.groupby(list(by), sort=False)} if not units.empty else {}

    def get(row: Row, col: str) -> pd.Series | None:
        values = index.get(key(row))
        if values is None:
            return None
        tasks = list(avg_tasks) if col == "avg" else [col]
        return values[values.index.get_level_values("task").isin(tasks)]

    return get


def mark_best(rows: Sequence[Row], columns: Sequence[str], scores: Scores | None = None,
              alpha: float = 0.05) -> str:
    """Bold the best mean of each column within each row group, only where it is significantly better than the
    runner-up: a two-sided paired t-test on their matched seeds (the Avg: on matched (task, seed) pairs), Holm
    over every such test of the table (one family), p < alpha. Without `scores` nothing is bold. Returns the
    footnote's words."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    for row in rows:
        for cell in row.cells.values():
            cell.bold = False
    if scores is None:
        return "no best marked (this table has no paired test of the best against the runner-up)"
    tests: list[tuple[Cell, float]] = []
    for members in groups.values():
        for col in columns:
            cands = sorted([r for r in members if col in r.cells and r.cells[col].present],
                           key=lambda r: r.cells[col].mean, reverse=True)
            if len(cands) < 2:
                continue
            a, b = scores(cands[0], col), scores(cands[1], col)
            if a is None or b is None:
                continue
            both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
            _, p, _ = paired_ttest(both["a"].to_numpy(), both["b"].to_numpy())
            tests.append((cands[0].cells[col], p))
    adjusted = holm([p for _, p in tests]) if tests else []
    for (cell, _), p in zip(tests, adjusted, strict=True):
        cell.bold = bool(p < alpha)
    m = sum(not math.isnan(p) for _, p in tests)
    return (f"best per column marked only where it is significantly better than the runner-up: two-sided "
            f"paired t-test on their matched seeds (Avg: matched (task, seed) pairs), Holm over the table's {m} "
            f"such test(s), p < {alpha}")


def build_table(
    key: str,
    title: str,
    records: pd.DataFrame,
    agg: pd.DataFrame,
    averages: pd.DataFrame,
    by_init: bool,
    metric_mode: str,
    scores: pd.DataFrame | None = None,
    alpha: float = 0.05,
) -> Table:
    """Rows and columns come from every selected record (any status), so systems/tasks whose runs
    all failed or are still running still show up, as missing cells with n = 0. `agg` and `averages`
    are keyed by (system, init_label); `scores` (stats' scores frame) lets `mark_best` test the best cells."""
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
    lookup = (score_lookup(scores, lambda r: (r.system, r.init), ("system", "init_label"), table.avg_tasks)
              if scores is not None else None)
    table.best_note = mark_best(table.rows, [*tasks, "avg"], lookup, alpha)
    table.scores = lookup
    for note in (units_note(table.rows), cut_note(table)):
        if note:
            table.notes.append(note)
    return table


def cut_note(table: Table) -> str:
    """The footnote naming the cells whose interval was cut at the metric's range ("" where none was)."""
    cut = [f"{' / '.join(r.labels)} / {t}" for r in table.rows for t, c in r.cells.items() if t != "avg" and c.ci_cut]
    if not cut:
        return ""
    return (f"CI cut at what the metric can be (0 to 100; -100 to 100 for MCC and correlations) in {len(cut)} "
            f"cell(s): {', '.join(cut)}; the t-interval over few seeds with a large spread reaches past it, and the "
            "cut interval holds the true mean whenever the uncut one does")


def units_note(rows: Sequence[Row]) -> str:
    """The footnote of a table whose cells average several runs per master seed ("" where none does)."""
    cells = [c for r in rows for k, c in r.cells.items() if k != "avg" and c.present]
    if not any(c.runs > c.n for c in cells):
        return ""
    most = max(round(c.runs / c.n) for c in cells)
    return (f"n counts master seeds, the unit of replication: the runs of one master seed that vary another source's "
            f"seed (up to {most} per seed here) are averaged first, then mean, std, CI and every test are over the "
            "master seeds' means (docs/guide/report.md, 'The unit of replication')")
