"""Whether a run's stored dev predictions (records/predictions.py) can stand for its record, before the report
compares runs example by example: one home for the rules.

- **Its own dev set**: the file's content hash of the scored dev split must be the record's (`data.dev_hash`;
  records written before they kept one are checked by the metric alone, and by `majority_dev` among the runs
  compared together).
- **Its own numbers**: the record's dev metric recomputed from the stored predictions and labels (a classifier's
  primary metric at the file's epoch; a decoder's perplexity and token accuracy at its final epoch) must match
  the record's to within rounding (`TOLERANCE`). Edited or swapped predictions otherwise give a per-example
  difference the records do not (the review's -12.7 points at p = 5e-43 where the records give -1.07).

Each check returns None when the predictions can be used, else the reason in a few words; the report names the
run and leaves it out of the per-example comparisons.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from distill_sweep.analysis import example_stats
from distill_sweep.records.predictions import DevPredictions
from distill_sweep.records.record import Record

TOLERANCE = 1e-3  # fractions: a metric recomputed from the predictions vs the record's (beyond float rounding)
RELATIVE_TOLERANCE = 1e-3  # perplexity (not a fraction): relative


def scored_split(got: DevPredictions) -> str | None:
    """The split the record's unsuffixed metrics score: the file's first (the dev loaders' order)."""
    return next(iter(got.preds), None) or next(iter(got.sequences), None)


def short(digest: str | None) -> str:
    return (digest or "none")[:10]


def dev_set_reason(got: DevPredictions, record: Record) -> str | None:
    """Why `got` was not made on `record`'s dev set (None: it was, or the record keeps no hash to tell)."""
    split = scored_split(got)
    want = (record.data.dev_hash or {}).get(split or "")
    if split is None or want is None:
        return None
    have = got.dev_hash.get(split)
    if have != want:
        return (f"its predictions were made on another dev set than its record's ({split} content "
                f"{short(have)} vs {short(want)})")
    return None


def _epoch_dev(record: Record, stage: str, epoch: int) -> dict[str, Any] | None:
    for entry in record.epochs:
        if str(entry.get("stage")) == stage and entry.get("epoch") == epoch and isinstance(entry.get("dev"), dict):
            return entry["dev"]
    return None


def metric_reason(got: DevPredictions, record: Record) -> str | None:
    """Why `got` does not give `record`'s dev metric back (None: it does, or there is nothing to recompute)."""
    split = scored_split(got)
    if split is None:
        return None
    if split in got.sequences:  # a decoder: its final epoch's (the file's) perplexity and token accuracy
        dev = (record.final or {}).get("dev") or {}
        q = got.sequences[split]
        for metric, value in (("token_accuracy", q.token_accuracy()), ("perplexity", q.perplexity())):
            stated = dev.get(metric)
            if isinstance(stated, (int, float)) and math.isfinite(stated):
                tol = TOLERANCE if metric == "token_accuracy" else RELATIVE_TOLERANCE * max(1.0, abs(stated))
                if abs(value - stated) > tol:
                    return f"its predictions give {metric} {value:.4f} where its record says {stated:.4f}"
        return None
    metric = record.primary_metric or "accuracy"
    dev = _epoch_dev(record, got.stage, got.epoch)
    stated = (dev or {}).get(metric)
    if not example_stats.supported(metric) or not isinstance(stated, (int, float)) or not math.isfinite(stated):
        return None
    preds, labels = got.preds[split], got.labels[split]
    value = float(example_stats.weighted_metric(metric, preds, labels, np.ones((1, len(labels))))[0])
    if abs(value - stated) > TOLERANCE:
        return (f"its predictions give {metric} {value:.4f} where its record says {stated:.4f} "
                f"({got.stage} epoch {got.epoch})")
    return None


def reason(got: DevPredictions, record: Record) -> str | None:
    """The first reason `got` cannot stand for `record` (its own dev set, then its own numbers), None if none."""
    return dev_set_reason(got, record) or metric_reason(got, record)


def majority_dev(hashes: Iterable[str | None]) -> str | None:
    """The dev content most of the runs were scored on (ties: the smallest hash, so the choice is stable); None
    when no run names one."""
    counts = Counter(h for h in hashes if h)
    if not counts:
        return None
    return min(counts, key=lambda h: (-counts[h], h))
