"""A results directory read into frames, every record through `Record`.

- `load_store`: one row per readable record (all statuses), one row per (complete record, epoch) for
  the curves, and the files left out with the reason (unreadable, or "completed" but incomplete by
  `is_complete`, the rule the sweeper uses too).
- A table row is one *system*: (procedure, objective, teacher id, student id, setup id), and the init in
  Table 3. The setup is the rest of what a run's config says about the method: the objective's checked
  settings, the optimizer and epoch overrides, precision, the layer map and the pilot-subset caps. Its
  label is the objective ("no KD (fine-tuning)" for procedure finetune), with the teacher and the student
  added only when the store holds more than one of them, and the setup keys that differ between rows of
  the same label (e.g. "[objective.alpha=0.3]").
- `scores`: per-run scores (percent) of the metric each task column shows.

Which epoch a score comes from (`which`): "best" = for each metric shown, the run's best epoch by that
same metric among the scored stages' epochs (SCORED_STAGES), i.e. what a run selected on that
metric reports (fairseq keeps the best dev checkpoint per metric); "max" is the same selection, kept as
a name for older command lines; "primary" = the run's own best epoch, chosen by its primary metric (the
record's `best`); "final" = the last epoch. Scores are percent (records hold fractions).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from distill_sweep.analysis import prediction_checks
from distill_sweep.analysis.paper import INIT_NAME_ORDER, as_float, column_metric, norm_task, objective_rank
from distill_sweep.records.labels import NO_KD, distillation, recorded_seeds, seed_text
from distill_sweep.records.predictions import PredictionsError, read_predictions
from distill_sweep.records.record import (
    SCORED_STAGES,
    STATUSES,
    Record,
    RecordError,
    best_epoch,
    incomplete_reason,
    load_json,
    part_id,
)

WHICH_CHOICES: tuple[str, ...] = ("best", "primary", "final", "max")
_SCORED = "/".join(SCORED_STAGES)
WHICH_TEXT: dict[str, str] = {
    "best": f"each metric at the run's best epoch by that same metric, among {_SCORED} epochs",
    "max": f"each metric at the run's best epoch by that same metric, among {_SCORED} epochs (max = best)",
    "primary": f"every metric at the run's best epoch by its primary metric, among {_SCORED} epochs "
               "(the record's `best`)",
    "final": "every metric at the run's last epoch",
}
NO_KD_LABEL = NO_KD  # the row of procedure finetune (records/labels.py: its one name)
# What makes two runs rows of their own (Table 3 adds init_label).
SYSTEM_KEY: tuple[str, ...] = ("procedure", "objective", "teacher_id", "student_id", "setup_id")
MAX_SETUP_TAGS = 3  # differing setup keys named in a row label before "..."
# the setup keys a tuning study may choose values in (sweep/tune.py): a tuned row's tag "tuned" stands for them
TUNED_PARTS = ("objective", "optimizer", "map", "epochs", "max_steps_per_epoch", "precision")

# Columns of the records frame; dev metrics follow as "dev.<metric>".
RECORD_COLUMNS: tuple[str, ...] = (
    "path", "status", "error", "procedure", "task", "objective", "system", "teacher_id", "teacher_name",
    "teacher_layers", "teacher_hidden", "teacher_name_or_path", "teacher_dev", "student_id", "student_name",
    "student_layers", "student_hidden", "student_settings", "setup_id", "setup", "init_spec", "init_name", "init_layers",
    "init_label", "seed", "seeds", "seed_label", "config_hash", "primary_metric", "primary", "started_at", "finished_at",
    "git_commit", "wall_time_s", "peak_memory_mb", "best_epoch", "dev_hash", "dev_size",
)
CURVE_COLUMNS: tuple[str, ...] = (
    "path", "task", "objective", "system", "init_label", "init_name", "seed", "config_hash", "stage",
    "epoch", "global_epoch", "metric", "value", "train_loss",
)
EARLY_EXIT_COLUMNS: tuple[str, ...] = (
    "path", "task", "system", "seed", "speed", "metric", "value", "mean_exit_layer", "speedup",
)
SCORE_KEYS: tuple[str, ...] = (
    "task", "system", *SYSTEM_KEY, "teacher_layers", "student_name", "student_layers", "init_label",
    "init_name", "init_spec", "seed", "config_hash", "path",
)


@dataclass
class Store:
    """Everything read from a results directory."""

    records: pd.DataFrame  # one row per readable result.json (all statuses)
    curves: pd.DataFrame  # one row per (complete record, epoch): the primary metric in percent
    skipped: list[str] = field(default_factory=list)  # why files were left out
    # one row per (complete record with an early-exit curve, speed): procedure fastbert
    early_exit: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(EARLY_EXIT_COLUMNS)))


# ----------------------------------------------------------------------------- one record


def norm_spec(spec: Any) -> str:
    """Canonical init spec for matching ("[1, 5, 9]" -> "[1,5,9]", 1 -> "1", "Skip" -> "skip")."""
    if isinstance(spec, (list, tuple)):
        return "[" + ",".join(str(int(x)) for x in spec) + "]"
    return str(spec).strip().lower().replace(" ", "").replace("'", "").replace('"', "")


def pick_dev(record: Record, which: str) -> dict[str, float]:
    """Dev metrics (fractions) of one record according to `which` (see the module docstring)."""
    if which == "primary":
        return {str(k): as_float(v) for k, v in ((record.best or {}).get("dev") or {}).items()}
    if which == "final":
        return {str(k): as_float(v) for k, v in ((record.final or {}).get("dev") or {}).items()}
    metrics = {m for e in record.epochs if e.get("stage") in SCORED_STAGES for m in (e.get("dev") or {})}
    dev = {}
    for metric in sorted(metrics):
        epoch = best_epoch(record.epochs, metric)
        if epoch is not None:
            dev[metric] = float(epoch["dev"][metric])
    return dev


SEED_SOURCES = ("init", "data_order", "dropout", "sampling")  # config/seeds.py's sources, in the `seeds` tuple


def run_seeds(rec: Record) -> tuple[int, ...]:
    """The run's seed per source of variance (SEED_SOURCES order): the record's `seeds`, or its seed for every
    source (records from before the block)."""
    given = rec.seeds or {}
    return tuple(int(given[s]) if isinstance(given.get(s), int) else rec.seed for s in SEED_SOURCES)


def _row(path: Path, rec: Record, which: str) -> dict[str, Any]:
    init, setup = rec.init, setup_of(rec)
    layers = ",".join(str(x) for x in init.layers)
    complete = rec.status == "completed"
    dev = pick_dev(rec, which) if complete else {}
    row: dict[str, Any] = {
        "path": str(path), "status": rec.status, "error": rec.error, "procedure": rec.procedure,
        "task": norm_task(rec.task), "objective": rec.objective, "system": "",
        "teacher_id": rec.teacher.id, "teacher_name": rec.teacher.name,
        "teacher_layers": rec.teacher.num_layers, "teacher_hidden": rec.teacher.hidden_size,
        "teacher_name_or_path": rec.teacher.name_or_path,
        # the fine-tuned teacher's dev metrics (fractions; its last fine-tuning epoch, from the teacher cache's
        # meta), {} where the job loaded no teacher (a BiLSTM's no-KD run)
        "teacher_dev": {str(k): as_float(v) for k, v in (rec.teacher.dev or {}).items()},
        "student_id": rec.student.id, "student_name": rec.student.name,
        "student_layers": rec.student.num_layers, "student_hidden": rec.student.hidden_size,
        "student_settings": dict(rec.student.settings),
        "setup_id": part_id(setup), "setup": _flat(setup),
        "init_spec": norm_spec(init.spec), "init_name": init.name or norm_spec(init.spec),
        "init_layers": layers, "init_label": layers or init.name or norm_spec(init.spec),
        "seed": rec.seed, "seeds": run_seeds(rec), "config_hash": rec.config_hash,
        # "seed 1 (seeds.data_order=2)": how every line naming a job says its seeds (records/labels.py)
        "seed_label": seed_text(rec.seed, recorded_seeds(rec.seed, rec.seeds)),
        "primary_metric": rec.primary_metric or "accuracy", "started_at": rec.started_at, "finished_at": rec.finished_at,
        # for the HTML report's job list: the code's commit, cost, and "stage epoch" of the run's best epoch
        "git_commit": rec.git_commit, "wall_time_s": rec.wall_time_s, "peak_memory_mb": rec.peak_memory_mb,
        "best_epoch": f"{rec.best.get('stage')} {rec.best.get('epoch')}" if complete and rec.best else None,
        # the content hash of the dev split its primary metric scores (None: written before records kept it)
        "dev_hash": next(iter((rec.data.dev_hash or {}).values()), None),
        # the dev examples it was scored on (None: not recorded): what one example weighs (report/render.py)
        "dev_size": rec.data.dev_size if isinstance(rec.data.dev_size, int) and rec.data.dev_size > 0 else None,
    }
    row["primary"] = dev.get(row["primary_metric"], math.nan)
    row.update({f"dev.{k}": v for k, v in dev.items()})
    return row


def _early_exit(row: dict[str, Any], rec: Record) -> list[dict[str, Any]]:
    """The speed-accuracy curve a fastbert record holds (`early_exit`): the primary metric in percent."""
    curve = rec.early_exit
    if not isinstance(curve, list):
        return []
    metric = row["primary_metric"]
    return [{"path": row["path"], "task": row["task"], "system": "", "seed": row["seed"], "speed": as_float(p.get("speed")),
             "metric": metric, "value": 100.0 * as_float((p.get("dev") or {}).get(metric)),
             "mean_exit_layer": as_float(p.get("mean_exit_layer")), "speedup": as_float(p.get("speedup"))}
            for p in curve if isinstance(p, dict)]


def setup_of(rec: Record) -> dict[str, Any]:
    """What a run's config says about the method beyond its procedure, objective name, teacher and student
    (the task's recipe, the seed and the init are not part of it: a row spans them)."""
    c = rec.config
    task = c.get("task") if isinstance(c.get("task"), dict) else {}
    caps = {k: task.get(k) for k in ("max_train_samples", "max_dev_samples") if task.get(k) is not None}
    if caps:
        caps["subset_seed"] = task.get("subset_seed", 0)
    setup: dict[str, Any] = {"optimizer": c.get("optimizer"), "epochs": c.get("epochs"),
                             "max_steps_per_epoch": c.get("max_steps_per_epoch"), "precision": c.get("precision"),
                             "map": c.get("map", "init"), "task": caps}
    if task.get("augment") not in (None, "none"):
        setup["augment"] = task["augment"]
    if rec.procedure != "finetune":  # the no-KD baseline ignores the objective (records say none since)
        setup["objective"] = c.get("objective")
    if rec.tuned:  # its values chosen by a tuning study: another row than the configured values'
        setup["tuned"] = True
    return setup


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def _curve(row: dict[str, Any], rec: Record) -> list[dict[str, Any]]:
    out = []
    for i, ep in enumerate(rec.epochs):
        out.append({
            "path": row["path"], "task": row["task"], "objective": row["objective"], "system": "",
            "init_label": row["init_label"], "init_name": row["init_name"], "seed": row["seed"],
            "config_hash": row["config_hash"], "stage": str(ep.get("stage", "")),
            "epoch": int(ep.get("epoch", i + 1) or i + 1), "global_epoch": i + 1, "metric": row["primary_metric"],
            "value": 100.0 * as_float((ep.get("dev") or {}).get(row["primary_metric"])),
            "train_loss": as_float(ep.get("train_loss")),
        })
    return out


# ----------------------------------------------------------------------------- systems (table rows)


def _procedure_rank(procedure: str) -> tuple[int, str]:
    # the no-KD baseline first, then distillation, then procedures added later
    order = ("finetune", "task_specific")
    return (order.index(procedure), "") if procedure in order else (len(order), procedure)


def system_labels(records: pd.DataFrame) -> pd.Series:
    """A readable, unique label per system: the objective, the teacher and student added only when
    the frame holds more than one of them."""
    if records.empty:
        return pd.Series(dtype=object)
    many_teachers = records["teacher_id"].nunique() > 1
    many_students = records["student_id"].nunique() > 1

    def label(row: pd.Series) -> tuple[str, list[str]]:
        base = distillation(str(row["procedure"]), str(row["objective"]))  # the name job labels give it
        if row["procedure"] not in ("finetune", "task_specific") and base != row["procedure"]:
            base = f"{base} ({row['procedure']})"
        tags = []
        if many_teachers:
            tags.append(f"teacher {row['teacher_name']}#{row['teacher_id']}")
        if many_students:
            tags.append(f"student {row['student_name']}#{row['student_id']}")
        return base, tags

    parts = records.apply(label, axis=1)
    names = [base + (f" [{', '.join(tags)}]" if tags else "") for base, tags in parts]
    # Rows that would share a label but differ in setup: name the setup keys that tell them apart.
    by_name: dict[str, dict[str, dict[str, Any]]] = {}
    for name, (_, row) in zip(names, records.iterrows(), strict=True):
        by_name.setdefault(name, {})[row["setup_id"]] = row["setup"]
    out = []
    for (base, tags), name, (_, row) in zip(parts, names, records.iterrows(), strict=True):
        setups = by_name[name]
        if len(setups) > 1:
            keys = sorted(k for k in set().union(*setups.values())
                          if len({repr(s.get(k)) for s in setups.values()}) > 1)
            if "tuned" in keys:  # a row at a study's chosen values and one at the configured: say which, not the values
                tags.append("tuned" if row["setup"].get("tuned") else "default")
                keys = [k for k in keys if k != "tuned" and k.split(".")[0] not in TUNED_PARTS]
            mine = [f"{k}={row['setup'].get(k)}" for k in keys[:MAX_SETUP_TAGS]]
            tags = [*tags, *mine, *(["..."] if len(keys) > MAX_SETUP_TAGS else [])]
        out.append(base + (f" [{', '.join(tags)}]" if tags else ""))
    labels = pd.Series(out, index=records.index)
    # the short tags must not merge two setups into one row: where they would, the long form stands
    merged = {name for name, ids in records.groupby(labels)["setup_id"] if ids.nunique() > 1}
    if merged and any(s.get("tuned") for s in records["setup"]):
        long = system_labels(records.assign(setup=records["setup"].map(lambda s: {**s, "tuned": None} if
                                                                        s.get("tuned") else s)))
        labels = labels.where(~labels.isin(merged), long)
    return labels


def system_order(records: pd.DataFrame) -> list[str]:
    """Systems grouped by teacher, then student; within them the no-KD baseline first, then the
    objectives in the paper's order."""
    if records.empty:
        return []
    rows = records.drop_duplicates("system")

    def key(r: dict[str, Any]) -> tuple:
        layers = as_float(r["student_layers"])
        return (str(r["teacher_name"]), str(r["teacher_id"]), str(r["student_name"]),
                -1.0 if math.isnan(layers) else layers, str(r["student_id"]), _procedure_rank(str(r["procedure"])),
                objective_rank(str(r["objective"])), str(r["system"]))

    return [r["system"] for r in sorted(rows.to_dict("records"), key=key)]


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


def parts_legend(records: pd.DataFrame) -> list[str]:
    """One line per teacher and per student when the store holds more than one of them."""
    lines = []
    if records.empty:
        return lines
    if records["teacher_id"].nunique() > 1:
        for r in records.drop_duplicates("teacher_id").sort_values(["teacher_name", "teacher_id"]).to_dict("records"):
            source = r["teacher_name_or_path"]
            # a teacher built from a config (teacher.config, random weights) has no name_or_path: not "nan"
            source = f"name_or_path {source}" if isinstance(source, str) and source else \
                "built from its config"
            lines.append(f"teacher {r['teacher_name']}#{r['teacher_id']}: {_size(r['teacher_layers'])} layers, "
                         f"hidden {_size(r['teacher_hidden'])}, {source}")
    if records["student_id"].nunique() > 1:
        students = records.drop_duplicates("student_id").sort_values(["student_name", "student_id"])
        for r in students.to_dict("records"):
            # students of one type that differ only in settings (sps vs sps2): name the settings that differ
            same = [x["student_settings"] for x in students.to_dict("records") if x["student_name"] == r["student_name"]]
            keys = sorted(k for k in set().union(*same) if len({repr(x.get(k)) for x in same}) > 1)
            differ = ", ".join(f"{k}={r['student_settings'].get(k)}" for k in keys)
            lines.append(f"student {r['student_name']}#{r['student_id']}: {_size(r['student_layers'])} layers, "
                         f"hidden {_size(r['student_hidden'])}" + (f", {differ}" if differ else ""))
    return lines


def _size(value: Any) -> str:
    number = as_float(value)
    return "?" if math.isnan(number) else str(int(number))


# ----------------------------------------------------------------------------- loading


def load_store(results_dir: str | Path, which: str = "best") -> Store:
    """Read every `**/result.json` under results_dir; unreadable files and incomplete "completed"
    records are left out and listed in `Store.skipped` (never raised: a sweep may be writing while
    we read)."""
    if which not in WHICH_CHOICES:
        raise ValueError(f"which must be one of {WHICH_CHOICES}, got {which!r}")
    rows: list[dict[str, Any]] = []
    curves: list[dict[str, Any]] = []
    exits: list[dict[str, Any]] = []
    skipped: list[str] = []
    for path in sorted(Path(results_dir).glob("**/result.json")):
        try:
            raw = load_json(path)
            # judged as stored: the sweeper's rule, on the same input
            why = incomplete_reason(raw) if isinstance(raw, dict) and raw.get("status") == "completed" else None
            if why is not None:
                skipped.append(f"{path}: status completed but incomplete ({why}); the sweeper runs it again")
                continue
            rec = Record.from_dict(raw)
            if rec.tune_trial is not None:
                continue  # a tuning trial (sweep/tune.py): scored on a holdout of the training split, not a result
            row = _row(path, rec, which)
            done = (_curve(row, rec), _early_exit(row, rec)) if rec.status == "completed" else ([], [])
        except RecordError as exc:
            skipped.append(f"{path}: {exc}")
            continue
        except (TypeError, ValueError, OverflowError, AttributeError, KeyError) as exc:
            # a field Record.from_dict does not check, damaged: this record left out, named, not the report
            skipped.append(f"{path}: cannot be read as a record ({type(exc).__name__}: {exc})")
            continue
        rows.append(row)
        curves.extend(done[0])
        exits.extend(done[1])
    records = pd.DataFrame(rows)
    for col in RECORD_COLUMNS:
        if col not in records.columns:
            records[col] = pd.Series(dtype=object)
    records["system"] = system_labels(records) if not records.empty else records["system"]
    dev_cols = sorted(c for c in records.columns if c.startswith("dev."))
    records = records[[*RECORD_COLUMNS, *dev_cols]]
    curve_frame = pd.DataFrame(curves, columns=list(CURVE_COLUMNS))
    exit_frame = pd.DataFrame(exits, columns=list(EARLY_EXIT_COLUMNS))
    system_of = dict(zip(records["path"], records["system"], strict=True))
    for frame in (curve_frame, exit_frame):
        if not frame.empty:
            frame["system"] = frame["path"].map(system_of)
    return Store(records=records, curves=curve_frame, skipped=skipped, early_exit=exit_frame)


def load_records(results_dir: str | Path, which: str = "best") -> pd.DataFrame:
    """The records frame of `load_store`; files left out raise a `UserWarning` each."""
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
    counts = pool["init_label"].value_counts()
    tied = [lab for lab in init_order(pool) if counts.get(lab, 0) == counts.iloc[0]]
    label = tied[0]  # a tie goes to the first in the paper's init order, and the note says so
    name = str(pool.loc[pool["init_label"] == label, "init_name"].iloc[0])
    tie = (f" (first in init order of the {len(tied)} with {int(counts.iloc[0])} runs each)" if len(tied) > 1
           else "")
    note = (f"no records with init {init!r}; Table 1 uses the most common init instead: {name} (layers {label})"
            f"{tie}; every init's objectives are compared in 'Table 1 at every init'")
    return records[records["init_label"] == label], note


def one_dev_set(records: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The records less the completed runs scored on another dev set than most completed runs of their task (by
    the records' `dev_hash`; ties: the smallest hash), and one line per run left out naming it and why. Every
    statistic that pools or pairs runs (cells, t-tests, multi-bootstrap, curves) reads the records after this,
    so none pools two dev sets. A record without a hash (written before records kept it) is judged by its
    predictions file's, where that file gives the record's metric back; with neither it cannot be checked: it
    stays, said in one line per task."""
    if records.empty:
        return records, []
    done = records[(records["status"] == "completed")]
    done = done.assign(dev_hash=[h if isinstance(h, str) and h else _dev_hash_from_predictions(p)
                                 for h, p in zip(done["dev_hash"], done["path"], strict=True)])
    drop, notes = set(), []
    for task, group in done.groupby("task", sort=True):
        hashes = [h for h in group["dev_hash"] if isinstance(h, str) and h]
        counts = pd.Series(hashes, dtype=object).value_counts()
        if counts.empty:
            continue
        most = min(counts.index, key=lambda h: (-int(counts[h]), h))
        for r in group.to_dict("records"):
            h = r["dev_hash"]
            if isinstance(h, str) and h and h != most:
                drop.add(r["path"])
                notes.append(f"left out of every statistic: {task} / {r['system']} / init {r['init_label']} / "
                             f"{r['seed_label']} ({r['path']}): scored on another dev set (content {h[:10]}) than "
                             f"the other {int(counts[most])} run(s) of {task} ({most[:10]})")
        unknown = len(group) - len(hashes)
        if unknown:
            notes.append(f"{unknown} completed {task} run(s) name no dev set (written before records kept its "
                         "hash): pooled unchecked with the others")
    return records[~records["path"].isin(drop)], notes


def _dev_hash_from_predictions(path: str) -> str | None:
    """For a record that names no dev set (written before records kept it): the dev hash of its predictions file,
    when that file gives the record's own metric back (so it was made with the record's run); else None."""
    try:
        got = read_predictions(Path(path).parent)
        if got is None:
            return None
        rec = Record.from_dict(load_json(Path(path)))
    except (PredictionsError, RecordError):
        return None
    if prediction_checks.metric_reason(got, rec) is not None:
        return None
    return got.dev_hash.get(prediction_checks.scored_split(got) or "")


def scores(records: pd.DataFrame, mode: str = "header") -> tuple[pd.DataFrame, list[str]]:
    """Long frame of per-run scores (percent) of completed records, one metric per task column.

    Returns (frame, notes). Columns: SCORE_KEYS + seeds, metric, value. Several completed runs of one
    (task, system, init, seed, seeds) (different config hashes) keep the newest (by finished_at), with a note;
    runs of one master seed whose seed per source differs (`seeds`) are different runs, all kept.
    """
    notes: list[str] = []
    cols = [*SCORE_KEYS, "seeds", "metric", "value"]  # seeds: one master seed's runs that vary another source
    done = records[records["status"] == "completed"] if not records.empty else records
    if done.empty:
        return pd.DataFrame(columns=cols), notes
    done = done.sort_values("finished_at", na_position="first", key=lambda s: s.astype(str))
    dup = done.duplicated(["task", *SYSTEM_KEY, "init_label", "seed", "seeds"], keep="last")
    if dup.any():
        notes.append(
            f"{int(dup.sum())} duplicate completed run(s) of the same task/system/init/seeds "
            "(different config hash); kept the newest"
        )
    done = done[~dup]
    out = []
    for rowd in done.to_dict("records"):
        metric = column_metric(rowd["task"], mode, rowd["primary_metric"])
        value = rowd.get(f"dev.{metric}", math.nan)  # absent column -> NaN
        out.append({**{k: rowd[k] for k in SCORE_KEYS}, "seeds": rowd["seeds"], "metric": metric, "value": 100.0 * as_float(value)})
    frame = pd.DataFrame(out, columns=cols)
    lacking = frame[frame["value"].isna()]
    if not lacking.empty:
        for (task, metric), grp in lacking.groupby(["task", "metric"]):
            notes.append(f"{len(grp)} completed {task} run(s) lack dev metric {metric!r}; left out")
    return frame.dropna(subset=["value"]).reset_index(drop=True), notes
