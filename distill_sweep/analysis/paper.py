"""The paper's vocabulary and numbers: task and metric names, its orders, its setting, its tables.

"How to Distill your BERT" (Wang et al., ACL 2023) distils a fine-tuned 12-layer RoBERTa-base into a
3-layer student truncated from it (task-specific distillation). Its numbers (results/paper/*.csv) are
percent on GLUE dev sets; what each column really measures is in results/paper/README.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from distill_sweep.models.inits import PAPER_INITS, resolve_init

# Paper column order (Tables 1 and 3).
GLUE_TASKS: tuple[str, ...] = ("qnli", "sst2", "mnli", "mrpc", "qqp", "rte", "cola")
TASK_LABELS: dict[str, str] = {
    "qnli": "QNLI", "sst2": "SST-2", "mnli": "MNLI", "mrpc": "MRPC", "qqp": "QQP",
    "rte": "RTE", "cola": "CoLA", "stsb": "STS-B", "toy": "toy",
}
# Extra (non-paper) tasks come after the GLUE seven, in this order, then alphabetically.
EXTRA_TASK_ORDER: tuple[str, ...] = ("stsb", "toy")

# What the paper's column headers say.
HEADER_METRICS: dict[str, str] = {
    "qnli": "accuracy", "sst2": "accuracy", "mnli": "accuracy", "mrpc": "f1", "qqp": "accuracy",
    "rte": "accuracy", "cola": "mcc", "stsb": "pearson",
}
# What the paper's numbers actually are (MRPC and CoLA behave like accuracy: see results/paper/README.md).
PAPER_METRICS: dict[str, str] = {
    "qnli": "accuracy", "sst2": "accuracy", "mnli": "accuracy", "mrpc": "accuracy", "qqp": "accuracy",
    "rte": "accuracy", "cola": "accuracy", "stsb": "pearson",
}
METRIC_MODES: tuple[str, ...] = ("header", "paper")
METRIC_ABBREV: dict[str, str] = {
    "accuracy": "acc", "f1": "F1", "mcc": "MCC", "pearson": "Pearson", "spearman": "Spearman",
}

# The paper's objectives in its order (Table 1's rows), the one home of the list: the benchmarks and the report
# read it; the presets conf/experiment/paper_table{1,2}.yaml name it again for Hydra's sweeper, kept equal to it
# (and to the paper's tables in results/paper/) by tests/repo/test_one_home.py.
OBJECTIVE_ORDER: tuple[str, ...] = (
    "vanilla_kd", "hid_cls_contrast", "hid_cls", "hid_seq", "att_mse", "att_mse_hid_seq",
    "att_kl", "att_kl_hid_seq", "att_kl_val_kl",
)
# Table 2's (task-agnostic) rows: all but the contrastive one, whose memory bank needs task labels.
TABLE2_OBJECTIVES: tuple[str, ...] = tuple(o for o in OBJECTIVE_ORDER if o != "hid_cls_contrast")
INIT_NAME_ORDER: tuple[str, ...] = ("skip", "mixed", "bottom", "first", "custom", "random")

# The paper's setting, its one home: only cells of this setting are set against its numbers.
PAPER_PROCEDURE = "task_specific"
PAPER_TEACHER_LAYERS = 12
PAPER_STUDENT = "truncated"
PAPER_STUDENT_LAYERS = 3
# Its Table 3 inits at this depth, by the rules that generalise them (models/inits.py): skip 4,8,12, ...
PAPER_INIT_LAYERS: dict[str, str] = {
    name: ",".join(map(str, resolve_init(name, PAPER_TEACHER_LAYERS, PAPER_STUDENT_LAYERS).layers))
    for name in PAPER_INITS.values()
}

DEFAULT_PAPER_DIR = Path(__file__).resolve().parents[2] / "results" / "paper"
PAPER_FILES: dict[str, str] = {"1": "table1_task_specific_objectives.csv", "3": "table3_task_specific_init.csv"}

COMPARISON_COLUMNS = ["system", "objective", "init_label", "task", "n", "ours", "ours_std", "paper",
                      "paper_std", "delta"]
SETTING_COLUMNS = ["system", "init_label", "procedure", "objective", "teacher_layers", "student_name",
                   "student_layers", "init_name"]


def norm_task(name: Any) -> str:
    """Canonical task key: a GLUE task's lower case without '-'/'_' ("SST-2" -> "sst2", "sts_b" -> "stsb"); any
    other task's name as it is, lower case (the report prints it: `causal_toy_instructions` stays readable)."""
    text = str(name).strip().lower()
    key = text.replace("-", "").replace("_", "")
    return key if key in TASK_LABELS else text


def task_order(tasks: Iterable[str]) -> list[str]:
    """Paper order for the GLUE seven, then stsb, toy, then anything else alphabetically."""
    present = set(tasks)
    known = [t for t in (*GLUE_TASKS, *EXTRA_TASK_ORDER) if t in present]
    return known + sorted(present - set(known))


def task_label(task: str) -> str:
    return TASK_LABELS.get(task, task)


def objective_rank(objective: str) -> tuple[int, str]:
    """Sort key: the paper's order, then anything else alphabetically."""
    return (OBJECTIVE_ORDER.index(objective), "") if objective in OBJECTIVE_ORDER else (len(OBJECTIVE_ORDER), objective)


def objective_order(objectives: Iterable[str]) -> list[str]:
    return sorted(set(objectives), key=objective_rank)


