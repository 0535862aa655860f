"""Statistics over the frames of `distill_sweep.store`: aggregation, paired t-tests, Holm, grid status,
curves. Pure functions: no printing, no files.

Decisions (see also results/paper/README.md):
- std is over seeds with ddof=1 by default (the paper does not say); n is reported per cell.
- Avg is over the 7 GLUE tasks only, and only when all 7 are present in the row.
- Paired t-tests pool matched (task, seed) pairs across tasks. Holm correction is over the testable
  pairs of one table (one family per table); pairs with fewer than 2 pairs or zero-variance differences
  have no p and stay out of the correction. A test on fewer than 3 pairs (under 2 degrees of freedom)
  gets a p, with a caution: at 2 seeds the same comparison can read p=0.02 and at 3 seeds p=0.10.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from distill_sweep.paper import GLUE_TASKS, norm_task, objective_order, task_label
from distill_sweep.results import SCORED_STAGES
from distill_sweep.store import norm_spec

ROW: tuple[str, ...] = ("system", "init_label")  # a table row's key in the scores frame
MIN_RELIABLE_PAIRS = 3  # below this a paired t-test has under 2 degrees of freedom


# ----------------------------------------------------------------------------- aggregation


def aggregate(scores_df: pd.DataFrame, by: Sequence[str] = ROW, ddof: int = 1) -> pd.DataFrame:
    """Mean, std (with `ddof`) and n over seeds per (by..., task).

    std is NaN when n <= ddof. Columns: by..., task, metric, mean, std, n.
    """
    by = list(by)
    cols = [*by, "task", "metric", "mean", "std", "n"]
    if scores_df.empty:
        return pd.DataFrame(columns=cols)

    def std(v: pd.Series) -> float:
        return float(np.std(v.to_numpy(), ddof=ddof)) if len(v) > ddof else math.nan

    grouped = scores_df.groupby([*by, "task", "metric"], sort=False)["value"]
    agg = grouped.agg(mean="mean", std=std, n="count").reset_index()
    agg["n"] = agg["n"].astype(int)
    return agg[cols]


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
    """Holm-Bonferroni adjusted p-values (NaNs stay NaN and do not count towards m).

    Sorted ascending p_(1..m): adj_(i) = max_{j<=i} min(1, (m - j + 1) * p_(j)).
    """
    p = np.asarray(pvalues, dtype=float)
    adj = np.full_like(p, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    order = ok[np.argsort(p[ok], kind="stable")]
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        adj[idx] = running
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


def paired_tests(
    scores_df: pd.DataFrame,
    compare: str = "system",
    within: Sequence[str] = (),
    alpha: float = 0.05,
    levels: Sequence[str] | None = None,
    group_order: Sequence[Any] | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> pd.DataFrame:
    """Every pair of levels of `compare` (within each group of `within`), paired on matched
    (task, seed) scores present in both. Table 1: compare="system" on one init; Table 3:
    compare="init_label", within=("system",). `pairs` tests only these (a, b) pairs instead, in
    this order (a layout's rows against their baselines); a level with no scores in a group gives
    an untestable row that says so.

    Levels are taken in `levels` order, groups in `group_order` (one `within` column; by default the
    paper's objective order when grouping by objective). Holm correction over the testable tests
    returned (one family). Columns: within..., a, b, n, mean_a, mean_b, mean_diff, t, p, p_holm,
    significant, significant_holm, testable, few_pairs, note.
    """
    within = list(within)
    cols = [*within, "a", "b", "n", "mean_a", "mean_b", "mean_diff", "t", "p", "p_holm",
            "significant", "significant_holm", "testable", "few_pairs", "note"]
    if scores_df.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    groups = list(scores_df.groupby(within, sort=False)) if within else [((), scores_df)]
    if group_order is None and within == ["objective"]:
        group_order = objective_order(scores_df["objective"].unique())
    if group_order is not None:
        rank = {g: i for i, g in enumerate(group_order)}
        groups.sort(key=lambda kv: rank.get((kv[0] if isinstance(kv[0], tuple) else (kv[0],))[0], len(rank)))
    for key, grp in groups:
        key = key if isinstance(key, tuple) else (key,)
        wide = grp.pivot_table(index=["task", "seed"], columns=compare, values="value", aggfunc="mean")
        present = list(wide.columns)
        order = [lv for lv in levels if lv in present] if levels else present
        order += [lv for lv in present if lv not in order]
        for a, b in combinations(order, 2) if pairs is None else pairs:
            lacking = [lv for lv in dict.fromkeys((a, b)) if lv not in present]
            both = wide[[a, b]].dropna() if not lacking else pd.DataFrame({a: [], b: []}, dtype=float)
            t, p, note = paired_ttest(both[a], both[b])
            if lacking:
                note = f"no completed runs of {' and '.join(lacking)}"
            rows.append({
                **dict(zip(within, key, strict=True)), "a": a, "b": b, "n": len(both),
                "mean_a": float(both[a].mean()) if len(both) else math.nan,
                "mean_b": float(both[b].mean()) if len(both) else math.nan,
                "mean_diff": float((both[a] - both[b]).mean()) if len(both) else math.nan,
                "t": t, "p": p, "note": note,
            })
    derived = ("p_holm", "significant", "significant_holm", "testable", "few_pairs")
    out = pd.DataFrame(rows, columns=[c for c in cols if c not in derived])
    out["p_holm"] = holm(out["p"].to_numpy()) if len(out) else []
    # NaN p -> not significant (there is no evidence either way; the note says why).
    out["significant"] = out["p"] < alpha
    out["significant_holm"] = out["p_holm"] < alpha
    out["testable"] = out["p"].notna()
    out["few_pairs"] = out["testable"] & (out["n"] < MIN_RELIABLE_PAIRS)
    return out[cols]


# ----------------------------------------------------------------------------- grid status


def job_key(task: Any, objective: Any, init_spec: Any, seed: Any) -> tuple[str, str, str, int]:
    """Normalised (task, objective, init spec, seed): how records and expected grid cells are matched."""
    return norm_task(task), str(objective), norm_spec(init_spec), int(seed)


def grid_status(
    records_df: pd.DataFrame, expected: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Split the expected jobs into (completed, failed, missing). A job with any completed record is
    completed; otherwise its newest record decides (failed -> failed); running or absent jobs are missing.
    A job that carries `hashes` (its result directories' names: the config hash's first 10 characters, and
    the first schema's for the same job) is matched on them, so jobs that differ only in teacher, student or
    layer map stay apart; otherwise on (task, objective, init_spec, seed). Entries are the caller's dicts."""
    latest: dict[Any, str] = {}
    if not records_df.empty:
        ordered = records_df.sort_values("started_at", na_position="first", key=lambda s: s.astype(str))
        for row in ordered.itertuples(index=False):
            for key in (job_key(row.task, row.objective, row.init_spec, row.seed), ("hash", str(row.config_hash)[:10])):
                if latest.get(key) != "completed":
                    latest[key] = str(row.status)
    completed, failed, missing = [], [], []
    for job in expected:
        statuses = {latest.get(key) for key in expected_keys(job)}
        if "completed" in statuses:
            completed.append(job)
        elif "failed" in statuses:
            failed.append(job)
        else:
            missing.append(job)
    return completed, failed, missing


def expected_keys(job: dict[str, Any]) -> list[Any]:
    """How an expected job is found among the records (see `grid_status`)."""
    if job.get("hashes"):
        return [("hash", h) for h in job["hashes"]]
    return [job_key(job["task"], job["objective"], job["init_spec"], job["seed"])]


# ----------------------------------------------------------------------------- curves


def align_curves(curves: pd.DataFrame) -> pd.DataFrame:
    """Add x: a run's epochs before its scored stage (intermediate, a pre-stage such as PTP) at 1..k, its
    scored-stage epochs (SCORED_STAGES) at k_max(task) + their index, so scored epochs line up across
    objectives (vanilla KD and fine-tuning have no earlier stage). Also returns the boundary per task in
    column `boundary` (k_max + 0.5; NaN when no run has an earlier stage)."""
    if curves.empty:
        return curves.assign(x=pd.Series(dtype=float), boundary=pd.Series(dtype=float))
    scored = curves["stage"].isin(SCORED_STAGES)
    before = (~scored).groupby(curves["path"]).transform("sum")  # epochs before the scored stage, per run
    kmax = before.groupby(curves["task"]).transform("max").astype(float)
    x = np.where(scored, kmax + curves["global_epoch"] - before, curves["global_epoch"]).astype(float)
    return curves.assign(x=x, boundary=kmax.where(kmax > 0) + 0.5)


def curve_means(curves: pd.DataFrame, by: Sequence[str] = ("system",)) -> pd.DataFrame:
    """Mean and std over seeds of the aligned curves per (task, by..., x)."""
    aligned = align_curves(curves)
    keys = ["task", *by, "x"]
    if aligned.empty:
        return pd.DataFrame(columns=[*keys, "mean", "std", "n", "boundary", "metric"])
    grp = aligned.dropna(subset=["value"]).groupby(keys, sort=True)
    out = grp["value"].agg(mean="mean", std="std", n="count").reset_index()
    extra = grp[["boundary", "metric"]].first().reset_index(drop=True)
    return pd.concat([out, extra], axis=1)
