"""A layout (report.layouts) built from the records: its Table, its t-tests against baselines, its paper rows.

Rows are the layout's labels, in its order; each label's (system, init) units of the store, one row each
(named by the labels, plus the system and init when one label has several). Cells are mean±std (n) over
seeds of the column's metric (stats.aggregate), the Avg over the layout's avg_tasks (stats.row_averages);
the t-tests are stats.paired_tests on the layout's pairs only, in one Holm family with the table's bold (best vs
runner-up) tests and its difference map's cells (tables.join_family): two identical rows are named different by
any of them at most alpha of the time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from distill_sweep.analysis import frames, paper, stats
from distill_sweep.analysis.paper import column_metric, task_order
from distill_sweep.report.layouts import Labels, Layout
from distill_sweep.report.tables import (
    Cell,
    Row,
    Table,
    cell_of,
    cut_note,
    dev_sizes,
    join_family,
    others,
    score_lookup,
    units_note,
)

Unit = tuple[str, str]  # (system, init_label): one row of the store's Table 3
COMPARISON_COLUMNS = ["method", "row", "task", "n", "ours", "ours_std", "paper", "delta"]


@dataclass
class Built:
    table: Table
    tests: pd.DataFrame  # stats.paired_tests columns
    n_records: int  # the layout's records (any status)
    notes: list[str] = field(default_factory=list)  # store.scores notes
    # the layout's records with their row's name (`row`): report.examples pairs their predictions
    records: pd.DataFrame = field(default_factory=pd.DataFrame)
    comparison: pd.DataFrame | None = None  # COMPARISON_COLUMNS; None when the layout has no paper table
    not_compared: list[str] = field(default_factory=list)


def row_name(labels: Labels) -> str:
    return " / ".join(labels)


def _rank(layout: Layout, labels: Labels) -> tuple:
    return tuple((known.index(v) if v in known else len(known), v) for known, v in zip(layout.order, labels, strict=True))


class Rows:
    """The layout's records and how they map to rows."""

    def __init__(self, layout: Layout, records: pd.DataFrame) -> None:
        labels = [layout.classify(r) for r in records.to_dict("records")]
        self.records = records[pd.Series([lab is not None for lab in labels], index=records.index, dtype=bool)]
        self.units: dict[Labels, list[Unit]] = {}
        self.first: dict[Unit, dict[str, Any]] = {}  # a unit's first record
        for lab, r in zip((lab for lab in labels if lab is not None), self.records.to_dict("records"), strict=True):
            unit = (r["system"], r["init_label"])
            if unit not in self.first:
                self.first[unit] = r
                self.units.setdefault(lab, []).append(unit)
        self.order = sorted(set(layout.skeleton) | set(self.units), key=lambda lab: _rank(layout, lab))

    def suffix(self, labels: Labels, unit: Unit | None) -> str:
        """What tells a label's units apart (their system, their init) when it has several; else ""."""
        units = self.units.get(labels, [])
        if unit is None or len(units) <= 1:
            return ""
        tags = [*([unit[0]] if len({u[0] for u in units}) > 1 else []),
                *([f"init {unit[1]}"] if len({u[1] for u in units}) > 1 else [])]
        return f" [{', '.join(tags)}]"

    def name(self, labels: Labels, unit: Unit | None) -> str:
        return row_name(labels) + self.suffix(labels, unit)

    def entries(self) -> list[tuple[Labels, Unit | None]]:
        """(labels, unit) per table row, in order; a skeleton row without runs has no unit."""
        return [(lab, unit) for lab in self.order for unit in (self.units.get(lab) or [None])]

    def row_of(self) -> dict[Unit, str]:
        return {unit: self.name(lab, unit) for lab, units in self.units.items() for unit in units}


