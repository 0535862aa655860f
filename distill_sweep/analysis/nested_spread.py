"""The spread of a score measured with evaluation-sampling seeds on several trained models (training seeds): how
much comes from training another model and how much from sampling the same model's responses again.

y_ij is model i's score (i = 1..n, one per training seed) under sampling seed j (j = 1..k_i); the model's score is
its mean ybar_i over its seeds, the setting's the mean of those, ybar. Random effects: y_ij = mu + a_i + e_ij,
a_i ~ (0, var_T) the model, e_ij ~ (0, var_S) the sample. The ANOVA (method of moments) estimates:

    s_T^2 = sum_i (ybar_i - ybar)^2 / (n - 1)                    sd over training seeds of the per-model means
    s_S^2 = sum_i sum_j (y_ij - ybar_i)^2 / sum_i (k_i - 1)      sd over sampling seeds within a model, pooled
    var_S = s_S^2
    training share = var_T / (var_T + var_S)

and var_T by the design:
- nested (the models drew with different seeds, or different numbers of them): the e_ij are independent, and a
  model's mean over k_i seeds still carries var_S / k_i of sampling noise, which s_T^2 holds:
      var_T = max(0, s_T^2 - s_S^2 * mean_i(1 / k_i))            E[s_T^2] = var_T + var_S * mean_i(1 / k_i)
- crossed (every model drew with the same k seeds, the usual case: the seeds are a key of the setting): seed j's
  random numbers are common to the models, so e_ij = b_j + c_ij, and the shared part b_j is in every model's mean
  alike and leaves s_T^2; only the model-by-seed part c_ij does, estimated by the two-way residual mean square
      MS_I = sum_i sum_j (y_ij - ybar_i - ybar_.j + ybar)^2 / ((n - 1)(k - 1))    (ybar_.j: seed j's mean over models)
      var_T = max(0, s_T^2 - MS_I / k)                           E[s_T^2] = var_T + var_c / k
  (the nested formula would subtract the shared part too, and put var_T too low: at 0 in the toy demo.)
An estimate with no degrees of freedom (one model; one seed per model) is NaN; a var_T the subtraction puts below 0
is 0 (`clipped`). docs/methods/decoder.md ("Evaluation-sampling seeds"); tests/unit/analysis/test_nested_spread.py
works both designs by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def nested_spread(values: Sequence[Sequence[float]], seeds: Sequence[Sequence[int]] | None = None) -> dict[str, Any]:
    """The estimates above for `values`, one sequence of per-seed scores per model (`seeds`: each model's sampling
    seeds, in the same order; the same list for every model makes the design crossed): mean, sd_training,
    sd_sampling, var_training, var_sampling, training_share, n (models), k (seeds per model, a list), design
    (crossed | nested) and clipped."""
    rows = [np.asarray(v, dtype=np.float64) for v in values if len(v)]
    if not rows:
        raise ValueError("no scores")
    means = np.array([r.mean() for r in rows])
    k = [len(r) for r in rows]
    n = len(rows)
    s_t2 = float(means.var(ddof=1)) if n > 1 else math.nan
    within_df = sum(x - 1 for x in k)
    s_s2 = float(sum(((r - r.mean()) ** 2).sum() for r in rows) / within_df) if within_df else math.nan
    crossed = (seeds is not None and n > 1 and k[0] > 1 and len(seeds) == n
               and all(list(s) == list(seeds[0]) and len(s) == k[0] for s in seeds))
    if crossed:
        y = np.stack(rows)
        resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
        raw = s_t2 - float((resid ** 2).sum() / ((n - 1) * (k[0] - 1))) / k[0]
    else:
        raw = s_t2 - s_s2 * float(np.mean([1 / x for x in k]))
    var_t = max(0.0, raw) if not math.isnan(raw) else math.nan
    total = var_t + s_s2
    share = var_t / total if total > 0 else math.nan
    return {"mean": float(means.mean()), "sd_training": math.sqrt(s_t2) if n > 1 else math.nan,
            "sd_sampling": math.sqrt(s_s2) if within_df else math.nan, "var_training": var_t, "var_sampling": s_s2,
            "training_share": share, "n": n, "k": k, "design": "crossed" if crossed else "nested",
            "clipped": bool(raw < 0)}
