"""Aggregation and significance tests over a store of result.json records.

Pure functions (no printing, no files written): `report.py` does the formatting and the CLI.
Everything here reads only the result.json records described in .design/CONTRACT.md.

Decisions (see also results/paper/README.md):
- which: the dev scores of a run are taken from `best` by default (the epoch with the best primary
  metric over prediction-stage epochs). The paper trained with fairseq, which keeps the best dev
  checkpoint and reports best dev scores; `final` (last epoch, no selection on dev) and `max` (each
  metric's own maximum over prediction-stage epochs, i.e. fairseq's `best_accuracy` when MRPC/CoLA are
  read as accuracy) are knobs.
- std is over seeds with ddof=1 by default (the paper does not say); n is reported per cell.
- Scores are percent (records hold fractions).
- Avg is over the 7 GLUE tasks only, and only when all 7 are present in the row.
- Paired t-tests pool matched (task, seed) pairs across tasks; Holm correction is over every test
  of one table (one family per table).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

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

OBJECTIVE_ORDER: tuple[str, ...] = (
    "vanilla_kd", "hid_cls_contrast", "hid_cls", "hid_seq", "att_mse", "att_mse_hid_seq",
    "att_kl", "att_kl_hid_seq", "att_kl_val_kl",
)
INIT_NAME_ORDER: tuple[str, ...] = ("skip", "mixed", "bottom", "first", "custom", "random")
WHICH_CHOICES: tuple[str, ...] = ("best", "final", "max")
STATUSES: tuple[str, ...] = ("completed", "failed", "running")

# Columns of the records frame that identify a run; dev metrics follow as "dev.<metric>".
RECORD_COLUMNS: tuple[str, ...] = (
    "path", "status", "error", "task", "objective", "init_spec", "init_name", "init_layers",
    "init_label", "seed", "config_hash", "primary_metric", "primary", "started_at", "finished_at",
)
CURVE_COLUMNS: tuple[str, ...] = (
    "path", "task", "objective", "init_label", "init_name", "seed", "config_hash", "stage", "epoch",
    "global_epoch", "metric", "value", "train_loss",
)
SCORE_KEYS: tuple[str, ...] = (
    "task", "objective", "init_label", "init_name", "init_spec", "seed", "config_hash", "path",
)


@dataclass
class Store:
    """Everything read from a results directory."""

    records: pd.DataFrame  # one row per readable result.json (all statuses)
    curves: pd.DataFrame  # one row per (completed record, epoch): the primary metric in percent
    skipped: list[str] = field(default_factory=list)  # why files were not read


# ----------------------------------------------------------------------------- names


def norm_task(name: Any) -> str:
    """Canonical task key: lower case without '-'/'_' ("SST-2" -> "sst2", "sts_b" -> "stsb")."""
    return str(name).strip().lower().replace("-", "").replace("_", "")


def norm_spec(spec: Any) -> str:
    """Canonical init spec for matching ("[1, 5, 9]" -> "[1,5,9]", 1 -> "1", "Skip" -> "skip")."""
    if isinstance(spec, (list, tuple)):
        return "[" + ",".join(str(int(x)) for x in spec) + "]"
    return str(spec).strip().lower().replace(" ", "").replace("'", "").replace('"', "")


def task_order(tasks: Iterable[str]) -> list[str]:
    """Paper order for the GLUE seven, then stsb, toy, then anything else alphabetically."""
    present = set(tasks)
    known = [t for t in (*GLUE_TASKS, *EXTRA_TASK_ORDER) if t in present]
    return known + sorted(present - set(known))


def task_label(task: str) -> str:
    return TASK_LABELS.get(task, task)


def objective_order(objectives: Iterable[str]) -> list[str]:
    present = set(objectives)
    return [o for o in OBJECTIVE_ORDER if o in present] + sorted(present - set(OBJECTIVE_ORDER))


def init_order(frame: pd.DataFrame) -> list[str]:
    """Order init labels by init name (skip, mixed, bottom, ...), then label."""
    if frame.empty:
        return []
    pairs = frame[["init_name", "init_label"]].drop_duplicates()

    def key(row: tuple[str, str]) -> tuple[int, str]:
        name, label = row
        rank = INIT_NAME_ORDER.index(name) if name in INIT_NAME_ORDER else len(INIT_NAME_ORDER)
        return rank, label

    ordered = sorted(((str(n), str(lab)) for n, lab in pairs.itertuples(index=False)), key=key)
    seen: list[str] = []
    for _, label in ordered:
        if label not in seen:
            seen.append(label)
    return seen


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


# ----------------------------------------------------------------------------- loading


def _as_float(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _pick_dev(rec: dict[str, Any], which: str) -> dict[str, float]:
    """Dev metrics of one record according to `which` (see module docstring)."""
    if which == "best":
        dev = (rec.get("best") or {}).get("dev") or {}
    elif which == "final":
        dev = (rec.get("final") or {}).get("dev") or {}
    else:  # max: each metric's own maximum over prediction-stage epochs
        epochs = [e for e in rec.get("epochs") or [] if isinstance(e, dict)]
        pred = [e for e in epochs if e.get("stage") == "prediction"] or epochs
        dev = {}
        for ep in pred:
            for key, val in (ep.get("dev") or {}).items():
                v = _as_float(val)
                if not math.isnan(v) and (key not in dev or v > dev[key]):
                    dev[key] = v
    return {str(k): _as_float(v) for k, v in dev.items()}


def _init_fields(init: Any) -> tuple[str, str, str, str]:
    """(spec, name, layers "4,8,12", label) of a record's init block; label = layers, or name if none."""
    init = init if isinstance(init, dict) else {"spec": init}
    spec = norm_spec(init.get("spec", ""))
    name = str(init.get("name") or spec)
    layers_raw = init.get("layers") or []
    try:
        layers = ",".join(str(int(x)) for x in layers_raw)
    except (TypeError, ValueError):
        layers = ""
    return spec, name, layers, layers or name


