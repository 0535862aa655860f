"""A record's per-example dev predictions: the best epoch's prediction for every dev example, beside
result.json as one array file (`dev_predictions.npz`).

Per dev split it holds the prediction (class id, or the regression value) and the label, both in the split's
row order (`idx`). Its `meta` entry (JSON) names the epoch, the dev splits' content hashes (so predictions
made on another dev set are told apart) and each array's sha256, checked on every read. No pickle: plain
numeric arrays and one string. The record itself and its hash are untouched: a record without the file
(written before it existed) is reported from its scores alone.

A decoder student (procedure=causal_lm) has no class per example: its file holds, per dev sequence, the
summary its metrics are sums of (`SequenceSummary`: summed target negative log-likelihood, number of targets,
number of targets whose argmax is right), so token accuracy, NLL and perplexity follow for any subset or
resample of the sequences. Same file, same checks.
"""

from __future__ import annotations

import hashlib
import json
import math
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from distill_sweep.records.disk import atomic_file

PREDICTIONS = "dev_predictions.npz"
VERSION = 1


class PredictionsError(ValueError):
    """A predictions file that cannot be trusted (damaged, or not ours): the report names it and goes on."""


SEQUENCE_FIELDS = ("nll", "targets", "correct")  # a decoder's per-sequence arrays (SequenceSummary)
MAX_MEAN_NLL = 50.0  # perplexity is exp of the mean NLL capped here, as the decoder dev metrics (lm_evaluator)


@dataclass(frozen=True)
class SequenceSummary:
    """Per dev sequence, in row order: what the decoder metrics sum over its targets."""

    nll: np.ndarray  # float64: the summed negative log-likelihood of the sequence's targets
    targets: np.ndarray  # int: how many targets it has
    correct: np.ndarray  # int: how many of them are the argmax of the next-token distribution

    def token_accuracy(self) -> float:
        return float(self.correct.sum() / max(1, int(self.targets.sum())))

    def perplexity(self) -> float:
        return math.exp(min(float(self.nll.sum()) / max(1, int(self.targets.sum())), MAX_MEAN_NLL))


@dataclass(frozen=True)
class DevPredictions:
    """One run's dev predictions: per split, predictions and labels in row order; the dev hashes they hold for."""

    preds: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    dev_hash: dict[str, str]  # split -> content hash of the tokenised dev split
    stage: str
    epoch: int
    sequences: dict[str, SequenceSummary] = field(default_factory=dict)  # a decoder's, per split

    def same_dev(self, other: DevPredictions, split: str) -> bool:
        """Whether both were made on the same content of `split`."""
        return split in self.dev_hash and self.dev_hash.get(split) == other.dev_hash.get(split)


