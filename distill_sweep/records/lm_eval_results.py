"""A decoder record's lm-eval per-example results, beside result.json as one array file (`lm_eval_samples.npz`).

Per task: the evaluated documents' ids (`doc_id/<task>`) and each per-example metric's values in that order
(`<metric>/<task>`, float64: ROUGE-L, exact match, acc, ...), so the record's scores (their means) can be resampled
over examples. A task sampled with evaluation seeds (procedure.lm_eval.sampling_seeds) holds each metric as one row per
seed (seeds x documents, the seeds in `meta`), in a file of version 2 (a file without one stays version 1, as
before the seeds). Its `meta` entry (JSON) names, per task, the sha256 of the documents evaluated (`docs_hash`: the task
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
SAMPLED_VERSION = 2  # a file with a task sampled with evaluation seeds: its arrays are seeds x documents


@dataclass
class TaskSamples:
    docs_hash: str
    doc_id: np.ndarray
    metrics: dict[str, np.ndarray]  # metric -> per-example values, in doc_id order (seeds x documents with seeds)
    seeds: list[int] | None = None  # the evaluation-sampling seeds, one row each; None: one (greedy) evaluation

    def per_document(self, metric: str) -> np.ndarray:
        """The metric per document: with sampling seeds the mean over them (the model's expected score there)."""
        values = self.metrics[metric]
        return values.mean(axis=0) if self.seeds is not None else values


def write_samples(directory: Path, tasks: dict[str, TaskSamples]) -> Path:
    """Write `directory/lm_eval_samples.npz` atomically (a temporary file renamed into place)."""
    arrays: dict[str, np.ndarray] = {}
    for task, got in tasks.items():
        arrays[f"doc_id/{task}"] = np.asarray(got.doc_id, dtype=np.int64)
        for metric, values in got.metrics.items():
            arrays[f"{metric}/{task}"] = np.asarray(values, dtype=np.float64)
    info = {t: {"docs_hash": s.docs_hash, "metrics": sorted(s.metrics),
                **({"sampling_seeds": list(s.seeds)} if s.seeds is not None else {})} for t, s in tasks.items()}
    sampled = any(s.seeds is not None for s in tasks.values())
    meta = {"version": SAMPLED_VERSION if sampled else VERSION, "tasks": info}
    return write_checked_npz(directory / SAMPLES, arrays, meta)


def _check_meta(meta: Any) -> None:
    if meta.get("version") not in (VERSION, SAMPLED_VERSION) or not isinstance(meta.get("sha256"), dict):
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
                                 {m: arrays[f"{m}/{task}"] for m in info["metrics"]},
                                 [int(x) for x in info["sampling_seeds"]] if "sampling_seeds" in info else None)
               for task, info in meta["tasks"].items()}
    except (KeyError, TypeError, AttributeError) as exc:  # a meta naming arrays the file does not hold
        raise PredictionsError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    for task, got in out.items():
        shape = got.doc_id.shape if got.seeds is None else (len(got.seeds), *got.doc_id.shape)
        if any(v.shape != shape for v in got.metrics.values()):
            raise PredictionsError(f"{path}: task {task}'s arrays differ in length")
    return out
