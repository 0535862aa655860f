"""Keeps the student's per-example dev predictions while the stage driver evaluates, so the record can carry
the best epoch's (records/predictions.py writes and reads the file).

`DevPredictionCapture.evaluate` is the driver's `evaluate_fn`: the same dev metrics as `loop.evaluate`, plus each
example's prediction in its split's row order (the dev loaders sort by length; the batches' `idx` puts them
back). Every epoch's predictions go to `dev_predictions.partial/<epoch index>.npz` in the job's directory, so
a job resumed after preemption still has the epochs evaluated before it; `finish` keeps the best epoch's as
`dev_predictions.npz` and removes the rest.

`SequenceCapture` does the same for a decoder student (procedure=causal_lm): the decoder evaluator hands it each
dev sequence's summed target NLL, target count and right argmaxes (`keep`), and it keeps the final epoch's,
because the decoder table reports the final epoch.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from distill_sweep.data.fingerprints import content_hash
from distill_sweep.records.predictions import SEQUENCE_FIELDS, SequenceSummary, write_predictions
from distill_sweep.training.distributed import is_main
from distill_sweep.training.loop import predict_rows

PARTIAL = "dev_predictions.partial"
HASHED_COLUMNS = ("input_ids", "token_type_ids", "labels", "idx")  # what makes two dev splits the same


def dev_hashes(dev: dict[str, Any]) -> dict[str, str]:
    """Each tokenised dev split's content hash (its token ids, labels and row indices)."""
    return {split: content_hash(ds, [c for c in HASHED_COLUMNS if c in ds.column_names]) for split, ds in dev.items()}


def prediction_of(logits: np.ndarray, regression: bool) -> np.ndarray:
    """What the metrics score: the class id (argmax, compact int16) or the regression output (float32)."""
    if regression:
        return logits.reshape(len(logits), -1)[:, 0].astype(np.float32)
    return logits.argmax(axis=-1).astype(np.int16)


class DevPredictionCapture:
    """The driver's evaluate function that also keeps every epoch's predictions (see the module's doc)."""

    def __init__(self, out_dir: Path, dev: dict[str, Any], history: list[dict[str, Any]], regression: bool,
                 hashes: dict[str, str] | None = None) -> None:
        self.out_dir, self.dev, self.history, self.regression = out_dir, dev, history, regression
        self.partial = out_dir / PARTIAL
        self._hashes: dict[str, str] | None = hashes  # dev_hashes(dev), when the caller has them (the record's)
        self.last: dict[str, np.ndarray] = {}  # the last evaluation's predictions and labels (a pruned trial's test)

    def evaluate(self, model: nn.Module, dev_loaders: dict[str, Any],
                 metric_fn: Callable[[np.ndarray, np.ndarray], dict[str, float]], device: torch.device,
                 precision: str) -> dict[str, float]:
        metrics: dict[str, float] = {}
        arrays: dict[str, np.ndarray] = {}
        for i, (split, loader) in enumerate(dev_loaders.items()):
            logits, labels, rows = predict_rows(model, loader, device, precision)
            # the same keys as loop.evaluate: the first split plain, MNLI mismatched `_mm`, others `_<split>`
            suffix = "" if i == 0 else ("_mm" if split.endswith("mismatched") else f"_{split}")
            metrics.update({f"{k}{suffix}": float(v) for k, v in metric_fn(logits, labels).items()})
            assert rows is not None, "task dev batches carry their row index (idx)"
            order = np.argsort(rows, kind="stable")
            arrays[f"pred/{split}"] = prediction_of(logits, self.regression)[order]
            arrays[f"label/{split}"] = labels[order]
        if is_main():
            self.partial.mkdir(parents=True, exist_ok=True)
            np.savez(self.partial / f"{len(self.history)}.npz", **arrays)  # this epoch's index in the history
        self.last = arrays
        return metrics

    def finish(self, index: int, best: dict[str, Any]) -> Path | None:
        """Keep the predictions of history entry `index` (the best epoch) as the record's file; None when that
        epoch's were not kept (evaluated by a version before this one, then resumed)."""
        if not is_main():
            return None
        path = self.partial / f"{index}.npz"
        written = None
        if path.is_file():
            if self._hashes is None:
                self._hashes = dev_hashes(self.dev)
            with np.load(path, allow_pickle=False) as data:
                splits = [n.split("/", 1)[1] for n in data.files if n.startswith("pred/")]
                written = write_predictions(self.out_dir, {s: data[f"pred/{s}"] for s in splits},
                                            {s: data[f"label/{s}"] for s in splits}, self._hashes,
                                            str(best["stage"]), int(best["epoch"]))
        shutil.rmtree(self.partial, ignore_errors=True)
        return written


def sequences_hash(*arrays: np.ndarray) -> str:
    """The content hash of a decoder's dev sequences (its token ids, lengths, first targets, choices)."""
    h = hashlib.sha256()
    for array in arrays:
        a = np.ascontiguousarray(array, dtype=np.int64)
        h.update(f"\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def dev_sequences_hash(dev: Any) -> str:
    """`sequences_hash` of a decoder's dev `Sequences`: what its record's `data.dev_hash` and its file hold."""
    return sequences_hash(dev.ids, dev.lengths, dev.first_target, dev.choice)


class SequenceCapture(DevPredictionCapture):
    """A decoder student's per-sequence dev summaries (records/predictions.py's SequenceSummary) per epoch; the
    record's file gets the final epoch's. `dev_hash` names the dev sequences' content (`sequences_hash`)."""

    SPLIT = "validation"  # the decoder's one dev split

    def __init__(self, out_dir: Path, dev_hash: str, history: list[dict[str, Any]]) -> None:
        super().__init__(out_dir, {}, history, regression=False)
        self._hashes = {self.SPLIT: dev_hash}

    def keep(self, arrays: dict[str, np.ndarray]) -> None:
        """The evaluator's sink: this evaluation's arrays (`nll`, `targets`, `correct`) as this epoch's."""
        if is_main():
            self.partial.mkdir(parents=True, exist_ok=True)
            np.savez(self.partial / f"{len(self.history)}.npz", **{k: arrays[k] for k in SEQUENCE_FIELDS})

    def finish(self, index: int, best: dict[str, Any]) -> Path | None:
        """Keep the final epoch's summaries (the decoder table's epoch; `index`, the best one, is not used)."""
        if not is_main():
            return None
        last = len(self.history) - 1
        path, written = self.partial / f"{last}.npz", None
        if path.is_file():
            with np.load(path, allow_pickle=False) as data:
                summary = SequenceSummary(*(data[f] for f in SEQUENCE_FIELDS))
            assert self._hashes is not None
            final = self.history[last]
            written = write_predictions(self.out_dir, {}, {}, self._hashes, str(final["stage"]), int(final["epoch"]),
                                        sequences={self.SPLIT: summary})
        shutil.rmtree(self.partial, ignore_errors=True)
        return written
