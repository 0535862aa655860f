"""A results directory as two tidy tables, for pandas, polars or any Parquet reader.

- `runs`: one row per job (every readable record, whatever its status): its directory under the results
  directory (`job`), then the record flat, each nested key by its dotted name (records/flat.py): `status`,
  `config_hash`, `seeds.<source>` (every source, also for records from before the `seeds` block), `pack`,
  `tune_trial.*`, `tuned.*` and `cost.*`, `best.dev.<metric>` and `final.dev.<metric>`, `wall_time_s`, `peak_memory_mb`,
  `git_commit`, `versions.<package>`, and `config.<key>` for every key of the job's config (`config.optimizer.lr`).
  Two columns are the report's: `system` and `init_label`, the row and the init a job is in the
  report's tables (analysis/frames.py; empty for a tuning trial, which the report leaves out). The epochs are
  the `metrics` table's; a failed job's traceback stays in its record.
- `metrics`: one row per job x epoch x metric: `job`, `config_hash`, `stage`, `epoch` (in its stage),
  `global_epoch` (1-based, over the job's stages), `step` (the job's training steps at the epoch's end),
  `metric` (`dev.accuracy`, `train_loss`, `loss_<term>`, `padding`, ...) and `value`.

A record that cannot be read, or that says completed and is not (`records.record.incomplete_reason`, the
sweeper's and the report's rule), is left out of both and named in `left_out` with the reason.
A column holds one type: a value of a column whose values differ in type (or a list, or a mapping) is its JSON
text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from distill_sweep.analysis.frames import load_store
from distill_sweep.records.flat import flatten, seed_sources
from distill_sweep.records.record import Record, RecordError, incomplete_reason, load_json

METRIC_COLUMNS = ("job", "config_hash", "stage", "epoch", "global_epoch", "step", "metric", "value")
EPOCH_KEYS = ("stage", "epoch", "step")  # an epoch entry's coordinates; its other numbers are metrics


@dataclass
class Export:
    runs: pa.Table
    metrics: pa.Table
    left_out: list[str] = field(default_factory=list)  # "<path>: <why>", one per record left out


def read(results_dir: Path) -> Export:
    """Every `**/result.json` under `results_dir` as the two tables (see the module's docstring)."""
    runs: list[dict[str, Any]] = []
    metrics: list[dict[str, Any]] = []
    left_out: list[str] = []
    for path in sorted(results_dir.glob("**/result.json")):
        try:
            raw = load_json(path)
            why = incomplete_reason(raw) if isinstance(raw, dict) and raw.get("status") == "completed" else None
            if why is not None:
                raise RecordError(f"status completed but incomplete ({why})")
            record = Record.from_dict(raw)
            job = path.parent.relative_to(results_dir).as_posix()
            rows = metric_rows(job, record)
        except RecordError as err:
            left_out.append(f"{path}: {err}")
            continue
        runs.append(run_row(job, record))
        metrics.extend(rows)
    try:  # the report's rows, by the path of each record it reads
        report = load_store(results_dir).records
        where = {Path(p).parent.relative_to(results_dir).as_posix(): (s, i) for p, s, i in
                 zip(report["path"], report["system"], report["init_label"], strict=True)}
    except Exception as err:  # its reader's trouble with a record costs these two columns, not the export
        left_out.append(f"{results_dir}: the report's rows (columns system, init_label) could not be read: "
                        f"{type(err).__name__}: {err}")
        where = {}
    for row in runs:
        row["system"], row["init_label"] = where.get(row["job"], (None, None))
    return Export(runs=table(runs), metrics=table(metrics, METRIC_COLUMNS), left_out=left_out)


def run_row(job: str, record: Record) -> dict[str, Any]:
    """One job's row of `runs`: the record flat, less its epochs (the `metrics` table) and traceback."""
    whole = record.to_dict()
    for key in ("epochs", "traceback"):
        whole.pop(key, None)
    row = {"job": job, **{k: v for k, v in flatten(whole).items() if k != "job"}}  # (an unknown key "job")
    row.update({f"seeds.{source}": seed for source, seed in seed_sources(record).items()})
    return row


def metric_rows(job: str, record: Record) -> list[dict[str, Any]]:
    """One job's rows of `metrics`: every number of every epoch entry but its coordinates."""
    rows = []
    for i, entry in enumerate(record.epochs, 1):
        for key in ("epoch", "step"):  # the table's integer coordinates: anything else is damage
            value = entry.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise RecordError(f"epochs[{i - 1}].{key} {value!r} is not an integer")
        at = {"job": job, "config_hash": record.config_hash, "stage": str(entry.get("stage", "")),
              "epoch": entry.get("epoch"), "global_epoch": i, "step": entry.get("step")}
        values = flatten({k: v for k, v in entry.items() if k not in EPOCH_KEYS})
        rows += [{**at, "metric": key, "value": float(value)} for key, value in values.items() if _number(value)]
    return rows


def table(rows: list[dict[str, Any]], columns: tuple[str, ...] = ()) -> pa.Table:
    """The rows as a table: `columns` first, then every other key in the order first seen; one type a column."""
    names = list(columns)
    seen = set(names)
    for row in rows:
        for key in row:
            if key not in seen:
                seen.add(key)
                names.append(key)
    return pa.table({name: _column([row.get(name) for row in rows]) for name in names})


def _column(values: list[Any]) -> pa.Array:
    values = [_json(v) if isinstance(v, (list, dict)) else v for v in values]
    kinds = {type(v) for v in values if v is not None}
    if kinds == {int, float}:  # (an integer written where others wrote a float: the float column)
        values = [float(v) if v is not None else None for v in values]
    elif len(kinds) > 1:  # e.g. an init given as 1 in one config and "[1,2,3]" in another: one text column
        values = [v if isinstance(v, str) or v is None else _json(v) for v in values]
    try:
        return pa.array(values)
    except (pa.ArrowException, OverflowError):  # e.g. an integer past int64: the column as text
        return pa.array([v if isinstance(v, str) or v is None else _json(v) for v in values])


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