def build_layout(layout: Layout, records: pd.DataFrame, metric_mode: str, ddof: int, alpha: float,
                 paper_dir: str | Path, ci: str = "t", baseline: str | None = None) -> Built:
    """The layout's table and its tests against the baselines, one Holm family with bold and the difference map
    against `baseline` (a row name; the report's baseline= where it names one)."""
    rows = Rows(layout, records)
    mine = rows.records
    mode = layout.metric_mode or metric_mode
    present = set(mine["task"])
    tasks = task_order(present)
    if present & set(layout.tasks):
        tasks = [*layout.tasks, *(t for t in tasks if t not in layout.tasks)]
    primary = mine.groupby("task")["primary_metric"].first().to_dict() if not mine.empty else {}
    metrics = {t: column_metric(t, mode, primary.get(t)) for t in tasks}
    table = Table(key=layout.key, title=layout.title, row_headers=list(layout.row_headers), tasks=tasks,
                  metrics=metrics, notes=list(layout.notes), avg_tasks=layout.avg_tasks, dev_sizes=dev_sizes(mine))

    sc, notes = frames.scores(mine, mode)
    row_of = rows.row_of()
    sc = sc.assign(row=[row_of[u] for u in zip(sc["system"], sc["init_label"], strict=True)])
    agg = stats.aggregate(sc, by=("row",), ddof=ddof, ci=ci)
    avgs = stats.row_averages(agg, by=("row",), tasks=layout.avg_tasks)
    if layout.teacher_row:
        _teacher_rows(table, mine, ddof, ci)
    for labels, unit in rows.entries():
        table.rows.append(_row(layout, rows, labels, unit, *_cells(agg, avgs, rows.name(labels, unit), tasks)))
    table.scores = score_lookup(sc, lambda r: (r.system,), ("row",), layout.avg_tasks)
    table.notes += [n for n in (units_note(table.rows), cut_note(table)) if n]
    # one family for every verdict on the layout's rows (as Tables 1 and 3): bold, the difference map's cells and
    # the tests against the baselines; these test only the layout's pairs, so no bold test counts as their twin
    join_family(table, baseline, alpha, pooled_every_pair=False, pooled=[])
    tests = stats.paired_tests(sc, "row", (), alpha, pairs=_name_pairs(layout, rows),
                               family_extra=others(table, "pooled"))
    join_family(table, baseline, alpha, pooled_every_pair=False, pooled=tests["p"].tolist())
    named = mine.assign(row=[row_of[u] for u in zip(mine["system"], mine["init_label"], strict=True)])
    built = Built(table=table, tests=tests, n_records=len(mine), notes=notes, records=named)
    if layout.paper_file is not None:
        _compare(built, layout, rows, agg, avgs, Path(paper_dir) / layout.paper_file)
    return built


def _row(layout: Layout, rows: Rows, labels: Labels, unit: Unit | None, cells: dict[str, Cell], reason: str) -> Row:
    suffix = rows.suffix(labels, unit)
    r = rows.first[unit] if unit is not None else None
    return Row(labels=(*labels[:-1], labels[-1] + suffix), group=labels[layout.group_by], cells=cells,
               avg_reason=reason, init=unit[1] if unit else "", system=rows.name(labels, unit),
               procedure=str(r["procedure"]) if r else "", objective=str(r["objective"]) if r else "",
               teacher=f"{r['teacher_name']}#{r['teacher_id']}" if r else "",
               student=f"{r['student_name']}#{r['student_id']}" if r else "")


def _cells(agg: pd.DataFrame, avgs: pd.DataFrame, name: str, tasks: list[str]) -> tuple[dict[str, Cell], str]:
    hits = {r.task: r for r in agg[agg["row"] == name].itertuples(index=False)}
    cells = {t: cell_of(hits[t]) if t in hits else Cell() for t in tasks}
    avg = avgs[avgs["row"] == name]
    if not avg.empty and not math.isnan(avg["avg"].iloc[0]):
        cells["avg"] = Cell(float(avg["avg"].iloc[0]), math.nan, 1)
        return cells, ""
    cells["avg"] = Cell()
    return cells, str(avg["reason"].iloc[0]) if not avg.empty else "no completed runs"


