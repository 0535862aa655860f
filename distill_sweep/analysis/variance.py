"""Variance components: how much of a cell's spread over runs each source of variance (config/seeds.py) explains,
where a grid varies more than one source (`seed=1,2,3 seeds.data_order=1,2,3`).

A cell's runs (one task, row and init) each state their seed per source (frames.run_seeds). Sources whose values
split the runs the same way cannot be told apart and are one factor (with the default block, init and dropout both
follow the master seed: "init+dropout"); a source with one value does not vary. With two factors or more, the
scores are fitted with crossed random effects, one variance component per factor plus a residual (the sources'
interactions and whatever else moves a run):

    score = mu + a_f1[level] + a_f2[level] + ... + e,   a_f ~ N(0, var_f), e ~ N(0, var_residual)

by REML (statsmodels' MixedLM, the factors as variance components of one group). Why REML and not only the ANOVA
(method of moments) estimator: a results directory often holds an incomplete crossing (the default seeds=1,2,3 runs
next to a seed x data_order grid), where the ANOVA estimator needs Henderson's method III and REML does not; on a
complete balanced crossing the two are the same when no estimate is at 0 (Searle, Casella and McCulloch 1992,
"Variance Components", Sec. 6.8), so there the closed form is used and MixedLM only where an ANOVA estimate is
cut at 0 (REML's optimum is then on the boundary, the others refitted); tests/unit/analysis/test_variance.py checks
both against the expected mean squares worked by hand and against a brute-force maximum of the REML likelihood. A
component REML puts at 0 (the boundary) is reported as 0 with a note.

Each component gets an interval and its degrees of freedom (L - 1 for a factor of L levels: at 2 or 3 levels an
estimate is rough): on a complete balanced crossing, a parametric bootstrap (`intervals`: BOOT_RESAMPLES scores
simulated from the fitted components, each refitted by the ANOVA estimator, REML's equal there off the boundary,
vectorised) gives each component's 95% percentile interval. A source is named dominant only when that bootstrap's
interval of (its component - the largest other) lies above 0; else none is. The largest estimate alone named the
wrong source in 30% of 3 x 2 grids whose init component was 4 times each other's, and blamed a seed source in 43%
of grids with no seed structure at all (tests/unit/analysis/test_variance.py simulates both). An incomplete
crossing gets estimates without intervals and no dominant source.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

SOURCES = ("init", "data_order", "dropout", "sampling")  # the order of frames.run_seeds' tuple
ENCODER_SOURCES = ("init", "data_order", "dropout")  # Tables 1 and 3: their jobs draw no samples
RESIDUAL = "residual"
CELL = ("task", "system", "init_label")
COLUMNS = (*CELL, "n", "component", "levels", "df", "variance", "sd", "share", "ci_low", "ci_high", "dominant",
           "note")
BOOT_RESAMPLES = 2_000  # parametric bootstrap resamples of a cell's components
BOOT_SEED = 0
CONFIDENCE = 0.95


def seed_factors(seeds: Sequence[Sequence[int]], sources: Sequence[str] = ENCODER_SOURCES
                 ) -> list[tuple[str, np.ndarray]]:
    """The factors a cell's runs vary, as (name, level codes per run): each source (of `sources`, by its position in
    SOURCES) with more than one value; sources that split the runs identically merged into one, named "a+b"."""
    table = np.asarray([list(s) for s in seeds], dtype=np.int64).reshape(len(seeds), len(SOURCES))
    factors: list[tuple[str, np.ndarray]] = []
    for source in sources:
        codes = pd.factorize(table[:, SOURCES.index(source)])[0]
        if codes.max(initial=0) < 1:
            continue  # one value: does not vary
        for i, (name, other) in enumerate(factors):
            if _same_partition(codes, other):
                factors[i] = (f"{name}+{source}", other)
                break
        else:
            factors.append((source, codes))
    return factors


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    return len(set(zip(a.tolist(), b.tolist(), strict=True))) == len(set(a.tolist())) == len(set(b.tolist()))


def components(values: Sequence[float], factors: Sequence[tuple[str, np.ndarray]]) -> tuple[dict[str, float], str]:
    """REML variance components of `values` under crossed random effects of `factors` (name, level codes), plus
    RESIDUAL: ({name: variance}, note). An empty dict and the reason where they cannot be estimated."""
    y = np.asarray(values, dtype=float)
    levels = [len(set(codes.tolist())) for _, codes in factors]
    residual_df = len(y) - 1 - sum(n - 1 for n in levels)
    if len(factors) < 2:
        return {}, "fewer than two sources vary"
    if residual_df < 1 or any(n == len(y) for n in levels):
        return {}, (f"{len(y)} runs cannot separate {len(factors)} sources and a residual (each source needs "
                    "repeated levels: cross them, e.g. seed=1,2,3 seeds.data_order=1,2,3)")
    if np.ptp(y) == 0.0:
        return {**{name: 0.0 for name, _ in factors}, RESIDUAL: 0.0}, "every run scored the same"
    if balanced(factors):  # the closed form (MixedLM's optimiser stopped short of it in a quarter to half of them)
        closed = reml_balanced(y, factors)
        if any(closed[name] == 0.0 for name, _ in factors):
            return closed, ("a component is at or near 0 (REML's optimum on the boundary of its space): the runs show no "
                            "spread from it beyond the residual's")
        return closed, ""
    # statsmodels takes a second to import: only when a table needs it
    from statsmodels.regression.mixed_linear_model import MixedLM

    names = [f"f{i}" for i in range(len(factors))]  # formula-safe names
    data = pd.DataFrame({"value": y, **{n: codes for n, (_, codes) in zip(names, factors, strict=True)}})
    model = MixedLM.from_formula("value ~ 1", groups=np.ones(len(y)), re_formula="0", data=data,
                                 vc_formula={n: f"0 + C({n})" for n in names})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = model.fit(reml=True)
    fitted = dict(zip(model.exog_vc.names, np.asarray(fit.vcomp, dtype=float), strict=True))
    out = {name: max(0.0, float(fitted[n])) for n, (name, _) in zip(names, factors, strict=True)}
    out[RESIDUAL] = float(fit.scale)
    texts = " ".join(str(w.message) for w in caught)
    if "boundary" in texts or any(v == 0.0 for v in out.values()):
        # the optimum lies where a component is 0: the optimiser's "did not converge" is about that edge
        return out, ("a component is at or near 0 (REML's optimum on the boundary of its space): the runs show no "
                     "spread from it beyond the residual's")
    if not fit.converged:
        return out, "REML did not converge: read the estimates as rough"
    return out, ""


def balanced(factors: Sequence[tuple[str, np.ndarray]]) -> bool:
    """Every combination of the factors' levels occurs, each equally often (a complete balanced crossing)."""
    combos = pd.Series(list(zip(*(codes.tolist() for _, codes in factors), strict=True))).value_counts()
    return len(combos) == int(np.prod([codes.max() + 1 for _, codes in factors])) and combos.nunique() == 1