def _read_one(path: Path, which: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], str | None]:
    """Parse one result.json -> (record row, curve rows, reason skipped)."""
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, [], f"{path}: unreadable ({type(exc).__name__}: {exc})"
    if not isinstance(rec, dict):
        return None, [], f"{path}: not a JSON object"
    missing = [k for k in ("task", "objective", "seed", "status") if k not in rec]
    if missing:
        return None, [], f"{path}: missing keys {missing} (partial record?)"
    try:
        seed = int(rec["seed"])
    except (TypeError, ValueError):
        return None, [], f"{path}: seed {rec['seed']!r} is not an integer"
    status = str(rec["status"])
    spec, name, layers, label = _init_fields(rec.get("init"))
    primary_metric = str(rec.get("primary_metric") or "accuracy")
    dev = _pick_dev(rec, which) if status == "completed" else {}
    error = rec.get("error")
    row: dict[str, Any] = {
        "path": str(path), "status": status, "error": None if error is None else str(error),
        "task": norm_task(rec["task"]), "objective": str(rec["objective"]),
        "init_spec": spec, "init_name": name, "init_layers": layers, "init_label": label,
        "seed": seed, "config_hash": str(rec.get("config_hash") or ""),
        "primary_metric": primary_metric, "primary": dev.get(primary_metric, math.nan),
        "started_at": rec.get("started_at"), "finished_at": rec.get("finished_at"),
    }
    for key, val in dev.items():
        row[f"dev.{key}"] = val
    curve: list[dict[str, Any]] = []
    if status == "completed":
        for i, ep in enumerate(e for e in rec.get("epochs") or [] if isinstance(e, dict)):
            curve.append({
                "path": row["path"], "task": row["task"], "objective": row["objective"], "init_label": label,
                "init_name": name, "seed": seed, "config_hash": row["config_hash"],
                "stage": str(ep.get("stage", "")), "epoch": int(ep.get("epoch", i + 1) or i + 1),
                "global_epoch": i + 1, "metric": primary_metric,
                "value": 100.0 * _as_float((ep.get("dev") or {}).get(primary_metric)),
                "train_loss": _as_float(ep.get("train_loss")),
            })
    return row, curve, None


