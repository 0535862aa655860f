"""Dev metrics per task (fractions, as sklearn/scipy return them) and the majority-class baseline."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from distill_sweep.config.schema import TaskSettings
from distill_sweep.errors import ConfigError

_KNOWN = {"accuracy", "f1", "mcc", "pearson", "spearman"}


def _metric_names(task_cfg: TaskSettings) -> list[str]:
    names = task_cfg.metrics
    if not names:  # older configs: derive from the task type
        names = ["pearson", "spearman"] if task_cfg.is_regression else ["accuracy"]
    names = [str(n) for n in names]
    unknown = set(names) - _KNOWN
    if unknown:
        raise ConfigError(f"task {task_cfg.name}: unknown metrics {sorted(unknown)}")
    return names


def _from_predictions(names: Sequence[str], preds: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in names:
        if name == "accuracy":
            out[name] = float(accuracy_score(labels, preds))
        elif name == "f1":
            # Binary F1 of class 1 (MRPC "equivalent", QQP "duplicate"), as GLUE reports it.
            out[name] = float(f1_score(labels, preds, pos_label=1, average="binary", zero_division=0.0))
        elif name == "mcc":
            out[name] = float(matthews_corrcoef(labels, preds))
        elif name in ("pearson", "spearman"):
            # Constant predictions make the correlation undefined; scipy warns and returns nan. Report 0
            # (no linear/rank association) so tables and t-tests don't propagate nan.
            if np.std(preds) == 0 or np.std(labels) == 0:
                out[name] = 0.0
            else:
                fn = pearsonr if name == "pearson" else spearmanr
                out[name] = float(fn(preds, labels)[0])
    return out


def compute_metrics(task_cfg: TaskSettings, logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Metrics listed in ``task.metrics`` from raw logits: argmax for classification, the single output
    for regression (logits of shape (N,1) or (N,))."""
    logits = np.asarray(logits)
    labels = np.asarray(labels)
    if task_cfg.is_regression:
        preds = logits.reshape(len(logits), -1)[:, 0].astype(np.float64)
        labels = labels.astype(np.float64)
    else:
        preds = logits.argmax(axis=-1) if logits.ndim == 2 else logits.astype(np.int64)
        labels = labels.astype(np.int64)
    if len(preds) != len(labels):
        raise ValueError(f"{len(preds)} predictions for {len(labels)} labels")
    return _from_predictions(_metric_names(task_cfg), preds, labels)


def majority_baseline(task_cfg: TaskSettings, dev_labels: Sequence | np.ndarray) -> dict[str, float]:
    """Dev metrics of the best constant predictor on the dev split: its most frequent label (ties: lowest id), or
    its mean for regression. A model at or below this has learned nothing (analysis/collapse.py's rule). The
    training split's majority class scored on dev is no baseline: where the two splits' majorities differ it sits
    below what predicting one class on dev already scores (0.46 where dev's own majority gives 0.54)."""
    dev = np.asarray(dev_labels)
    if task_cfg.is_regression:
        dev = dev.astype(np.float64)
        preds = np.full(len(dev), float(dev.mean()) if len(dev) else 0.0)
    else:
        counts = Counter(int(y) for y in dev)
        top = max(counts.values())
        preds = np.full(len(dev), min(y for y, c in counts.items() if c == top), dtype=np.int64)
        dev = dev.astype(np.int64)
    return _from_predictions(_metric_names(task_cfg), preds, dev)


def primary(task_cfg: TaskSettings, metrics: Mapping[str, float]) -> float:
    """The task's primary metric value (``task.primary_metric``) from a metrics dict."""
    key = str(task_cfg.primary_metric)
    if key not in metrics:
        raise KeyError(f"primary metric {key!r} not in {sorted(metrics)}")
    return float(metrics[key])