def digest(array: np.ndarray) -> str:
    """An array's sha256 (its bytes, C order): what a checksummed .npz holds for each array."""
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def write_checked_npz(path: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """`arrays` and `meta` (plus each array's sha256 under "sha256") into `path`, atomically: a temporary file
    renamed into place, so a reader never sees half a file."""
    meta = {**meta, "sha256": {name: digest(a) for name, a in arrays.items()}}
    with atomic_file(path, binary=True) as fh:
        np.savez(fh, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    return path


def write_predictions(directory: Path, preds: dict[str, np.ndarray], labels: dict[str, np.ndarray],
                      dev_hash: dict[str, str], stage: str, epoch: int,
                      sequences: dict[str, SequenceSummary] | None = None) -> Path:
    """Write `directory/dev_predictions.npz` atomically (a temporary file renamed into place); a decoder's
    `sequences` (with no preds or labels) go in as `nll/<split>`, `targets/<split>`, `correct/<split>`."""
    arrays: dict[str, np.ndarray] = {}
    for split, values in preds.items():
        arrays[f"pred/{split}"] = np.asarray(values)
        arrays[f"label/{split}"] = np.asarray(labels[split])
    for split, summary in (sequences or {}).items():
        arrays[f"nll/{split}"] = np.asarray(summary.nll, dtype=np.float64)
        arrays[f"targets/{split}"] = np.asarray(summary.targets, dtype=np.int64)
        arrays[f"correct/{split}"] = np.asarray(summary.correct, dtype=np.int64)
    meta = {"version": VERSION, "stage": stage, "epoch": int(epoch), "dev_hash": dev_hash}
    return write_checked_npz(directory / PREDICTIONS, arrays, meta)


def read_checked_npz(path: Path, check_meta: Callable[[Any], None]) -> tuple[Any, dict[str, np.ndarray]]:
    """The meta and arrays of a file `write_checked_npz` wrote, `check_meta` passed and every checksum matching;
    else PredictionsError (one line naming `path`: unreadable or cut short, another layout, a checksum)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta: Any = json.loads(str(data["meta"]))
            check_meta(meta)
            arrays = {name: data[name] for name in meta["sha256"]}
    except PredictionsError as exc:
        raise PredictionsError(f"{path}: {exc}") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, zipfile.BadZipFile) as exc:
        # a truncated zip (a partial copy) is BadZipFile or EOFError, a missing member KeyError
        raise PredictionsError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    for name, expected in meta["sha256"].items():
        if digest(arrays[name]) != expected:
            raise PredictionsError(f"{path}: {name} does not match its checksum")
    return meta, arrays


def read_predictions(directory: Path) -> DevPredictions | None:
    """The predictions beside a record, None when there are none; PredictionsError (one line: the file and why)
    when the file cannot be trusted: unreadable or cut short (a partial copy), a `meta` of another layout, a
    checksum that does not match, arrays of unequal lengths or a non-finite decoder NLL."""
    path = directory / PREDICTIONS
    if not path.is_file():
        return None
    meta, arrays = read_checked_npz(path, _check_meta)
    splits = [name.split("/", 1)[1] for name in arrays if name.startswith("pred/")]
    lm_splits = [name.split("/", 1)[1] for name in arrays if name.startswith("nll/")]
    try:
        sequences = {s: SequenceSummary(*(arrays[f"{f}/{s}"] for f in SEQUENCE_FIELDS)) for s in lm_splits}
        preds = {s: arrays[f"pred/{s}"] for s in splits}
        labels = {s: arrays[f"label/{s}"] for s in splits}
    except KeyError as exc:
        raise PredictionsError(f"{path}: a split lacks {exc}") from None
    for s in splits:
        if preds[s].ndim != 1 or labels[s].shape != preds[s].shape:
            raise PredictionsError(f"{path}: split {s}'s predictions {preds[s].shape} and labels {labels[s].shape} "
                                   "differ in shape")
        if not (np.issubdtype(preds[s].dtype, np.number) and np.issubdtype(labels[s].dtype, np.number)):
            raise PredictionsError(f"{path}: split {s}'s arrays are not numeric")
    for s, q in sequences.items():
        if any(getattr(q, f).ndim != 1 for f in SEQUENCE_FIELDS) or len({len(getattr(q, f))
                                                                           for f in SEQUENCE_FIELDS}) != 1:
            raise PredictionsError(f"{path}: a decoder split's arrays differ in length")
        if not np.issubdtype(q.nll.dtype, np.number) or not np.all(np.isfinite(q.nll)):
            raise PredictionsError(f"{path}: split {s} has a non-finite per-sequence NLL")
    return DevPredictions(preds=preds, labels=labels, dev_hash=dict(meta["dev_hash"]), stage=str(meta["stage"]),
                          epoch=int(meta["epoch"]), sequences=sequences)


def _check_meta(meta: Any) -> None:
    """`meta` as write_predictions writes it, else PredictionsError saying what is odd."""
    if not isinstance(meta, dict):
        raise PredictionsError(f"meta is a {type(meta).__name__}, not an object")
    if not isinstance(meta.get("sha256"), dict) or not all(isinstance(v, str) for v in meta["sha256"].values()):
        raise PredictionsError("meta.sha256 is not an object of checksums")
    dev_hash = meta.get("dev_hash")
    if not isinstance(dev_hash, dict) or not all(isinstance(v, str) for v in dev_hash.values()):
        raise PredictionsError("meta.dev_hash is not an object of content hashes")
    epoch = meta.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not isinstance(meta.get("stage"), str):
        raise PredictionsError("meta.stage or meta.epoch is missing or of another type")