def load_store(results_dir: str | Path, which: str = "best") -> Store:
    """Read every `**/result.json` under results_dir; unreadable or partial files are skipped and
    listed in `Store.skipped` (never raised: a sweep may be writing while we read)."""
    if which not in WHICH_CHOICES:
        raise ValueError(f"which must be one of {WHICH_CHOICES}, got {which!r}")
    rows: list[dict[str, Any]] = []
    curves: list[dict[str, Any]] = []
    skipped: list[str] = []
    for path in sorted(Path(results_dir).glob("**/result.json")):
        row, curve, why = _read_one(path, which)
        if why is not None:
            skipped.append(why)
            continue
        rows.append(row)  # type: ignore[arg-type]
        curves.extend(curve)
    records = pd.DataFrame(rows)
    for col in RECORD_COLUMNS:
        if col not in records.columns:
            records[col] = pd.Series(dtype=object)
    dev_cols = sorted(c for c in records.columns if c.startswith("dev."))
    records = records[[*RECORD_COLUMNS, *dev_cols]]
    curve_frame = pd.DataFrame(curves, columns=list(CURVE_COLUMNS))
    return Store(records=records, curves=curve_frame, skipped=skipped)


def load_records(results_dir: str | Path, which: str = "best") -> pd.DataFrame:
    """One row per readable result.json (see `load_store`); skipped files raise a `UserWarning`.

    Columns: RECORD_COLUMNS (status, task, objective, init_spec, init_name, init_layers "4,8,12",
    init_label, seed, config_hash, primary_metric, primary, ...) then "dev.<metric>" for every dev
    metric of the chosen epoch (`which` = "best" | "final" | "max"; fractions, as stored).
    """
    store = load_store(results_dir, which)
    for why in store.skipped:
        warnings.warn(f"skipped {why}", stacklevel=2)
    return store.records


# ----------------------------------------------------------------------------- selection


def status_counts(records: pd.DataFrame) -> dict[str, int]:
    """How many records per status (completed / failed / running, plus any other value seen)."""
    counts = {s: 0 for s in STATUSES}
    if not records.empty:
        for status, n in records["status"].value_counts().items():
            counts[str(status)] = int(n)
    return counts


def select_init(records: pd.DataFrame, init: str = "skip") -> tuple[pd.DataFrame, str]:
    """Records of one initialisation (Table 1 setting), matched on init name, spec or layers.

    Default "skip" = every k-th teacher layer (spec 1, "4,8,12" for a 12-layer teacher into 3 layers),
    the paper's Table 1 setting. If nothing matches, falls back to the most common init and says so.
    """
    want = norm_spec(init)
    if records.empty:
        return records, ""
    mask = (
        (records["init_name"].astype(str).str.lower() == want)
        | (records["init_spec"].astype(str) == want)
        | (records["init_label"].astype(str) == want.strip("[]"))
    )
    if mask.any():
        return records[mask], ""
    completed = records[records["status"] == "completed"]
    pool = completed if not completed.empty else records
    label = str(pool["init_label"].value_counts().index[0])
    note = f"no records with init {init!r}; Table 1 uses the most common init instead: {label}"
    return records[records["init_label"] == label], note