def _teacher_rows(table: Table, mine: pd.DataFrame, ddof: int, ci: str) -> None:
    """One row per teacher of the layout's completed records: its own dev scores (the record's teacher.dev,
    the metrics of its last fine-tuning epoch), n = the distinct values seen (one per fine-tuned teacher)."""
    done = mine[mine["status"] == "completed"]
    teachers = done.drop_duplicates("teacher_id").sort_values(["teacher_name", "teacher_id"])
    for t in teachers.to_dict("records"):
        name = "teacher" if len(teachers) == 1 else f"teacher {t['teacher_name']}#{t['teacher_id']}"
        values = []
        for r in done[done["teacher_id"] == t["teacher_id"]].to_dict("records"):
            metric = table.metrics.get(r["task"])
            value = (r["teacher_dev"] or {}).get(metric, math.nan) if metric else math.nan
            if not math.isnan(value):
                values.append({"row": name, "task": r["task"], "metric": metric, "value": 100.0 * value})
        frame = pd.DataFrame(values, columns=["row", "task", "metric", "value"]).drop_duplicates()
        agg = stats.aggregate(frame, by=("row",), ddof=ddof, ci=ci)
        cells, reason = _cells(agg, stats.row_averages(agg, by=("row",), tasks=table.avg_tasks), name, table.tasks)
        table.rows.append(Row(labels=(name, *(["fine-tuned"] * (len(table.row_headers) - 1))), group="teacher",
                              cells=cells, avg_reason=reason, system=name, procedure="teacher",
                              teacher=f"{t['teacher_name']}#{t['teacher_id']}"))
    if not teachers.empty:
        table.notes.append("teacher: its own dev score as recorded with each run (teacher.dev: the last epoch of "
                           "its fine-tuning, kept in the teacher cache), (n) = distinct values seen")


def _name_pairs(layout: Layout, rows: Rows) -> list[tuple[str, str]]:
    """The layout's pairs as row names. When a label has several units, a unit meets those of the other label
    with the same teacher, and of these the ones with its init if there are any."""
    out = []
    for a, b in layout.pairs(rows.order):
        for ua in rows.units.get(a) or [None]:
            partners: list[Unit | None] = list(rows.units.get(b) or [None])
            if ua is not None and partners != [None]:
                teacher = rows.first[ua]["teacher_id"]
                partners = [ub for ub in partners if ub is not None and rows.first[ub]["teacher_id"] == teacher]
                partners = [ub for ub in partners if ub is not None and ub[1] == ua[1]] or partners
            out += [(rows.name(a, ua), rows.name(b, ub)) for ub in partners]
    return out


def _compare(built: Built, layout: Layout, rows: Rows, agg: pd.DataFrame, avgs: pd.DataFrame, path: Path) -> None:
    """Our rows beside the paper's printed numbers (results/paper/<file>), cell by cell; our cell is left
    blank where we have no run, or where the row's teacher has not the paper teacher's depth."""
    if not path.is_file():
        built.not_compared.append(f"paper numbers not found at {path}")
        return
    ref = paper.load_method_table(path)
    cells = {(r.row, r.task): r for r in agg.itertuples(index=False)}
    averages = {r.row: r.avg for r in avgs.itertuples(index=False)}
    out = []
    for method, labels in layout.paper_rows.items():
        for unit in rows.units.get(labels) or [None]:
            name = rows.name(labels, unit)
            layers = paper.as_float(rows.first[unit]["teacher_layers"]) if unit else math.nan
            if unit and layout.paper_teacher_layers is not None and layers != layout.paper_teacher_layers:
                built.not_compared.append(f"{name}: teacher has {layers:g} layers, the paper's "
                                          f"{layout.paper_teacher_layers}")
                unit = None
            for r in ref[ref["method"] == method].to_dict("records"):
                hit = cells.get((name, r["task"])) if unit else None
                ours = averages.get(name, math.nan) if unit and r["task"] == "avg" else (hit.mean if hit else math.nan)
                out.append({"method": method, "row": name, "task": r["task"], "n": hit.n if hit else 0, "ours": ours,
                            "ours_std": hit.std if hit else math.nan, "paper": r["mean"], "delta": ours - r["mean"]})
    built.comparison = pd.DataFrame(out, columns=COMPARISON_COLUMNS)