def reml_balanced(values: np.ndarray, factors: Sequence[tuple[str, np.ndarray]]) -> dict[str, float]:
    """REML's estimates on a complete balanced crossing, in closed form: the ANOVA estimates where none is negative;
    else the factor whose estimate is most negative is put at 0 and its sum of squares pooled into the residual's,
    and the rest estimated again (REML's optimum on the boundary), until none is negative. Checked against a
    brute-force maximum of the REML likelihood (tests/unit/analysis/test_variance.py)."""
    y = np.asarray(values, dtype=float)[None]
    active = list(factors)
    while True:
        raw = anova_components(y, active, cut=False)
        worst = min(active, key=lambda f: raw[f[0]][0], default=None)
        if worst is None or raw[worst[0]][0] >= 0.0:
            break
        active = [f for f in active if f[0] != worst[0]]
    return {**{name: float(raw[name][0]) if name in raw else 0.0 for name, _ in factors},
            RESIDUAL: float(raw[RESIDUAL][0])}


def anova_components(values: np.ndarray, factors: Sequence[tuple[str, np.ndarray]], cut: bool = True
                     ) -> dict[str, np.ndarray]:
    """The ANOVA (method of moments) estimates on a complete balanced crossing, vectorised over the rows of
    `values` ([B, N]): E[MS_f] = var_residual + (N / L_f) var_f, so var_f = (MS_f - MS_e) / (N / L_f), cut at 0
    (`cut`) as REML's boundary is; var_residual = MS_e, the sums of squares of factors not given pooled into it."""
    y = np.atleast_2d(np.asarray(values, dtype=float))
    n = y.shape[1]
    grand = y.mean(axis=1, keepdims=True)
    total = ((y - grand) ** 2).sum(axis=1)
    out, explained, df_used = {}, np.zeros(len(y)), 0
    mean_squares = {}
    for name, codes in factors:
        levels = int(codes.max()) + 1
        onehot = np.eye(levels)[codes]  # [N, L]
        means = (y @ onehot) / onehot.sum(axis=0)
        ss = (n / levels) * ((means - grand) ** 2).sum(axis=1)
        explained += ss
        df_used += levels - 1
        mean_squares[name] = (ss / (levels - 1), n / levels)
    ms_e = (total - explained) / (n - 1 - df_used)
    for name, (ms, k) in mean_squares.items():
        out[name] = np.maximum(0.0, (ms - ms_e) / k) if cut else (ms - ms_e) / k
    out[RESIDUAL] = ms_e
    return out


