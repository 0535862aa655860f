"""Statistics over the frames of `distill_sweep.analysis.frames`: aggregation, confidence intervals, paired
t-tests with Holm, effect sizes, almost stochastic order (ASO), seeds needed (a grid's status: grid_status.py;
the dev curves: curves.py). Pure functions: no printing, no files.

Decisions (see also results/paper/README.md):
- std is over seeds with ddof=1 by default (the paper does not say); n is reported per cell.
- Avg is over the 7 GLUE tasks only, and only when all 7 are present in the row.
- Paired t-tests pool matched (task, seed) pairs across tasks. Holm correction is over the testable
  pairs of one table (one family per table); pairs with fewer than 2 pairs or zero-variance differences
  have no p and stay out of the correction. A test on fewer than 3 pairs (under 2 degrees of freedom)
  gets a p, with a caution: at 2 seeds the same comparison can read p=0.02 and at 3 seeds p=0.10.
- A cell's confidence interval is the Student t-interval of the mean over its seeds (n - 1 degrees of
  freedom) unless the caller asks for a bootstrap (`CI_METHODS`): at 3 to 5 seeds a nominal 95% percentile
  bootstrap covers only about 75-83% (tests/unit/analysis/test_coverage.py shows it; docs/guide/report.md has
  the table), so it is never the default. n = 1 has no interval, zero variance gives the point itself.
- A pair's interval of mean(A-B) is the t-interval the paired t-test inverts, at confidence 1 - alpha, so it
  excludes 0 exactly when p < alpha.
- Holm (t-tests): `holm`, equal to statsmodels' `multipletests(method="holm")`.
- Effect size: Cohen's d_z, the mean difference over the std of the differences (paired); not Hedges' g,
  whose small-sample factor is 0 at n = 2.
- ASO (almost stochastic order, its eps_min and verdict): analysis/aso.py.
- Untestable pairs (fewer than 2 matched pairs, or differences of zero variance) get no d, no seeds, no ASO
  and no interval: there is nothing to test, and d = inf or a 0-width interval would read as certainty.
- Seeds needed: the pairs a two-sided paired t-test needs for 80% power to detect d_z (statsmodels'
  TTestPower), divided by the tasks a comparison pools (pairs are (task, seed)), at the level the report
  corrects to: Holm's first step, alpha / m for a family of m tests (conservative: the later steps are more
  lenient). Given as a range (`seeds_range`) over the 1 - alpha interval of d_z (the noncentral-t interval of
  Steiger and Fouladi 1997), never one integer from a pilot: at 3 seeds that interval spans 0 to large d.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from distill_sweep.analysis import aso_null, replication
from distill_sweep.analysis.aso import aso_both, aso_limit, centred_by_task
from distill_sweep.analysis.paper import GLUE_TASKS, objective_order, task_label

ROW: tuple[str, ...] = ("system", "init_label")  # a table row's key in the scores frame
MIN_RELIABLE_PAIRS = 3  # below this a paired t-test has under 2 degrees of freedom
CONFIDENCE = 0.95  # of a cell's confidence interval
RESAMPLES = 10_000  # bootstrap resamples per interval
CI_METHODS = ("t", "bootstrap", "bca")  # a cell's interval: Student t (default), percentile bootstrap, BCa
BOOTSTRAP_MIN_N = 20  # below this many values a bootstrap CI of the mean undercovers: the report warns
CI_TEXT = {  # how the report names each method
    "t": "Student t-interval of the mean (n - 1 degrees of freedom)",
    "bootstrap": f"percentile bootstrap of the mean ({RESAMPLES:,} resamples, seeded)",
    "bca": f"BCa bootstrap of the mean (scipy, {RESAMPLES:,} resamples, seeded)",
}
BOOT_SEED = 0  # the bootstrap's random seed: the same store gives the same report
POWER = 0.8  # the power "seeds needed" is computed for
MAX_SEEDS = 10_000  # seeds needed above this are reported as this (a difference too small to chase)


# ----------------------------------------------------------------------------- aggregation


def aggregate(scores_df: pd.DataFrame, by: Sequence[str] = ROW, ddof: int = 1, ci: str = "t",
              unit: str | None = replication.UNIT) -> pd.DataFrame:
    """Mean, std (with `ddof`), n and the CI of the mean over the units of replication (`mean_ci` with method `ci`)
    per (by..., task).

    A unit is a master seed (`unit`; None: every run its own unit): the runs of one unit (a grid crossing `seed`
    with `seeds.data_order`) are averaged first (analysis/replication.py says why), so n counts units and `runs`
    the runs behind them. std is NaN when n <= ddof, the CI when n < 2; a CI past what the metric can be is cut
    there (`clip_to_range`; ci_cut says so). Columns: by..., task, metric, mean, std, n, runs, ci_low, ci_high,
    ci_cut.
    """
    by = list(by)
    cols = [*by, "task", "metric", "mean", "std", "n", "runs", "ci_low", "ci_high"]
    if scores_df.empty:
        return pd.DataFrame(columns=[*cols, "ci_cut"])
    if unit is not None and unit in scores_df.columns:
        scores_df = replication.unit_means(scores_df, [*by, "task", "metric"], unit)
    else:
        scores_df = scores_df.assign(runs=1)

    def std(v: pd.Series) -> float:
        return float(np.std(v.to_numpy(), ddof=ddof)) if len(v) > ddof else math.nan

    grouped = scores_df.groupby([*by, "task", "metric"], sort=False)
    agg = grouped["value"].agg(mean="mean", std=std, n="count").reset_index()
    agg["n"] = agg["n"].astype(int)
    agg["runs"] = grouped["runs"].sum().to_numpy(dtype=int)
    intervals = [mean_ci(v.to_numpy(), ci) for _, v in grouped["value"]]  # the same groups, in the same order
    cut = [clip_to_range(lo, hi, m) for (lo, hi), m in zip(intervals, agg["metric"], strict=True)]
    agg["ci_low"] = [lo for lo, _, _ in cut]
    agg["ci_high"] = [hi for _, hi, _ in cut]
    agg["ci_cut"] = [c for _, _, c in cut]
    return agg[[*cols, "ci_cut"]]


SIGNED_METRICS = ("mcc", "pearson", "spearman")  # in percent, -100 to 100; the others 0 to 100


def metric_range(metric: str) -> tuple[float, float]:
    """What a dev score in percent can be: -100 to 100 for correlations, else 0 to 100."""
    return (-100.0, 100.0) if any(str(metric).startswith(m) for m in SIGNED_METRICS) else (0.0, 100.0)


def clip_to_range(low: float, high: float, metric: str) -> tuple[float, float, bool]:
    """A cell's interval cut at what its metric can be (a 3-seed t-interval of accuracy can reach 108): (low,
    high, whether it was cut). The cut interval holds the true mean whenever the uncut one does, so its coverage
    is unchanged; the report says which cells were cut."""
    lo, hi = metric_range(metric)
    if math.isnan(low):
        return low, high, False
    cut = low < lo or high > hi
    return max(low, lo), min(high, hi), cut


def row_averages(agg: pd.DataFrame, by: Sequence[str] = ROW, tasks: Sequence[str] = GLUE_TASKS) -> pd.DataFrame:
    """Avg over `tasks` (default the 7 GLUE tasks) of each row's cell means; NaN (with the reason) unless
    all of them are present.

    Columns: by..., avg, n_tasks, reason.
    """
    by = list(by)
    cols = [*by, "avg", "n_tasks", "reason"]
    if agg.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for key, grp in agg.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        glue = grp[grp["task"].isin(tasks) & (grp["n"] > 0)]
        have = set(glue["task"])
        lacking = [task_label(t) for t in tasks if t not in have]
        if lacking:
            avg, reason = math.nan, "missing " + ", ".join(lacking)
        else:
            avg, reason = float(glue["mean"].mean()), ""
        out.append({**dict(zip(by, key, strict=True)), "avg": avg, "n_tasks": len(have), "reason": reason})
    return pd.DataFrame(out, columns=cols)


# ----------------------------------------------------------------------------- tests


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values over the p-values that are not NaN: sorted ascending, the i-th (from 0) of m times
    m - i, capped at 1, made non-decreasing in that order (statsmodels' `multipletests(method="holm")` gives the
    same, tests/unit/analysis/test_stats.py checks it, in a fraction of its time: the suite's simulations call it
    thousands of times); NaNs (untestable pairs) stay NaN and do not count towards the family size."""
    p = np.asarray(pvalues, dtype=float)
    adj = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m:
        values = p[ok]
        order = np.argsort(values, kind="stable")
        stepped = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * values[order]))
        out = np.empty(m)
        out[order] = stepped
        adj[ok] = out
    return adj


