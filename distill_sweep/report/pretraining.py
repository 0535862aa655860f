"""Tables 2 and 4, the paper's task-agnostic half: students distilled on a corpus (procedure task_agnostic), then
fine-tuned on each task over a grid (`finetune_grid`, student=distilled).

A cell is, per distilled student and task, the best dev score over the fine-tuning grid (lr x batch size, and
whatever else the grid varied): the paper's selection. Cells are mean±std over the distillations' master seeds
(n), the unit of replication: a master seed's runs (its fine-tuning seeds, and the students of its distillation
that vary another source's seed) are averaged first, as the encoder tables average theirs (analysis/replication.py). Table 2: randomly initialised students, one row per
objective, with the paper's three prior-work rows as reference lines; Table 4: objective x init (random vs
the first teacher layers). The paper's numbers are single runs, set beside ours with deltas (its MRPC column is
F1 and CoLA MCC: the report's default metric=header).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from distill_sweep.analysis import stats
from distill_sweep.analysis.paper import (
    GLUE_TASKS,
    as_float,
    column_metric,
    norm_task,
    objective_rank,
    task_label,
    task_order,
)
from distill_sweep.report.tables import Cell, Row, Table, cell_of, mark_best

STUDENT = "distilled"  # the student type of a fine-tune job that follows a distillation (students/distilled.py)
SOURCE_PROCEDURE = "task_agnostic"
PAPER_FILES = {"2": "table2_task_agnostic_objectives.csv", "4": "table4_task_agnostic_init.csv"}
PAPER_INIT = {"random": "random", "first": "first6"}  # our init names -> the paper's CSVs'
INIT_ORDER = ("random", "first")
RUN_COLUMNS = ["path", "task", "metric", "value", "seed", "seeds", "source", "source_seed", "objective", "init",
               "setting", "point", "unit"]


def is_own(records: pd.DataFrame) -> pd.Series:
    """Which records these tables hold: distillations on a corpus and fine-tunings of their students."""
    if records.empty:
        return pd.Series(False, index=records.index, dtype=bool)
    return (records["procedure"] == SOURCE_PROCEDURE) | (records["student_name"] == STUDENT)


def source_init(init: dict[str, Any]) -> str:
    """A distillation's init as the tables name it: random (no teacher layer copied), first, or its layers."""
    name, layers = str(init.get("name") or ""), list(init.get("layers") or [])
    if name in ("first", "bottom"):  # the first k teacher layers (inits.resolve_init names init=first "bottom")
        return "first"
    if not layers:
        return "random"
    return name or ",".join(str(x) for x in layers)


def distilled_runs(records: pd.DataFrame, sc: pd.DataFrame) -> pd.DataFrame:
    """The scores (`store.scores`) of fine-tune runs of distilled students, with their distillation's
    objective, init and setting (teacher, corpus, student: what else makes a row) and the grid point."""
    if records.empty or sc.empty:
        return pd.DataFrame(columns=RUN_COLUMNS)
    mine = records[records["student_name"] == STUDENT].set_index("path")
    out = []
    for r in sc[sc["path"].isin(mine.index)].to_dict("records"):
        rec = mine.loc[r["path"]]
        src = (rec["student_settings"] or {}).get("distilled_from") or {}
        if not src.get("config_hash"):
            continue
        setup = rec["setup"] or {}
        out.append({
            "path": r["path"], "task": r["task"], "metric": r["metric"], "value": r["value"], "seed": r["seed"],
            "seeds": r["seeds"], "source": src["config_hash"], "source_seed": src.get("seed"),
            # the unit of replication: the distillation's master seed (its hash where a record does not say it)
            "unit": f"seed {src['seed']}" if isinstance(src.get("seed"), int) else f"student {src['config_hash']}", "objective": str(src.get("objective")),
            "init": source_init(src.get("init") or {}),
            "setting": f"{src.get('teacher')} -> {src.get('student')} {src.get('student_layers')}L, "
                       f"corpus {src.get('corpus')}",
            "point": f"lr {setup.get('optimizer.lr')}, batch {setup.get('optimizer.batch_size')}",
        })
    return pd.DataFrame(out, columns=RUN_COLUMNS)


