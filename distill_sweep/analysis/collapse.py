"""Collapsed runs: the one rule for a run that learned nothing, used by the report's tables and the job's own
log line (docs/guide/report.md, "Collapsed runs").

A run is **collapsed** when either
- its dev predictions are (near) constant: one class for at least `CONSTANT_SHARE` of the dev examples (a
  classifier), or a spread under `FLAT_SPREAD` of the labels' (a regression); or
- its score is at the **majority-class level of the task's dev split**: at most `MARGIN` above the best constant
  predictor's score on the dev labels (accuracy: the largest class's share; F1 of class 1: predicting 1
  everywhere; MCC and Pearson: 0, the chance level).

Distillation does this (the paper's CoLA cells at 69.1±0.00 are the majority class): a seed that collapses pulls
its cell's mean down and its interval wide, so the report flags it and shows the cell without it. Scores and
baselines are fractions, as records hold them.
"""

from __future__ import annotations

import math

import numpy as np

CONSTANT_SHARE = 0.95  # one class predicted for at least this share of the dev examples
FLAT_SPREAD = 0.05  # a regression's prediction std below this fraction of the labels' std
MARGIN = 0.01  # a score at most this much (a fraction: 1 point) above the dev majority-class score
CHANCE_METRICS = ("mcc", "pearson", "spearman")  # a constant predictor scores 0


def majority_score(labels: np.ndarray, metric: str) -> float:
    """The best constant predictor's `metric` on the dev labels (NaN for a metric it does not know)."""
    labels = np.asarray(labels)
    if metric in CHANCE_METRICS:
        return 0.0
    if len(labels) == 0:
        return math.nan
    if metric == "accuracy":
        _, counts = np.unique(labels, return_counts=True)
        return float(counts.max() / len(labels))
    if metric == "f1":  # predicting class 1 everywhere: precision p, recall 1 (predicting 0 gives F1 0)
        p = float(np.mean(labels == 1))
        return 2 * p / (1 + p) if p > 0 else 0.0
    return math.nan


def at_baseline(score: float, baseline: float) -> bool:
    """Whether `score` is at (or below) the majority-class level `baseline` (both fractions)."""
    return math.isfinite(score) and math.isfinite(baseline) and score <= baseline + MARGIN


def constant_reason(preds: np.ndarray, labels: np.ndarray | None = None) -> str | None:
    """Why the dev predictions are near constant (None: they are not)."""
    preds = np.asarray(preds)
    if len(preds) == 0:
        return None
    if np.issubdtype(preds.dtype, np.floating):  # a regression
        spread = float(np.std(labels)) if labels is not None and len(labels) else 1.0
        if float(np.std(preds)) < FLAT_SPREAD * spread:
            return f"near-constant predictions (std {float(np.std(preds)):.3g})"
        return None
    values, counts = np.unique(preds, return_counts=True)
    share = float(counts.max() / len(preds))
    if share >= CONSTANT_SHARE:
        return f"predicts class {values[counts.argmax()]} for {100 * share:.0f}% of the dev examples"
    return None


def reason(score: float, metric: str, baseline: float, preds: np.ndarray | None = None,
           labels: np.ndarray | None = None) -> str | None:
    """Why a run is collapsed (None: it is not): near-constant predictions, or its `metric` `score` at the dev
    majority-class level `baseline` (all fractions)."""
    why = [constant_reason(preds, labels)] if preds is not None else []
    if at_baseline(score, baseline):
        level = "chance" if metric in CHANCE_METRICS else "the dev majority-class"
        where = "below" if score < baseline else "at"
        why.append(f"{metric} {100 * score:.1f} {where} {level} level ({100 * baseline:.1f})")
    why = [w for w in why if w]
    return "; ".join(why) or None