def paired_ttest(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, str]:
    """Two-sided paired t-test of a vs b -> (t, p, note). NaN with a note instead of raising when
    there are fewer than 2 pairs or the differences have zero variance (t undefined); a caution in
    the note when there are fewer than MIN_RELIABLE_PAIRS pairs."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    d = x - y
    if len(d) < 2:
        return math.nan, math.nan, f"only {len(d)} matched pair(s)"
    if np.allclose(d, d[0], rtol=0.0, atol=1e-12):
        return math.nan, math.nan, f"differences have zero variance (all {d[0]:+.4g})"
    res = sps.ttest_rel(x, y)
    note = ""
    if len(d) < MIN_RELIABLE_PAIRS:
        note = f"caution: only {len(d)} pairs ({len(d) - 1} degree of freedom), p is unreliable"
    return float(res.statistic), float(res.pvalue), note


# paired_tests' columns after the `within` ones; the family columns are computed over all its rows at once
_TEST_COLUMNS = ("a", "b", "n", "tasks", "mean_a", "mean_b", "mean_diff", "ci_low", "ci_high", "d", "t", "p",
                 "p_holm", "significant", "significant_holm", "testable", "few_pairs", "aso_ab", "aso_ba",
                 "aso_better", "aso_limit", "seeds", "seeds_low", "seeds_high", "detectable", "note")
_FAMILY_COLUMNS = ("p_holm", "significant", "significant_holm", "testable", "few_pairs", "aso_ab", "aso_ba",
                   "aso_better", "aso_limit", "seeds", "seeds_low", "seeds_high", "detectable")


def paired_tests(
    scores_df: pd.DataFrame,
    compare: str = "system",
    within: Sequence[str] = (),
    alpha: float = 0.05,
    levels: Sequence[str] | None = None,
    group_order: Sequence[Any] | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    family_extra: Sequence[float] = (),
) -> pd.DataFrame:
    """Every pair of levels of `compare` (within each group of `within`), paired on matched
    (task, seed) scores present in both. Table 1: compare="system" on one init; Table 3:
    compare="init_label", within=("system",). `pairs` tests only these (a, b) pairs instead, in
    this order (a layout's rows against their baselines); a level with no scores in a group gives
    an untestable row that says so.

    Levels are taken in `levels` order, groups in `group_order` (one `within` column; by default the
    paper's objective order when grouping by objective). Holm correction over the testable tests
    returned (one family); ASO's verdict at alpha / m over the same m testable pairs (Bonferroni).
    Columns: within..., a, b, n, tasks (pooled), mean_a, mean_b, mean_diff, ci_low, ci_high (the 1 - alpha
    t-interval of mean_diff that the t-test inverts: it excludes 0 exactly when p < alpha), d (Cohen's d_z),
    t, p, p_holm, significant, significant_holm, testable, few_pairs, aso_ab / aso_ba (eps_min that A / B is
    better), aso_better ("A", "B" or ""), aso_limit (the eps_min a verdict needs: `aso_limit`; 0 = none
    possible at this n), seeds (seeds needed at the observed d, at Holm's first-step level), seeds_low /
    seeds_high (`seeds_range`), detectable (the mean difference its n pairs would detect with 80% power at Holm's
    first-step level, at the differences' observed sd: what a non-significant pair cannot rule out), note. Untestable pairs have NaN d, CI, ASO and seeds. `family_extra`: the
    p-values of the table's other claims (Table 3: its interaction contrasts), in the same family: Holm over all,
    m counts them too.
    """
    within = list(within)
    cols = [*within, *_TEST_COLUMNS]
    if scores_df.empty:
        return pd.DataFrame(columns=cols)
    rows: list[dict[str, Any]] = []
    for key, grp in _ordered_groups(scores_df, within, group_order):
        rows += _group_tests(grp, dict(zip(within, key, strict=True)), compare, alpha, levels, pairs)
    out = pd.DataFrame(rows, columns=[*(c for c in cols if c not in _FAMILY_COLUMNS), "_pairs", "_sd"])  # for ASO
    _add_family_columns(out, alpha, family_extra)
    return out[cols]


def _ordered_groups(scores_df: pd.DataFrame, within: list[str], group_order: Sequence[Any] | None
                    ) -> list[tuple[tuple[Any, ...], pd.DataFrame]]:
    """The groups of `within` (one group, key (), without it) as (key tuple, scores), in `group_order`."""
    groups = list(scores_df.groupby(within, sort=False)) if within else [((), scores_df)]
    groups = [(key if isinstance(key, tuple) else (key,), grp) for key, grp in groups]
    if group_order is None and within == ["objective"]:
        group_order = objective_order(scores_df["objective"].unique())
    if group_order is not None:  # groups not named in it go last, in their order of appearance
        rank = {g: i for i, g in enumerate(group_order)}
        groups.sort(key=lambda kv: rank.get(kv[0][0], len(rank)))
    return groups


def _group_tests(grp: pd.DataFrame, group: dict[str, Any], compare: str, alpha: float,
                 levels: Sequence[str] | None, pairs: Sequence[tuple[str, str]] | None) -> list[dict[str, Any]]:
    """One row per pair of `compare` levels in one group (`group`: its `within` values), before the family columns."""
    wide = grp.pivot_table(index=["task", "seed"], columns=compare, values="value", aggfunc="mean")
    present = list(wide.columns)
    order = [lv for lv in levels if lv in present] if levels else present
    order += [lv for lv in present if lv not in order]
    columns = {lv: wide[lv].to_numpy(dtype=float) for lv in present}  # numpy: hundreds of pairs per table
    task_codes, _ = pd.factorize(wide.index.get_level_values("task"))
    return [{**group, **_pair_test(a, b, columns, task_codes, alpha)}
            for a, b in (combinations(order, 2) if pairs is None else pairs)]


def _pair_test(a: str, b: str, columns: dict[str, np.ndarray], task_codes: np.ndarray, alpha: float
               ) -> dict[str, Any]:
    """The paired t-test of levels a and b on the (task, seed) rows where both have a score; `_pairs` keeps
    the matched scores for ASO, which is run over the whole family."""
    lacking = [lv for lv in dict.fromkeys((a, b)) if lv not in columns]
    x, y, codes = (np.empty(0),) * 3
    if not lacking:
        both = ~np.isnan(columns[a]) & ~np.isnan(columns[b])
        x, y, codes = columns[a][both], columns[b][both], task_codes[both]
    t, p, note = paired_ttest(x, y)
    if lacking:
        note = f"no completed runs of {' and '.join(lacking)}"
    lo, hi = paired_t_ci(x, y, 1.0 - alpha)
    return {
        "a": a, "b": b, "n": len(x), "tasks": len(set(codes)),
        "mean_a": float(x.mean()) if len(x) else math.nan,
        "mean_b": float(y.mean()) if len(x) else math.nan,
        "mean_diff": float((x - y).mean()) if len(x) else math.nan,
        "ci_low": lo, "ci_high": hi, "d": cohens_dz(x, y), "t": t, "p": p, "note": note,
        "_pairs": (codes, x, y), "_sd": float((x - y).std(ddof=1)) if len(x) > 1 else math.nan,
    }


def _add_family_columns(out: pd.DataFrame, alpha: float, extra: Sequence[float] = ()) -> None:
    """The columns that depend on every test of the family (these tests and the `extra` p-values of the table's
    other claims): Holm, ASO with its Bonferroni, seeds, verdicts."""
    extra_p = np.asarray(list(extra), dtype=float)
    out["p_holm"] = holm(np.concatenate([out["p"].to_numpy(dtype=float), extra_p]))[: len(out)] if len(out) else []
    out["testable"] = out["p"].notna()
    m = int(out["testable"].sum()) + int((~np.isnan(extra_p)).sum())  # the family: Holm's and ASO's Bonferroni
    level = alpha / max(1, m)  # Holm's first step, and the Bonferroni level of ASO's verdict
    for col in ("d", "ci_low", "ci_high"):  # nothing to test: no effect size, no interval of width 0
        out[col] = out[col].where(out["testable"])
    asos = [aso_both(*centred_by_task(*matched), aso_null.ASO_ALPHA) if ok else (math.nan, math.nan)
            for matched, ok in zip(out["_pairs"], out["testable"], strict=True)]
    out["aso_ab"] = [x for x, _ in asos]
    out["aso_ba"] = [y for _, y in asos]
    out["aso_limit"] = [aso_limit(int(n), level / 2.0) if ok else math.nan  # per direction
                        for n, ok in zip(out["n"], out["testable"], strict=True)]
    # NaN p -> not significant (there is no evidence either way; the note says why).
    out["significant"] = out["p"] < alpha
    out["significant_holm"] = out["p_holm"] < alpha
    # one verdict per pair: ASO's is printed only beside a pair the Holm t-test calls, in the same direction, so
    # two identical systems get a winner by either at most as often as by the t-test (each at its own level, their
    # union reached 8.6% at 4 seeds, 10% pooled over 7 tasks)
    out["aso_better"] = aso_verdicts(out["aso_ab"], out["aso_ba"], out["aso_limit"], out["mean_diff"],
                                     out["significant_holm"])
    spans = [seeds_range(int(n), d, int(k), alpha, level) if ok else (math.nan, math.nan)
             for n, d, k, ok in zip(out["n"], out["d"], out["tasks"], out["testable"], strict=True)]
    out["seeds"] = [seeds_needed(d, int(k), level) if ok else math.nan
                    for d, k, ok in zip(out["d"], out["tasks"], out["testable"], strict=True)]
    # what a non-significant pair cannot rule out: the difference its n pairs detect with 80% power at the level
    # the family corrects to (Holm's first step), at the differences' observed spread
    out["detectable"] = [detectable_effect(int(n), float(sd), level) if ok else math.nan
                         for n, sd, ok in zip(out["n"], out["_sd"], out["testable"], strict=True)]
    out["seeds_low"] = [lo for lo, _ in spans]
    out["seeds_high"] = [hi for _, hi in spans]
    out["few_pairs"] = out["testable"] & (out["n"] < MIN_RELIABLE_PAIRS)


def aso_verdicts(aso_ab: Sequence[float], aso_ba: Sequence[float], limit: Sequence[float], mean_diff: Sequence[float],
                 called: Sequence[bool]) -> list[str]:
    """ASO's verdict per pair: "A" (A almost stochastically better), "B" or "". One verdict per pair: it is given
    only beside a pair the t-test calls (`called`: significant after Holm), in the t-test's direction, with eps_min
    below its calibrated `limit`; so two identical systems get a winner by either at most as often as by the
    t-test. Each at its own level, their union named a winner in 8.6% of pairs at 4 seeds and 10% pooled over 7
    tasks (tests/unit/analysis/test_verdicts.py measures both rules)."""
    return ["A" if ok and x < lim and diff > 0 else "B" if ok and y < lim and diff < 0 else ""
            for x, y, lim, diff, ok in zip(aso_ab, aso_ba, limit, mean_diff, called, strict=True)]


# ----------------------------------------------------------------------------- uncertainty and effect


def _finite(values: Sequence[float]) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    return x[~np.isnan(x)]


def _named_case(x: np.ndarray) -> tuple[float, float] | None:
    """The intervals every method shares: none (NaNs) for fewer than 2 values, the point itself when all are
    equal; None otherwise (the method computes it)."""
    if len(x) < 2:
        return math.nan, math.nan
    if np.ptp(x) == 0.0:
        return float(x[0]), float(x[0])
    return None


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student t-interval of the mean: mean +- t_{n-1, (1 + confidence) / 2} * sd / sqrt(n), sd with ddof=1.
    NaNs for fewer than 2 values; (v, v) when all values are v."""
    x = _finite(values)
    named = _named_case(x)
    if named is not None:
        return named
    mean = float(x.mean())
    half = float(sps.t.ppf(0.5 + confidence / 2.0, len(x) - 1)) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return mean - half, mean + half


def mean_ci(values: Sequence[float], method: str = "t",
            confidence: float = CONFIDENCE) -> tuple[float, float]:
    """A cell's interval of the mean by `method` (CI_METHODS): "t" (`t_interval`), "bootstrap"
    (`bootstrap_ci`, percentile) or "bca" (scipy's BCa bootstrap). The bootstraps undercover below
    BOOTSTRAP_MIN_N values: chosen only by name. NaNs for fewer than 2 values; (v, v) when all values are v."""
    if method == "t":
        return t_interval(values, confidence)
    if method == "bootstrap":
        return bootstrap_ci(values, confidence)
    if method != "bca":
        raise ValueError(f"ci must be one of {'|'.join(CI_METHODS)}, got {method!r}")
    x = _finite(values)
    named = _named_case(x)
    if named is not None:
        return named
    with np.errstate(all="ignore"):
        res = sps.bootstrap((x,), np.mean, confidence_level=confidence, method="BCa", n_resamples=RESAMPLES,
                            random_state=np.random.default_rng(BOOT_SEED)).confidence_interval
    return float(res.low), float(res.high)


def bootstrap_ci(values: Sequence[float], confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                 seed: int = BOOT_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (resampling the values with replacement). NaNs for fewer
    than 2 values; (v, v) when all values are v. Only by choice (`ci=bootstrap`): it undercovers at few
    seeds."""
    x = _finite(values)
    named = _named_case(x)
    if named is not None:
        return named
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


def paired_t_ci(a: Sequence[float], b: Sequence[float],
                confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The t-interval of mean(a - b) over matched pairs: the interval a two-sided paired t-test at
    alpha = 1 - confidence inverts, so it excludes 0 exactly when that test's p < alpha. (d, d) when every
    difference is d (no t-test); NaNs for fewer than 2 pairs."""
    return t_interval(np.asarray(a, dtype=float) - np.asarray(b, dtype=float), confidence)


def cohens_dz(a: Sequence[float], b: Sequence[float]) -> float:
    """Cohen's d_z of paired samples: mean(a - b) / std(a - b, ddof=1) (= t / sqrt(n)). NaN for fewer than 2
    pairs or no difference at all; +-inf when every difference is the same non-zero number (zero variance).
    Not Hedges' g: its small-sample factor J(n - 1) is 0 at n = 2, which would hide every 2-seed effect."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if len(d) < 2:
        return math.nan
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return math.nan if abs(mean) <= 1e-12 else math.copysign(math.inf, mean)
    return mean / sd


def seeds_needed(effect: float, units_per_seed: int = 1, alpha: float = 0.05, power: float = POWER) -> float:
    """Seeds a two-sided paired t-test needs to detect a standardised difference `effect` (d_z) with
    `power` at `alpha`: the fewest pairs whose power (statsmodels' TTestPower) reaches it, over
    `units_per_seed` pairs per seed (the tasks a pooled comparison matches), rounded up. At least 2 pairs;
    inf for no effect; NaN unknown; MAX_SEEDS at most."""
    if math.isnan(effect) or units_per_seed < 1:
        return math.nan
    if effect == 0.0:
        return math.inf
    # statsmodels takes a second to import: only the report's statistics need it
    from statsmodels.stats.power import TTestPower

    def enough(pairs: int) -> bool:
        if not math.isfinite(effect):  # zero-variance differences: any 2 pairs show them
            return True
        with np.errstate(all="ignore"):
            got = float(TTestPower().power(effect_size=abs(effect), nobs=pairs, alpha=alpha, alternative="two-sided"))
        if math.isnan(got):  # statsmodels' NaN at a large noncentrality: the same power from scipy's nct
            df, nc = pairs - 1, abs(effect) * math.sqrt(pairs)
            crit = sps.t.ppf(1.0 - alpha / 2.0, df)
            got = float(np.nan_to_num(sps.nct.sf(crit, df, nc)) + np.nan_to_num(sps.nct.cdf(-crit, df, nc)))
        return got >= power

    # power grows with the pairs: search by doubling, then bisect (solve_power's root finder fails at
    # large effects and tiny samples)
    cap = MAX_SEEDS * units_per_seed
    lo, hi = 1, 2  # enough(lo) is False (one pair has no t-test), enough(hi) to be found
    while not enough(hi):
        if hi >= cap:
            return float(MAX_SEEDS)
        lo, hi = hi, min(cap, 2 * hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return float(math.ceil(hi / units_per_seed))


def detectable_effect(n: int, sd: float, alpha: float = 0.05, power: float = POWER) -> float:
    """The smallest mean difference (in the differences' units) that a two-sided one-sample (paired) t-test on n
    pairs whose differences have standard deviation `sd` detects with `power` at `alpha`: d* sd, where d* solves
    P(|T| > t_{1 - alpha/2, n-1}) = power for T noncentral t with n - 1 degrees of freedom and noncentrality
    d* sqrt(n) (statsmodels' TTestPower computes the same). What a non-significant test cannot rule out: an effect
    below it. NaN for fewer than 2 pairs or an sd that is not positive and finite."""
    if n < 2 or not (math.isfinite(sd) and sd > 0.0):
        return math.nan
    from scipy.optimize import brentq

    df = n - 1
    crit = float(sps.t.ppf(1.0 - alpha / 2.0, df))

    def short(d: float) -> float:
        nc = d * math.sqrt(n)
        with np.errstate(all="ignore"):  # scipy's nct is NaN far in its tails, where the tail is 0 or 1
            upper, lower = float(sps.nct.sf(crit, df, nc)), float(sps.nct.cdf(-crit, df, nc))
        upper = upper if not math.isnan(upper) else float(nc > crit)
        lower = lower if not math.isnan(lower) else 0.0
        return upper + lower - power

    hi = 1.0
    while short(hi) < 0.0:
        hi *= 2.0
    return brentq(short, 0.0, hi, xtol=1e-10) * sd


def dz_interval(n: int, d: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The confidence interval of Cohen's d_z from n pairs: t = d sqrt(n) has a noncentral t distribution with
    n - 1 degrees of freedom and noncentrality delta sqrt(n); the interval inverts it (Steiger and Fouladi
    1997, scipy's nct). NaNs for fewer than 2 pairs or a d that is not finite."""
    if n < 2 or not math.isfinite(d):
        return math.nan, math.nan
    from scipy.optimize import brentq

    df, t_obs, tail = n - 1, d * math.sqrt(n), (1.0 - confidence) / 2.0

    def cdf(nc: float) -> float:  # scipy's nct is NaN far in its tails: there P(T <= t_obs) is 0 or 1
        with np.errstate(all="ignore"):
            got = float(sps.nct.cdf(t_obs, df, nc))
        return got if not math.isnan(got) else (0.0 if nc > t_obs else 1.0)

    def solve(target: float) -> float:  # the noncentrality at which P(T <= t_obs) = target (decreasing in nc)
        f = lambda nc: cdf(nc) - target  # noqa: E731
        lo, hi = t_obs - 10.0, t_obs + 10.0
        while f(lo) < 0:
            lo -= 10.0 + abs(lo)
        while f(hi) > 0:
            hi += 10.0 + abs(hi)
        return brentq(f, lo, hi, xtol=1e-10)

    return solve(1.0 - tail) / math.sqrt(n), solve(tail) / math.sqrt(n)


def seeds_range(n: int, d: float, units_per_seed: int = 1, alpha: float = 0.05, level: float | None = None,
                power: float = POWER) -> tuple[float, float]:
    """The seeds needed (`seeds_needed` at `level`, default alpha) over the 1 - alpha interval of d_z
    (`dz_interval`): (fewest, most), the fewest at the interval's end farthest from 0, the most at the end
    nearest 0; most = inf when the interval holds 0 (the pilot cannot rule out no difference). NaNs when d has
    no interval (fewer than 2 pairs, zero variance)."""
    lo, hi = dz_interval(n, d, 1.0 - alpha)
    if math.isnan(lo):
        return math.nan, math.nan
    level = alpha if level is None else level
    far, near = max(abs(lo), abs(hi)), (0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi)))
    return seeds_needed(far, units_per_seed, level, power), seeds_needed(near, units_per_seed, level, power)