def scores(records: pd.DataFrame, mode: str = "header") -> tuple[pd.DataFrame, list[str]]:
    """Long frame of per-run scores (percent) of completed records, one metric per task column.

    Returns (frame, notes). Columns: SCORE_KEYS + metric, value. Duplicate runs of one
    (task, objective, init, seed) with different config hashes keep the newest (by finished_at).
    """
    notes: list[str] = []
    cols = [*SCORE_KEYS, "metric", "value"]
    done = records[records["status"] == "completed"] if not records.empty else records
    if done.empty:
        return pd.DataFrame(columns=cols), notes
    done = done.sort_values("finished_at", na_position="first", key=lambda s: s.astype(str))
    keys = ["task", "objective", "init_label", "seed"]
    dup = done.duplicated(keys, keep="last")
    if dup.any():
        notes.append(
            f"{int(dup.sum())} duplicate completed run(s) of the same task/objective/init/seed "
            "(different config hash); kept the newest"
        )
    done = done[~dup]
    out = []
    for rowd in done.to_dict("records"):
        metric = column_metric(rowd["task"], mode, rowd["primary_metric"])
        value = rowd.get(f"dev.{metric}", math.nan)  # absent column -> NaN
        out.append({**{k: rowd[k] for k in SCORE_KEYS}, "metric": metric,
                    "value": 100.0 * _as_float(value)})
    frame = pd.DataFrame(out, columns=cols)
    lacking = frame[frame["value"].isna()]
    if not lacking.empty:
        for (task, metric), grp in lacking.groupby(["task", "metric"]):
            notes.append(f"{len(grp)} completed {task} run(s) lack dev metric {metric!r}; left out")
    return frame.dropna(subset=["value"]).reset_index(drop=True), notes


# ----------------------------------------------------------------------------- aggregation


def aggregate(
    scores_df: pd.DataFrame, by: Sequence[str] = ("objective", "init_label"), ddof: int = 1
) -> pd.DataFrame:
    """Mean, std (with `ddof`) and n over seeds per (by..., task).

    std is NaN when n <= ddof. Columns: by..., task, metric, mean, std, n.
    """
    by = list(by)
    cols = [*by, "task", "metric", "mean", "std", "n"]
    if scores_df.empty:
        return pd.DataFrame(columns=cols)
    def std(v: pd.Series) -> float:
        return float(np.std(v.to_numpy(), ddof=ddof)) if len(v) > ddof else math.nan

    grouped = scores_df.groupby([*by, "task", "metric"], sort=False)["value"]
    agg = grouped.agg(mean="mean", std=std, n="count").reset_index()
    agg["n"] = agg["n"].astype(int)
    return agg[cols]


def row_averages(agg: pd.DataFrame, by: Sequence[str] = ("objective", "init_label")) -> pd.DataFrame:
    """Avg over the 7 GLUE tasks of each row's cell means; NaN (with the reason) unless all 7 present.

    Columns: by..., avg, n_tasks, reason.
    """
    by = list(by)
    cols = [*by, "avg", "n_tasks", "reason"]
    if agg.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for key, grp in agg.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        glue = grp[grp["task"].isin(GLUE_TASKS) & (grp["n"] > 0)]
        have = set(glue["task"])
        lacking = [task_label(t) for t in GLUE_TASKS if t not in have]
        if lacking:
            avg, reason = math.nan, "missing " + ", ".join(lacking)
        else:
            avg, reason = float(glue["mean"].mean()), ""
        out.append({**dict(zip(by, key, strict=True)), "avg": avg, "n_tasks": len(have), "reason": reason})
    return pd.DataFrame(out, columns=cols)


