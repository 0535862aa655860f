"""Comparisons that use every dev example, from the records' per-example predictions
(records/predictions.py): the multi-bootstrap over seeds x examples (Sellam et al., ICLR 2022, "The
MultiBERTs"), and at one seed a paired test over examples (McNemar for accuracy, a paired bootstrap for F1,
MCC and correlations).

A bootstrap resample draws the seeds (pairs of runs of A and B with the same seed) and the dev examples with
replacement, the same for A and B; its statistic is mean over the drawn seeds of metric(A) - metric(B) on the
drawn examples. The metrics are computed from example weights (how often each example was drawn), so one
matrix product scores every resample: accuracy, binary F1 (class 1, as GLUE), binary MCC and Pearson's r.
Spearman's rho would need the ranks of every resample: not offered. Metric values are fractions.

Decoder students (procedure=causal_lm) are compared the same way over their dev sequences, from each sequence's
summed target NLL, target count and right argmaxes (records/predictions.py's SequenceSummary): a resample's
perplexity is exp(sum of the drawn sequences' NLL / sum of their targets), as the dev metric over the whole
slice; its token accuracy sum(right) / sum(targets).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

RESAMPLES = 2_000  # bootstrap resamples of seeds x examples
SEED = 0  # the resampling's random seed: the same store gives the same report
METRICS = ("accuracy", "f1", "mcc", "pearson")  # what the weighted metrics below compute
MCNEMAR_EXACT_BELOW = 25  # discordant pairs below this: McNemar's exact binomial test, else chi-square


def weighted_metric(metric: str, pred: np.ndarray, label: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """`metric` of predictions vs labels with each example counted `weights` times; weights [B, N] give B
    values. Equal to the metric on the examples repeated by their weights (sklearn's, scipy's)."""
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    pred, label = np.asarray(pred), np.asarray(label)
    if metric == "accuracy":
        return (w @ (pred == label).astype(np.float64)) / w.sum(axis=1)
    if metric in ("f1", "mcc"):
        p1, l1 = pred == 1, label == 1
        tp, fp = w @ (p1 & l1).astype(np.float64), w @ (p1 & ~l1).astype(np.float64)
        fn, tn = w @ (~p1 & l1).astype(np.float64), w @ (~p1 & ~l1).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            if metric == "f1":  # sklearn's zero_division=0
                return np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
            den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
            return np.where(den > 0, (tp * tn - fp * fn) / den, 0.0)  # sklearn: 0 when undefined
    if metric == "pearson":
        x, y = pred.astype(np.float64), label.astype(np.float64)
        n = w.sum(axis=1)
        mx, my = (w @ x) / n, (w @ y) / n
        cov = (w @ (x * y)) / n - mx * my
        vx, vy = (w @ (x * x)) / n - mx**2, (w @ (y * y)) / n - my**2
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((vx > 0) & (vy > 0), cov / np.sqrt(vx * vy), 0.0)  # metrics.py: 0 when constant
    raise ValueError(f"no per-example statistics for metric {metric!r} (offered: {', '.join(METRICS)})")


def _p_two_sided(diffs: np.ndarray) -> float:
    """Two-sided bootstrap p-value of 'no difference': twice the smaller tail beyond 0 (with the +1 of
    Davison and Hinkley, so never 0)."""
    b = len(diffs)
    low = (np.sum(diffs <= 0.0) + 1) / (b + 1)
    high = (np.sum(diffs >= 0.0) + 1) / (b + 1)
    return float(min(1.0, 2.0 * min(low, high)))


def as_units(preds: np.ndarray | Sequence[np.ndarray], run_ndim: int = 1) -> list[np.ndarray]:
    """Per unit of replication (master seed) its runs as [R, ...]: an array of `run_ndim` + 1 dimensions ([S, N]
    predictions, [S, N, 3] sequence summaries) is one run per unit; a sequence holds each unit's runs (a grid
    crossing another source's seed: analysis/replication.py), or one run, per unit."""
    if isinstance(preds, np.ndarray) and preds.ndim <= run_ndim + 1:
        shaped = preds.reshape((-1, *preds.shape[preds.ndim - run_ndim:])) if preds.ndim else preds.reshape(1, 1)
        return [row[None] for row in shaped]
    return [np.asarray(u).reshape((-1, *np.shape(u)[np.ndim(u) - run_ndim:])) for u in preds]