def intervals(est: dict[str, float], factors: Sequence[tuple[str, np.ndarray]], resamples: int = BOOT_RESAMPLES,
              seed: int = BOOT_SEED) -> tuple[dict[str, tuple[float, float]], str | None]:
    """The parametric bootstrap of a balanced crossing's components: scores simulated from `est` (each factor's
    level effects and the residual normal), refitted by `anova_components`. Returns each component's 95%
    percentile interval and the dominant component (None: no component's lead over the largest other has an
    interval above 0)."""
    rng = np.random.default_rng(seed)
    n = len(factors[0][1])
    sim = np.sqrt(est[RESIDUAL]) * rng.standard_normal((resamples, n))
    for name, codes in factors:
        sim += np.sqrt(est[name]) * rng.standard_normal((resamples, int(codes.max()) + 1))[:, codes]
    got = anova_components(sim, factors)
    tail = (1.0 - CONFIDENCE) / 2.0
    bounds = {k: (float(np.quantile(v, tail)), float(np.quantile(v, 1.0 - tail))) for k, v in got.items()}
    top = max(est, key=lambda k: est[k])
    lead = got[top] - np.max([v for k, v in got.items() if k != top], axis=0)
    return bounds, (top if est[top] > 0.0 and float(np.quantile(lead, tail)) > 0.0 else None)


def variance_table(scores_df: pd.DataFrame, sources: Sequence[str] = ENCODER_SOURCES) -> pd.DataFrame:
    """One row per component of each cell (task, system, init_label) whose runs vary two sources or more (the
    scores frame with its `seeds` column): n runs, component (a factor or RESIDUAL), levels (of a factor), df,
    variance and sd (points^2, points), share of the total, ci_low / ci_high (the variance's 95% interval,
    `intervals`; NaN for an incomplete crossing), dominant (only where the interval of its lead says so), note. Cells that vary one source or none
    are left out; cells that vary two but cannot separate them get one row with the reason."""
    if scores_df.empty or "seeds" not in scores_df:
        return pd.DataFrame(columns=COLUMNS)
    rows: list[dict[str, Any]] = []
    for key, cell in scores_df.groupby(list(CELL), sort=False):
        factors = seed_factors(cell["seeds"].tolist(), sources)
        if len(factors) < 2:
            continue
        head = {**dict(zip(CELL, key, strict=True)), "n": len(cell)}
        est, note = components(cell["value"].to_numpy(dtype=float), factors)
        if not est:
            rows.append({**head, "component": " x ".join(n for n, _ in factors), "levels": math.nan,
                         "df": math.nan, "variance": math.nan, "sd": math.nan, "share": math.nan,
                         "ci_low": math.nan, "ci_high": math.nan, "dominant": False, "note": note})
            continue
        total = sum(est.values())
        levels = {name: len(set(codes.tolist())) for name, codes in factors}
        if balanced(factors) and total > 0:
            bounds, top = intervals(est, factors)
        else:  # an incomplete crossing: estimates without an interval, and no source named dominant
            bounds, top = {}, None
            note = "; ".join(x for x in (note, "incomplete crossing: no intervals, no dominant source") if x)
        df = {name: levels[name] - 1 for name in levels}
        df[RESIDUAL] = len(cell) - 1 - sum(df.values())
        for name, var in est.items():
            low, high = bounds.get(name, (math.nan, math.nan))
            rows.append({**head, "component": name, "levels": levels.get(name, math.nan), "df": df[name],
                         "variance": var, "sd": math.sqrt(var), "share": var / total if total > 0 else math.nan,
                         "ci_low": low, "ci_high": high, "dominant": name == top, "note": note})
    return pd.DataFrame(rows, columns=list(COLUMNS))