# ----------------------------------------------------------------------------- tests


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (NaNs stay NaN and do not count towards m).

    Sorted ascending p_(1..m): adj_(i) = max_{j<=i} min(1, (m - j + 1) * p_(j)).
    """
    p = np.asarray(pvalues, dtype=float)
    adj = np.full_like(p, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    order = ok[np.argsort(p[ok], kind="stable")]
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        adj[idx] = running
    return adj


def paired_ttest(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, str]:
    """Two-sided paired t-test of a vs b -> (t, p, note). NaN with a note instead of raising when
    there are fewer than 2 pairs or the differences have zero variance (t undefined)."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    d = x - y
    if len(d) < 2:
        return math.nan, math.nan, f"only {len(d)} matched pair(s)"
    if np.allclose(d, d[0], rtol=0.0, atol=1e-12):
        return math.nan, math.nan, f"differences have zero variance (all {d[0]:+.4g})"
    res = sps.ttest_rel(x, y)
    return float(res.statistic), float(res.pvalue), ""


def paired_tests(
    scores_df: pd.DataFrame,
    compare: str = "objective",
    within: Sequence[str] = (),
    alpha: float = 0.05,
    levels: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every pair of levels of `compare` (within each group of `within`), paired on matched
    (task, seed) scores present in both. Table 1: compare="objective" on one init; Table 3:
    compare="init_label", within=("objective",).

    Holm correction over all tests returned (one family). Columns: within..., a, b, n, mean_a,
    mean_b, mean_diff, t, p, p_holm, significant, significant_holm, note.
    """
    within = list(within)
    cols = [*within, "a", "b", "n", "mean_a", "mean_b", "mean_diff", "t", "p", "p_holm",
            "significant", "significant_holm", "note"]
    if scores_df.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    groups = list(scores_df.groupby(within, sort=False)) if within else [((), scores_df)]
    if "objective" in within:  # paper order of objectives, not the order runs finished in
        rank = {o: i for i, o in enumerate(objective_order(scores_df["objective"].unique()))}
        pos = within.index("objective")
        groups.sort(key=lambda kv: rank[(kv[0] if isinstance(kv[0], tuple) else (kv[0],))[pos]])
    for key, grp in groups:
        key = key if isinstance(key, tuple) else (key,)
        wide = grp.pivot_table(index=["task", "seed"], columns=compare, values="value", aggfunc="mean")
        present = list(wide.columns)
        order = [lv for lv in levels if lv in present] if levels else present
        order += [lv for lv in present if lv not in order]
        for a, b in combinations(order, 2):
            both = wide[[a, b]].dropna()
            t, p, note = paired_ttest(both[a], both[b])
            rows.append({
                **dict(zip(within, key, strict=True)), "a": a, "b": b, "n": len(both),
                "mean_a": float(both[a].mean()) if len(both) else math.nan,
                "mean_b": float(both[b].mean()) if len(both) else math.nan,
                "mean_diff": float((both[a] - both[b]).mean()) if len(both) else math.nan,
                "t": t, "p": p, "note": note,
            })
    out = pd.DataFrame(rows, columns=[c for c in cols if c not in ("p_holm", "significant", "significant_holm")])
    out["p_holm"] = holm(out["p"].to_numpy()) if len(out) else []
    # NaN p -> not significant (there is no evidence either way; the note says why).
    out["significant"] = out["p"] < alpha
    out["significant_holm"] = out["p_holm"] < alpha
    return out[cols]


# ----------------------------------------------------------------------------- grid status


def job_key(task: Any, objective: Any, init_spec: Any, seed: Any) -> tuple[str, str, str, int]:
    """Normalised (task, objective, init spec, seed): how records and expected grid cells are matched."""
    return norm_task(task), str(objective), norm_spec(init_spec), int(seed)


def grid_status(
    records_df: pd.DataFrame, expected: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Split the expected jobs ({task, objective, init_spec, seed} dicts) into (completed, failed,
    missing). A job with any completed record is completed; otherwise its newest record decides
    (failed -> failed); running or absent jobs are missing. Entries are the caller's dicts."""
    latest: dict[tuple[str, str, str, int], str] = {}
    if not records_df.empty:
        ordered = records_df.sort_values("started_at", na_position="first", key=lambda s: s.astype(str))
        for row in ordered.itertuples(index=False):
            key = job_key(row.task, row.objective, row.init_spec, row.seed)
            if latest.get(key) != "completed":
                latest[key] = str(row.status)
    completed, failed, missing = [], [], []
    for job in expected:
        key = job_key(job["task"], job["objective"], job["init_spec"], job["seed"])
        status = latest.get(key)
        if status == "completed":
            completed.append(job)
        elif status == "failed":
            failed.append(job)
        else:
            missing.append(job)
    return completed, failed, missing


# ----------------------------------------------------------------------------- curves


def align_curves(curves: pd.DataFrame) -> pd.DataFrame:
    """Add x: intermediate epochs at 1..k, prediction epochs at k_max(task) + epoch, so prediction
    stages line up across objectives (vanilla KD has no intermediate stage). Also returns the
    boundary per task in column `boundary` (k_max + 0.5; NaN when no run has an intermediate stage)."""
    if curves.empty:
        return curves.assign(x=pd.Series(dtype=float), boundary=pd.Series(dtype=float))
    inter = curves[curves["stage"] == "intermediate"].groupby("task")["epoch"].max()
    kmax = curves["task"].map(inter).astype(float)
    is_pred = curves["stage"] == "prediction"
    x = np.where(is_pred, kmax.fillna(0.0) + curves["epoch"], curves["epoch"]).astype(float)
    # Stages other than the two known ones keep their position in the run.
    known = curves["stage"].isin(["intermediate", "prediction"])
    x = np.where(known, x, curves["global_epoch"].astype(float))
    return curves.assign(x=x, boundary=kmax + 0.5)


def curve_means(curves: pd.DataFrame, by: Sequence[str] = ("objective",)) -> pd.DataFrame:
    """Mean and std over seeds of the aligned curves per (task, by..., x)."""
    aligned = align_curves(curves)
    keys = ["task", *by, "x"]
    if aligned.empty:
        return pd.DataFrame(columns=[*keys, "mean", "std", "n", "boundary", "metric"])
    grp = aligned.dropna(subset=["value"]).groupby(keys, sort=True)
    out = grp["value"].agg(mean="mean", std="std", n="count").reset_index()
    extra = grp[["boundary", "metric"]].first().reset_index(drop=True)
    return pd.concat([out, extra], axis=1)


# ----------------------------------------------------------------------------- paper numbers


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
                         "mean": _as_float(val), "std": _as_float(std)})
    return pd.DataFrame(rows, columns=["objective", "init_label", "task", "mean", "std"])