def best_over_grid(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (distilled student, task, fine-tuning run's seeds): the grid point with the best dev score."""
    if runs.empty:
        return runs.assign(points=pd.Series(dtype=int))
    keys = ["setting", "objective", "init", "source", "source_seed", "unit", "seed", "seeds", "task", "metric"]
    best = runs.loc[runs.groupby(keys, sort=False)["value"].idxmax()]
    counts = runs.groupby(keys, sort=False)["value"].count().rename("points").reset_index()
    return best.merge(counts, on=keys).reset_index(drop=True)


def row_label(objective: str, setting: str, settings: int) -> str:
    return objective if settings == 1 else f"{objective} [{setting}]"


def build(key: str, title: str, best: pd.DataFrame, by_init: bool, metric_mode: str, ddof: int = 1,
          ci: str = "t") -> Table:
    """Table 2 (`by_init` False: one row per objective) or Table 4 (objective x init) from `best_over_grid`;
    cells and Avg as the other tables aggregate them (stats.aggregate, stats.row_averages)."""
    tasks = task_order(best["task"].unique())
    metrics = {t: column_metric(t, metric_mode) for t in tasks}
    table = Table(key=key, title=title, row_headers=["Objective", "Init"] if by_init else ["Objective"],
                  tasks=tasks, metrics=metrics)
    settings = best["setting"].nunique()
    labelled = best.assign(system=[row_label(o, s, settings) for o, s in zip(best["objective"], best["setting"],
                                                                              strict=True)],
                           init_label=best["init"])
    # the unit is the distillation's master seed: its fine-tuning seeds (and sub-seed students) are repeated
    # measures of one distillation, averaged first; each its own value made a cell's interval too narrow
    agg = stats.aggregate(labelled, ddof=ddof, ci=ci, unit="unit")
    cell_index = {(r.system, r.init_label, r.task): r for r in agg.itertuples(index=False)}
    avg_index = {(r.system, r.init_label): r for r in stats.row_averages(agg).itertuples(index=False)}
    rows = labelled.drop_duplicates(["setting", "objective", "init"])
    order = sorted(zip(rows["setting"], rows["objective"], rows["init"], rows["system"], strict=True),
                   key=lambda k: (k[0], objective_rank(k[1]), _init_rank(k[2])))
    for _, objective, init, label in order:
        cells = {}
        for task in tasks:
            hit = cell_index.get((label, init, task))
            cells[task] = cell_of(hit) if hit is not None else Cell()
        avg = avg_index[(label, init)]
        cells["avg"] = Cell(float(avg.avg), math.nan, 1) if not math.isnan(avg.avg) else Cell()
        table.rows.append(Row(labels=(label, init) if by_init else (label,), group=label if by_init else "",
                              cells=cells, avg_reason=avg.reason, init=init, system=label, procedure="finetune",
                              objective=objective))
    # a cell pools distillation x fine-tuning seeds, not matched between rows: no paired test, no best marked
    table.best_note = mark_best(table.rows, [*tasks, "avg"])
    table.notes.append("cell = per distilled student and task, the best dev score over its fine-tuning grid "
                       "(lr x batch size), as the paper selects; mean±std over the distillations' master seeds (n), "
                       "each master seed's runs (its fine-tuning seeds, its students that vary another source's seed) "
                       "averaged first: the unit of replication (docs/guide/report.md, 'The unit of replication')")
    return table


def _init_rank(init: str) -> tuple[int, str]:
    return (INIT_ORDER.index(init), "") if init in INIT_ORDER else (len(INIT_ORDER), init)


def load_paper(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A Table 2/4 CSV as (ours: objective, init, task, paper; prior work: system, task, paper), long form,
    percent as printed, the Avg as task "avg"."""
    wide = pd.read_csv(path, dtype=str)
    ours, prior = [], []
    for rec in wide.to_dict("records"):
        system = str(rec.get("system") or "ours")
        for col, val in rec.items():
            if col in ("system", "objective", "init"):
                continue
            task = "avg" if col == "Avg" else norm_task(col)
            if system == "ours" or system == "nan":
                ours.append({"objective": rec["objective"], "init": rec["init"], "task": task, "paper": as_float(val)})
            else:
                prior.append({"system": system, "task": task, "paper": as_float(val)})
    return (pd.DataFrame(ours, columns=["objective", "init", "task", "paper"]),
            pd.DataFrame(prior, columns=["system", "task", "paper"]))


def compare(table: Table, paper_rows: pd.DataFrame) -> pd.DataFrame:
    """Our cells beside the paper's (same objective, init and task; Avg too): ours - paper as delta."""
    out = []
    for row in table.rows:
        for task in [*table.tasks, "avg"]:
            cell = row.cells[task]
            hit = paper_rows[(paper_rows["objective"] == row.objective)
                             & (paper_rows["init"] == PAPER_INIT.get(row.init, row.init))
                             & (paper_rows["task"] == task)]
            if not cell.present or hit.empty:
                continue
            ref = float(hit["paper"].iloc[0])
            out.append({"row": row.system, "objective": row.objective, "init": row.init, "task": task,
                        "n": cell.n if task != "avg" else None, "ours": cell.mean, "paper": ref,
                        "delta": cell.mean - ref})
    return pd.DataFrame(out, columns=["row", "objective", "init", "task", "n", "ours", "paper", "delta"])


def reference_rows(prior: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The prior-work reference lines of the paper's Table 2 (their own papers' numbers)."""
    cols = [t for t in GLUE_TASKS if t in set(prior["task"])] + ["avg"]
    rows = []
    for system, grp in prior.groupby("system", sort=False):
        values = dict(zip(grp["task"], grp["paper"], strict=True))
        rows.append([system, *(f"{values[t]:.1f}" if t in values and not math.isnan(values[t]) else "—"
                               for t in cols)])
    return ["reference (paper's Table 2)", *(task_label(t) if t != "avg" else "Avg" for t in cols)], rows
