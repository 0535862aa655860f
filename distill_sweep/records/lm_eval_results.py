"""A decoder record's lm-eval per-example results, beside result.json as one array file (`lm_eval_samples.npz`).

Per task: the evaluated documents' ids (`doc_id/<task>`) and each per-example metric's values in that order
(`<metric>/<task>`, float64: ROUGE-L, exact match, acc, ...), so the record's scores (their means) can be resampled
over examples. Its `meta` entry (JSON) names, per task, the sha256 of the documents evaluated (`docs_hash`: the task
data's content, so results on other data are told apart) and each array's sha256, checked on every read. No pickle.
The record's own `lm_eval` block holds the scores; a record without this file has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from distill_sweep.records.predictions import PredictionsError, read_checked_npz, write_checked_npz

SAMPLES = "lm_eval_samples.npz"
VERSION = 1


@dataclass
class TaskSamples:
    docs_hash: str
    doc_id: np.ndarray
    metrics: dict[str, np.ndarray]  # metric -> per-example values, in doc_id order


def write_samples(directory: Path, tasks: dict[str, TaskSamples]) -> Path:
    """Write `directory/lm_eval_samples.npz` atomically (a temporary file renamed into place)."""
    arrays: dict[str, np.ndarray] = {}
    for task, got in tasks.items():
        arrays[f"doc_id/{task}"] = np.asarray(got.doc_id, dtype=np.int64)
        for metric, values in got.metrics.items():
            arrays[f"{metric}/{task}"] = np.asarray(values, dtype=np.float64)
    meta = {"version": VERSION, "tasks": {t: {"docs_hash": s.docs_hash, "metrics": sorted(s.metrics)}
                                          for t, s in tasks.items()}}
    return write_checked_npz(directory / SAMPLES, arrays, meta)


def _check_meta(meta: Any) -> None:
    if meta.get("version") != VERSION or not isinstance(meta.get("sha256"), dict):
        raise PredictionsError(f"meta of another layout (version {meta.get('version')!r})")


def read_samples(directory: Path) -> dict[str, TaskSamples] | None:
    """The per-example results beside a record, None when there are none; PredictionsError (one line: the file and
    why) when the file cannot be trusted: unreadable or cut short, another layout, or a checksum that does not
    match."""
    path = directory / SAMPLES
    if not path.is_file():
        return None
    meta, arrays = read_checked_npz(path, _check_meta)
    try:
        out = {task: TaskSamples(str(info["docs_hash"]), arrays[f"doc_id/{task}"],
                                 {m: arrays[f"{m}/{task}"] for m in info["metrics"]})
               for task, info in meta["tasks"].items()}
    except (KeyError, TypeError, AttributeError) as exc:  # a meta naming arrays the file does not hold
        raise PredictionsError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    for task, got in out.items():
        if any(v.shape != got.doc_id.shape for v in got.metrics.values()):
            raise PredictionsError(f"{path}: task {task}'s arrays differ in length")
    return out