def compare_with_paper(
    agg: pd.DataFrame, averages: pd.DataFrame, paper: pd.DataFrame
) -> pd.DataFrame:
    """Our cells (paper metrics!) beside the paper's, matched on objective, resolved init layers
    ("4,8,12") and task; only cells present in both. Columns: objective, init_label, task, n, ours,
    ours_std, paper, paper_std, delta (ours - paper)."""
    cols = ["objective", "init_label", "task", "n", "ours", "ours_std", "paper", "paper_std", "delta"]
    if agg.empty or paper.empty:
        return pd.DataFrame(columns=cols)
    ours = agg[agg["n"] > 0].rename(columns={"mean": "ours", "std": "ours_std"})
    ours = ours[["objective", "init_label", "task", "n", "ours", "ours_std"]]
    if not averages.empty:
        avg = averages.dropna(subset=["avg"]).assign(task="avg", n=np.nan, ours_std=np.nan)
        avg = avg.rename(columns={"avg": "ours"})[ours.columns]
        ours = pd.concat([ours, avg], ignore_index=True) if not avg.empty else ours
    ref = paper.rename(columns={"mean": "paper", "std": "paper_std"})
    # paper on the left: an inner merge keeps the left frame's order, i.e. the paper's row order
    both = ref.merge(ours, on=["objective", "init_label", "task"], how="inner")
    both["delta"] = both["ours"] - both["paper"]
    return both[cols].reset_index(drop=True)
