"""The dev curves the report draws: which epochs, aligned across objectives, their means over seeds with the
Student t band, in table order. Pure functions."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from distill_sweep.analysis import replication
from distill_sweep.analysis.stats import CONFIDENCE
from distill_sweep.records.record import SCORED_STAGES

CURVE_STAGES = ("scored", "all")  # the dev curves' epochs: the scored stage's only (default), or every stage's


def curve_stages(curves: pd.DataFrame, stages: str = "scored") -> pd.DataFrame:
    """The epochs the dev curves draw (CURVE_STAGES): "scored" keeps the scored stage's (SCORED_STAGES) only,
    the epochs whose score the tables select from; "all" keeps every stage's, the intermediate stage's too
    (scored with the student's untrained head)."""
    if stages not in CURVE_STAGES:
        raise ValueError(f"curves must be one of {'|'.join(CURVE_STAGES)}, got {stages!r}")
    return curves if stages == "all" else curves[curves["stage"].isin(SCORED_STAGES)]


def align_curves(curves: pd.DataFrame) -> pd.DataFrame:
    """Add x: a run's epochs before its scored stage (intermediate, a pre-stage such as PTP) at 1..k, its
    scored-stage epochs (SCORED_STAGES) at k_max(task) + their index in that stage, so scored epochs line up
    across objectives (vanilla KD and fine-tuning have no earlier stage). Also returns the boundary per task
    in column `boundary` (k_max + 0.5; NaN when no run has an earlier stage) and `scored` (whether the epoch
    is of the scored stage: a curve is not drawn across the boundary)."""
    if curves.empty:
        return curves.assign(x=pd.Series(dtype=float), boundary=pd.Series(dtype=float),
                             scored=pd.Series(dtype=bool))
    scored = curves["stage"].isin(SCORED_STAGES)
    before = (~scored).groupby(curves["path"]).transform("sum")  # epochs before the scored stage, per run
    kmax = before.groupby(curves["task"]).transform("max").astype(float)
    index = scored.astype(int).groupby(curves["path"]).cumsum()  # a scored epoch's place in its stage
    x = np.where(scored, kmax + index, curves["global_epoch"]).astype(float)
    return curves.assign(x=x, boundary=kmax.where(kmax > 0) + 0.5, scored=scored)


def curve_means(curves: pd.DataFrame, by: Sequence[str] = ("system",)) -> pd.DataFrame:
    """Per (task, by..., x) of the aligned curves: the mean, std and n over master seeds (their runs averaged
    first: analysis/replication.py), and the band the figures draw, the Student t-interval of the mean (`ci_low`,
    `ci_high`: as `t_interval`, NaN at one seed)."""
    aligned = align_curves(curves)
    keys = ["task", *by, "x"]
    if aligned.empty:
        return pd.DataFrame(columns=[*keys, "mean", "std", "n", "ci_low", "ci_high", "boundary", "metric", "scored"])
    points = aligned.dropna(subset=["value"])
    if replication.UNIT in points:  # a master seed's runs (a crossed grid) averaged first: the unit of replication
        points = points.groupby([*keys, replication.UNIT], sort=True).agg(
            value=("value", "mean"), boundary=("boundary", "first"), metric=("metric", "first"),
            scored=("scored", "first")).reset_index()
    grp = points.groupby(keys, sort=True)
    out = grp["value"].agg(mean="mean", std="std", n="count").reset_index()
    # t_interval per group, vectorised: a 500-job store has thousands of (row, epoch) points
    with np.errstate(invalid="ignore"):
        half = sps.t.ppf(0.5 + CONFIDENCE / 2.0, out["n"] - 1) * out["std"] / np.sqrt(out["n"])
    half = half.where(out["n"] >= 2)
    out = out.assign(ci_low=out["mean"] - half, ci_high=out["mean"] + half)
    extra = grp[["boundary", "metric", "scored"]].first().reset_index(drop=True)
    return pd.concat([out, extra], axis=1)


def curve_lines(task_means: pd.DataFrame, systems: Sequence[str], inits: Sequence[str] | None
                ) -> Iterator[tuple[str, str | None, str, pd.DataFrame]]:
    """One task's curves (rows of `curve_means`) in table order: (system, init or None, label, its rows); a
    system or init without rows is left out."""
    for system in systems:
        for init in list(inits) if inits is not None else [None]:
            line = task_means[task_means["system"] == system]
            if init is not None:
                line = line[line["init_label"] == init]
            if not line.empty:
                yield system, init, system if init is None else f"{system} [{init}]", line
