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
"Variance Components", Sec. 6.8), which tests/unit/analysis/test_variance.py checks against the expected mean
squares worked by hand. A component REML puts at 0 (the boundary) is reported as 0 with a note. The dominant source
is the component with the largest estimate, residual included; with L levels a component rests on L - 1 degrees of
freedom, so at 3 levels it is a rough estimate: the table says how many levels each factor had.
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
COLUMNS = (*CELL, "n", "component", "levels", "variance", "sd", "share", "dominant", "note")


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


def variance_table(scores_df: pd.DataFrame, sources: Sequence[str] = ENCODER_SOURCES) -> pd.DataFrame:
    """One row per component of each cell (task, system, init_label) whose runs vary two sources or more (the
    scores frame with its `seeds` column): n runs, component (a factor or RESIDUAL), levels (of a factor), variance
    and sd (points^2, points), share of the total, dominant (the largest), note. Cells that vary one source or none
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
                         "variance": math.nan, "sd": math.nan, "share": math.nan, "dominant": False, "note": note})
            continue
        total = sum(est.values())
        top = max(est, key=lambda k: est[k])
        levels = {name: len(set(codes.tolist())) for name, codes in factors}
        for name, var in est.items():
            rows.append({**head, "component": name, "levels": levels.get(name, math.nan), "variance": var,
                         "sd": math.sqrt(var), "share": var / total if total > 0 else math.nan,
                         "dominant": total > 0 and name == top, "note": note})
    return pd.DataFrame(rows, columns=list(COLUMNS))
