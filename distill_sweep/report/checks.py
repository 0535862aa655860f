"""One rule for every verdict: a claim (a pair of rows, Table 3's objective x init interaction) is called only when

1. its seed-level t-test is significant after Holm over its table's family, and
2. where its runs keep dev predictions, the guarded multi-bootstrap of the same contrast over seeds and dev
   examples, pooled over the claim's tasks (analysis/few_seeds.pooled_contrast), is significant after Holm over the
   claims so checked.

The verdict's rejection region lies inside the t-test's, so two identical systems are called different at most as
often as the t-test calls them (alpha), whatever the check adds; and a claim the dev examples cannot carry (an
interaction of +1.03 at p = 0.016 over seeds whose multi-bootstrap reads p = 0.21) is not called. ASO's verdict is
printed only beside a called pair, in the same direction (stats.paired_tests): one verdict per pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from distill_sweep.analysis import example_stats, few_seeds, prediction_checks
from distill_sweep.analysis.stats import holm
from distill_sweep.records.predictions import DevPredictions

Arms = list[tuple[float, dict[str, Any]]]  # a claim's contrast: (coefficient, the columns that select its runs)

RULE = ("called only when the seed-level t-test is significant after Holm and, where the runs keep dev predictions, "
        "the multi-bootstrap of the same contrast over seeds and dev examples (pooled over tasks, guarded by the "
        "per-seed t-test) is significant after Holm over the claims so checked")


def check(done: pd.DataFrame, cache: dict[str, DevPredictions | None], arms: Arms, metrics: dict[str, str]
          ) -> dict[str, float] | None:
    """The guarded multi-bootstrap of the claim's contrast pooled over its tasks, on the master seeds where every
    arm has runs with usable predictions (`cache`, report.examples.usable_predictions) on one dev set; a unit's
    score is the mean of its runs'. None where no task has two such seeds (seed-level statistics only)."""
    strata = []
    for task, runs in done.groupby("task", sort=True):
        metric = metrics.get(str(task), "accuracy")
        if not example_stats.supported(metric):
            continue
        per_arm = [_by_seed(runs, selector, cache) for _, selector in arms]
        seeds = sorted(set.intersection(*(set(by) for by in per_arm)))
        first = next((p for by in per_arm for s in seeds for p in by[s]), None)
        if first is None:
            continue
        split = prediction_checks.scored_split(first)
        most = prediction_checks.majority_dev(p.dev_hash.get(split or "") for by in per_arm for s in seeds
                                              for p in by[s])
        kept = [{s: [p for p in by[s] if p.dev_hash.get(split or "") == most and split in p.preds] for s in seeds}
                for by in per_arm]
        seeds = [s for s in seeds if all(by[s] for by in kept)]
        if not seeds:
            continue
        units = [(coef, [np.stack([p.preds[split] for p in by[s]]) for s in seeds])
                 for (coef, _), by in zip(arms, kept, strict=True)]
        strata.append((units, first.labels[split], metric))
    if sum(len(arms_[0][1]) for arms_, _, _ in strata) < 2:
        return None
    return few_seeds.pooled_contrast(strata)


def _by_seed(runs: pd.DataFrame, selector: dict[str, Any], cache: dict[str, DevPredictions | None]
             ) -> dict[int, list[DevPredictions]]:
    mask = np.ones(len(runs), dtype=bool)
    for column, value in selector.items():
        mask &= (runs[column] == value).to_numpy()
    out: dict[int, list[DevPredictions]] = {}
    for path, seed in zip(runs["path"][mask], runs["seed"][mask], strict=True):
        got = cache.get(str(path))
        if got is not None:
            out.setdefault(int(seed), []).append(got)
    return out


def apply(claims: pd.DataFrame, arms_of: Callable[[dict[str, Any]], Arms], done: pd.DataFrame,
          cache: dict[str, DevPredictions | None], metrics: dict[str, str], alpha: float) -> pd.DataFrame:
    """The claims (rows with p_holm and significant_holm: a tests table, the interaction contrasts) with the check
    (`check`) run on those the seed-level test calls: p_check (the guarded multi-bootstrap's p, NaN where not
    run), p_check_holm (Holm over the checked claims), and significant_holm then the verdict (`RULE`); a claim the
    check does not carry says so in its note."""
    out = claims.copy()
    out["p_check"] = math.nan
    for i, row in zip(out.index, out.to_dict("records"), strict=True):
        if row["significant_holm"]:
            got = check(done, cache, arms_of(row), metrics)
            out.loc[i, "p_check"] = got["p"] if got is not None else math.nan
    out["p_check_holm"] = holm(out["p_check"].to_numpy(dtype=float)) if len(out) else []
    refused = out["significant_holm"] & (out["p_check_holm"] >= alpha)
    out["significant_holm"] = out["significant_holm"] & ~refused
    out.loc[refused, "note"] = [
        (f"{note}; " if isinstance(note, str) and note else "")
        + f"not called: the multi-bootstrap over seeds and dev examples gives p (Holm) = {p:.3g}"
        for note, p in zip(out.loc[refused, "note"], out.loc[refused, "p_check_holm"], strict=True)]
    if "aso_better" in out:  # ASO's verdict only beside a called pair
        out.loc[~out["significant_holm"], "aso_better"] = ""
    return out


def pair_arms(level: str, within: Sequence[str] = ()) -> Callable[[dict[str, Any]], Arms]:
    """A tests table's pair (a, b of `level`, within the `within` columns) as a contrast: A - B."""
    def arms(row: dict[str, Any]) -> Arms:
        fixed = {w: row[w] for w in within}
        return [(1.0, {**fixed, level: row["a"]}), (-1.0, {**fixed, level: row["b"]})]
    return arms


def interaction_arms(row: dict[str, Any]) -> Arms:
    """An interaction contrast: (A_x - A_y) - (B_x - B_y)."""
    return [(1.0, {"system": row["a"], "init_label": row["init_x"]}),
            (-1.0, {"system": row["a"], "init_label": row["init_y"]}),
            (-1.0, {"system": row["b"], "init_label": row["init_x"]}),
            (1.0, {"system": row["b"], "init_label": row["init_y"]})]