def column_metric(task: str, mode: str = "header", primary: str | None = None) -> str:
    """The dev metric shown in a task's column.

    mode "header": what the paper's headers say (MRPC F1, CoLA MCC); "paper": what the paper's numbers
    actually are (accuracy for the GLUE seven). Tasks the paper lacks use their run's primary metric.
    """
    if mode not in METRIC_MODES:
        raise ValueError(f"metric mode must be one of {METRIC_MODES}, got {mode!r}")
    table = HEADER_METRICS if mode == "header" else PAPER_METRICS
    if task in table:
        return table[task]
    return primary or "accuracy"


def not_paper_setting(procedure: str, teacher_layers: Any, student_name: str, student_layers: Any,
                      init_name: str) -> str | None:
    """Why a row's setting is not the paper's (None when it is): the only rows set against its numbers."""
    reasons = []
    if procedure != PAPER_PROCEDURE:
        reasons.append(f"procedure {procedure}, the paper's {PAPER_PROCEDURE}")
    if _int_or_none(teacher_layers) != PAPER_TEACHER_LAYERS:
        reasons.append(f"teacher has {_int_or_none(teacher_layers) or 'unknown'} layers, "
                       f"the paper's {PAPER_TEACHER_LAYERS}")
    if student_name != PAPER_STUDENT:
        reasons.append(f"student {student_name}, the paper's {PAPER_STUDENT}")
    if _int_or_none(student_layers) != PAPER_STUDENT_LAYERS:
        reasons.append(f"student has {_int_or_none(student_layers) or 'unknown'} layers, "
                       f"the paper's {PAPER_STUDENT_LAYERS}")
    if init_name not in PAPER_INIT_LAYERS:
        reasons.append(f"init {init_name}, the paper's are {'/'.join(PAPER_INIT_LAYERS)}")
    return "; ".join(reasons) or None


def _int_or_none(value: Any) -> int | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else int(out)


def as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def load_paper_table(path: str | Path) -> pd.DataFrame:
    """A paper CSV (results/paper/table1/3_*.csv) in long form: objective, init_label, task, mean,
    std (NaN when the table has none), with Avg rows as task "avg". Percent, as printed."""
    wide = pd.read_csv(path, dtype={"init": str})
    rows = []
    for rec in wide.to_dict("records"):
        init = "" if pd.isna(rec.get("init")) else str(rec["init"]).replace(" ", "")
        for col, val in rec.items():
            if col in ("objective", "init", "system") or col.endswith("_std"):
                continue
            task = "avg" if col == "Avg" else norm_task(col)
            std = rec.get(f"{col}_std", math.nan)
            rows.append({"objective": str(rec.get("objective", "")), "init_label": init, "task": task,
                         "mean": as_float(val), "std": as_float(std)})
    return pd.DataFrame(rows, columns=["objective", "init_label", "task", "mean", "std"])


def load_method_table(path: str | Path) -> pd.DataFrame:
    """Another system's table (results/paper/peakd_*.csv: a `method` column, one column per task, `Avg`) in
    long form: method, task (Avg as "avg"), mean. Percent, as printed."""
    wide = pd.read_csv(path, dtype={"method": str})
    rows = [{"method": rec["method"], "task": "avg" if col == "Avg" else norm_task(col), "mean": as_float(val)}
            for rec in wide.to_dict("records") for col, val in rec.items() if col != "method"]
    return pd.DataFrame(rows, columns=["method", "task", "mean"])


def compare_with_paper(
    agg: pd.DataFrame, averages: pd.DataFrame, settings: pd.DataFrame, paper: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Our cells (paper metrics!) beside the paper's, like with like only.

    `agg` and `averages` are keyed by (system, init_label); `settings` says per (system, init_label)
    what was run (SETTING_COLUMNS). Rows in the paper's setting (`not_paper_setting`) are matched on
    objective, the paper's layers for their init rule, and task; only cells present in both.
    Returns (comparison: COMPARISON_COLUMNS with delta = ours - paper, in the paper's row order;
    not compared: system, init_label, reason).
    """
    excluded_cols = ["system", "init_label", "reason"]
    if agg.empty or paper.empty:
        return pd.DataFrame(columns=COMPARISON_COLUMNS), pd.DataFrame(columns=excluded_cols)
    keys = settings.drop_duplicates(["system", "init_label"])
    comparable, excluded = [], []
    for row in keys.to_dict("records"):
        why = not_paper_setting(row["procedure"], row["teacher_layers"], row["student_name"],
                                row["student_layers"], row["init_name"])
        if why is None:
            comparable.append({"system": row["system"], "init_label": row["init_label"],
                               "objective": row["objective"], "paper_init": PAPER_INIT_LAYERS[row["init_name"]]})
        else:
            excluded.append({"system": row["system"], "init_label": row["init_label"], "reason": why})
    excluded_frame = pd.DataFrame(excluded, columns=excluded_cols)
    if not comparable:
        return pd.DataFrame(columns=COMPARISON_COLUMNS), excluded_frame
    ours = agg[agg["n"] > 0].rename(columns={"mean": "ours", "std": "ours_std"})
    ours = ours[["system", "init_label", "task", "n", "ours", "ours_std"]]
    if not averages.empty:
        avg = averages.dropna(subset=["avg"]).assign(task="avg", n=np.nan, ours_std=np.nan)
        avg = avg.rename(columns={"avg": "ours"})[ours.columns]
        ours = pd.concat([ours, avg], ignore_index=True) if not avg.empty else ours
    ours = ours.merge(pd.DataFrame(comparable), on=["system", "init_label"], how="inner")
    ref = paper.rename(columns={"mean": "paper", "std": "paper_std", "init_label": "paper_init"})
    # paper on the left: an inner merge keeps the left frame's order, i.e. the paper's row order
    both = ref.merge(ours, on=["objective", "paper_init", "task"], how="inner")
    both["delta"] = both["ours"] - both["paper"]
    return both[COMPARISON_COLUMNS].reset_index(drop=True), excluded_frame
