"""The spread of a score measured with evaluation-sampling seeds nested within trained models (training seeds): how
much comes from training another model and how much from sampling the same model's responses again.

y_ij is model i's score (i = 1..n, one per training seed) under sampling seed j (j = 1..k_i); the model's score is
its mean ybar_i over its seeds, the setting's the mean of those, ybar. The one-way random-effects model with
seeds nested in models, y_ij = mu + a_i + e_ij, a_i ~ (0, var_T), e_ij ~ (0, var_S), is estimated by the ANOVA
(method of moments) estimator:

    s_T^2 = sum_i (ybar_i - ybar)^2 / (n - 1)                    sd over training seeds of the per-model means
    s_S^2 = sum_i sum_j (y_ij - ybar_i)^2 / sum_i (k_i - 1)      sd over sampling seeds within a model, pooled
    var_S = s_S^2
    var_T = max(0, s_T^2 - s_S^2 * mean_i(1 / k_i))              E[s_T^2] = var_T + var_S * mean_i(1 / k_i)
    training share = var_T / (var_T + var_S)

(a model's mean over k_i seeds still carries var_S / k_i of sampling noise, which s_T^2 holds and var_T does not).
Balanced (every k_i = k): the classical nested ANOVA, var_T = (MS_between - MS_within) / k. An estimate with no
degrees of freedom (one model; one seed per model) is NaN; a var_T the subtraction puts below 0 is 0 (`clipped`).
docs/methods/decoder.md ("Evaluation-sampling seeds"); tests/unit/analysis/test_nested_spread.py works an example.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def nested_spread(values: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The estimates above for `values`, one sequence of per-seed scores per model: mean, sd_training, sd_sampling,
    var_training, var_sampling, training_share, n (models), k (seeds per model, a list) and clipped."""
    rows = [np.asarray(v, dtype=np.float64) for v in values if len(v)]
    if not rows:
        raise ValueError("no scores")
    means = np.array([r.mean() for r in rows])
    k = [len(r) for r in rows]
    n = len(rows)
    s_t2 = float(means.var(ddof=1)) if n > 1 else math.nan
    within_df = sum(x - 1 for x in k)
    s_s2 = float(sum(((r - r.mean()) ** 2).sum() for r in rows) / within_df) if within_df else math.nan
    raw = s_t2 - s_s2 * float(np.mean([1 / x for x in k]))
    var_t = max(0.0, raw) if not math.isnan(raw) else math.nan
    total = var_t + s_s2
    share = var_t / total if total > 0 else math.nan
    return {"mean": float(means.mean()), "sd_training": math.sqrt(s_t2) if n > 1 else math.nan,
            "sd_sampling": math.sqrt(s_s2) if within_df else math.nan, "var_training": var_t, "var_sampling": s_s2,
            "training_share": share, "n": n, "k": k, "clipped": bool(raw < 0)}