def unit_metric(metric: str, runs: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The mean over a unit's runs ([R, N]) of each run's `weighted_metric` ([B] values): the unit's score, as
    the seed-level statistics average the runs of one master seed."""
    return np.mean([weighted_metric(metric, r, labels, weights) for r in runs], axis=0)


def multi_bootstrap(preds_a: np.ndarray | Sequence[np.ndarray], preds_b: np.ndarray | Sequence[np.ndarray],
                    labels: np.ndarray, metric: str, confidence: float = 0.95, resamples: int = RESAMPLES,
                    seed: int = SEED) -> dict[str, float]:
    """The paired multi-bootstrap of mean(metric(A) - metric(B)) over seeds x examples. `preds_a`,
    `preds_b`: [S, N], row s of both from the same seed, or per seed its runs' [R, N] (`as_units`: a unit's
    score is the mean of its runs'); `labels`: [N]. Returns diff (on all seeds and examples), ci_low, ci_high
    (percentile interval of the resampled differences) and p (two-sided)."""
    return contrast_bootstrap([(1.0, preds_a), (-1.0, preds_b)], labels, metric, confidence, resamples, seed)


def contrast_bootstrap(arms: Sequence[tuple[float, np.ndarray | Sequence[np.ndarray]]], labels: np.ndarray,
                       metric: str, confidence: float = 0.95, resamples: int = RESAMPLES, seed: int = SEED
                       ) -> dict[str, float]:
    """The multi-bootstrap of a linear contrast sum_k c_k metric(arm_k) over seeds x examples: `arms` are
    (c_k, predictions as `multi_bootstrap` takes them), every arm with the same units in the same order (a pair:
    (+1, A), (-1, B); the objective x init interaction: (+1, A_x), (-1, A_y), (-1, B_x), (+1, B_y))."""
    units = [(c, as_units(p)) for c, p in arms]

    def seed_diff(s: int, weights: np.ndarray) -> np.ndarray:
        return sum(c * unit_metric(metric, u[s], labels, weights) for c, u in units)

    n_units = len(units[0][1])
    return _resampled(seed_diff, n_units, units[0][1][0].shape[1], confidence, resamples, seed)


def _resampled(seed_diff: Callable[[int, np.ndarray], np.ndarray], n_seeds: int, n: int, confidence: float,
               resamples: int, seed: int) -> dict[str, float]:
    """The multi-bootstrap of the mean over seeds of `seed_diff(s, example weights [B, N]) -> [B]`."""
    observed, totals = _draws(seed_diff, n_seeds, n, resamples, seed)
    return summarise(observed / n_seeds, totals / n_seeds, confidence)


def _draws(seed_diff: Callable[[int, np.ndarray], np.ndarray], n_seeds: int, n: int, resamples: int, seed: int
           ) -> tuple[float, np.ndarray]:
    """(the sum over seeds of `seed_diff` on every example, its [B] resampled sums): seeds and examples drawn
    together, the same draw for every arm."""
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(np.float64)  # examples [B, N]
    seeds = rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=resamples)  # seed counts [B, S]
    # [B, S]: every seed's difference on every resample of the examples
    per_seed = np.stack([seed_diff(s, weights) for s in range(n_seeds)], axis=1)
    ones = np.ones((1, n))
    return float(np.sum([seed_diff(s, ones)[0] for s in range(n_seeds)])), (seeds * per_seed).sum(axis=1)


def summarise(observed: float, diffs: np.ndarray, confidence: float) -> dict[str, float]:
    """The observed difference, the percentile interval of its resampled values `diffs` and the two-sided p."""
    if not (math.isfinite(observed) and np.all(np.isfinite(diffs))):
        # a NaN or inf anywhere (a diverged run's NLL): no interval and no p beside a difference that is not one
        return {"diff": observed, "ci_low": math.nan, "ci_high": math.nan, "p": math.nan}
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(diffs, [tail, 1.0 - tail])
    return {"diff": observed, "ci_low": float(lo), "ci_high": float(hi), "p": _p_two_sided(diffs)}


def pooled_contrast_bootstrap(strata: Sequence[tuple[Sequence[tuple[float, np.ndarray | Sequence[np.ndarray]]],
                                                     np.ndarray, str]],
                              confidence: float = 0.95, resamples: int = RESAMPLES, seed: int = SEED
                              ) -> tuple[dict[str, float], list[float]]:
    """`contrast_bootstrap` pooled over tasks as the seed-level tests pool them: the mean of the contrast over
    every (task, seed) unit, each task's seeds and dev examples resampled within the task (a stratified
    multi-bootstrap). `strata`: per task (arms, labels, metric). Returns the summary (diff, ci_low, ci_high, p)
    and every unit's contrast on all of its task's examples (for the few-seeds guard)."""
    observed, totals, units = 0.0, np.zeros(resamples), []
    for k, (arms, labels, metric) in enumerate(strata):
        per_arm = [(c, as_units(p)) for c, p in arms]

        def seed_diff(s: int, weights: np.ndarray, per_arm: list = per_arm, labels: np.ndarray = labels,
                      metric: str = metric) -> np.ndarray:
            return sum(c * unit_metric(metric, u[s], labels, weights) for c, u in per_arm)

        n_units = len(per_arm[0][1])
        got, draws = _draws(seed_diff, n_units, len(labels), resamples, seed + k)
        observed, totals = observed + got, totals + draws
        ones = np.ones((1, len(labels)))
        units += [float(seed_diff(s, ones)[0]) for s in range(n_units)]
    count = max(1, len(units))
    return summarise(observed / count, totals / count, confidence), units


SEQUENCE_METRICS = ("perplexity", "token_accuracy")
MAX_MEAN_NLL = 50.0  # the dev metric's cap on the mean NLL before exp (teachers/decoder.py's lm_evaluator)


def weighted_sequence_metric(metric: str, summary: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """`metric` of a decoder's dev sequences, each counted `weights` times ([B, N] -> B values); `summary`:
    [N, 3] columns (summed target NLL, targets, right argmaxes)."""
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    summary = np.asarray(summary, dtype=np.float64)
    targets = np.maximum(w @ summary[:, 1], 1.0)
    if metric == "perplexity":
        return np.exp(np.minimum((w @ summary[:, 0]) / targets, MAX_MEAN_NLL))
    if metric == "token_accuracy":
        return (w @ summary[:, 2]) / targets
    raise ValueError(f"no per-sequence statistics for metric {metric!r} (offered: {', '.join(SEQUENCE_METRICS)})")


def multi_bootstrap_sequences(summary_a: np.ndarray | Sequence[np.ndarray], summary_b: np.ndarray | Sequence[np.ndarray],
                              metric: str, confidence: float = 0.95, resamples: int = RESAMPLES, seed: int = SEED
                              ) -> dict[str, float]:
    """The multi-bootstrap of mean(metric(A) - metric(B)) over seeds x dev sequences of two decoder students:
    `summary_a`, `summary_b` [S, N, 3] (row s of both from the same seed; see weighted_sequence_metric), or per
    master seed its runs' [R, N, 3] (`as_units`: a unit's score is the mean of its runs', as the seed-level
    statistics average them). One seed gives the paired bootstrap over the sequences. Returns what
    multi_bootstrap returns."""
    a = as_units(np.asarray(summary_a, dtype=np.float64) if isinstance(summary_a, np.ndarray) else summary_a, 2)
    b = as_units(np.asarray(summary_b, dtype=np.float64) if isinstance(summary_b, np.ndarray) else summary_b, 2)

    def unit(runs: np.ndarray, weights: np.ndarray) -> np.ndarray:
        return np.mean([weighted_sequence_metric(metric, r, weights) for r in runs], axis=0)

    def seed_diff(s: int, weights: np.ndarray) -> np.ndarray:
        return unit(a[s], weights) - unit(b[s], weights)

    return _resampled(seed_diff, len(a), a[0].shape[1], confidence, resamples, seed)


def multi_bootstrap_means(values_a: np.ndarray | Sequence[np.ndarray], values_b: np.ndarray | Sequence[np.ndarray],
                          confidence: float = 0.95, resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, float]:
    """The multi-bootstrap of mean(A - B) over seeds x examples of a per-example score whose value is its mean
    (lm-eval's acc, ROUGE-L, exact match): `values_a`, `values_b` [S, N], row s of both from the same seed and
    column n the same example, or per master seed its runs' [R, N] (`as_units`; the score is linear, so a unit's
    per-example mean over its runs scores as the mean of its runs' scores). Returns what multi_bootstrap returns."""
    a = np.stack([u.mean(axis=0) for u in as_units(values_a)]).astype(np.float64)
    b = np.stack([u.mean(axis=0) for u in as_units(values_b)]).astype(np.float64)

    def seed_diff(s: int, weights: np.ndarray) -> np.ndarray:
        return (weights @ (a[s] - b[s])) / weights.sum(axis=1)

    return _resampled(seed_diff, a.shape[0], a.shape[1], confidence, resamples, seed)


def mcnemar(pred_a: np.ndarray, pred_b: np.ndarray, labels: np.ndarray) -> tuple[float, int, int]:
    """McNemar's test of equal accuracy of A and B on the same examples -> (p, n_ab, n_ba), where n_ab counts
    examples A gets right and B wrong. Exact (binomial) below MCNEMAR_EXACT_BELOW discordant pairs, else the
    chi-square with continuity correction (statsmodels' `mcnemar`)."""
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar  # a second's import: reports only

    right_a, right_b = np.asarray(pred_a) == labels, np.asarray(pred_b) == labels
    n_ab, n_ba = int(np.sum(right_a & ~right_b)), int(np.sum(~right_a & right_b))
    if n_ab + n_ba == 0:
        return 1.0, 0, 0
    table = [[int(np.sum(right_a & right_b)), n_ab], [n_ba, int(np.sum(~right_a & ~right_b))]]
    exact = n_ab + n_ba < MCNEMAR_EXACT_BELOW
    return float(sm_mcnemar(table, exact=exact, correction=True).pvalue), n_ab, n_ba


def one_seed_test(pred_a: np.ndarray, pred_b: np.ndarray, labels: np.ndarray, metric: str,
                  resamples: int = RESAMPLES, seed: int = SEED) -> tuple[str, float]:
    """A paired test over the examples of one seed's runs -> (test name, p): McNemar for accuracy, else the
    paired bootstrap of metric(A) - metric(B) over examples."""
    if metric == "accuracy":
        p, n_ab, n_ba = mcnemar(pred_a, pred_b, labels)
        return f"McNemar ({n_ab} vs {n_ba} discordant)", p
    got = multi_bootstrap(np.atleast_2d(pred_a), np.atleast_2d(pred_b), labels, metric, resamples=resamples,
                          seed=seed)
    return "paired bootstrap over examples", got["p"]


def supported(metric: str) -> bool:
    return metric in METRICS


def stack(rows: Sequence[np.ndarray]) -> np.ndarray:
    """Seeds' prediction vectors as [S, N] (they share one dev set, so one length)."""
    return np.stack([np.asarray(r) for r in rows]) if rows else np.empty((0, 0))
