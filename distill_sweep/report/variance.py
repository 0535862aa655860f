"""The variance-components table of the report: where a grid varies more than one source of variance (the config's
`seeds` block), how much of each cell's spread each source explains, with intervals, and which dominates where the
interval says so (analysis/variance.py)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from distill_sweep.analysis.variance import RESIDUAL, variance_table
from distill_sweep.report.render import Doc, fmt_num

TITLE = "Variance components: how much of each cell's spread each source of variance explains"


def variance_section(doc: Doc, files: dict[str, Any], scores_df: pd.DataFrame) -> None:
    """The table, one row per cell whose runs vary two sources or more; nothing where no cell does."""
    table = variance_table(scores_df)
    if table.empty:
        return
    doc.heading(TITLE)
    doc.text("per cell (task, row, init), over its runs: each source of variance that the runs vary (their seeds "
             "per source, as each record states them; sources that always change together, such as init and "
             "dropout when both follow the master seed, are one) is a crossed random effect, the rest is the "
             f"{RESIDUAL} (the sources' interactions and anything else); variance components by REML (statsmodels "
             "MixedLM), as sd in points, share of the total, the sd's 95% interval (a parametric bootstrap of the "
             "complete crossing, none for an incomplete one) and its degrees of freedom (L - 1 for L levels: at 1 or "
             "2 an estimate says little); dominant: a source named only where the interval of its lead over every "
             "other component lies above 0 ('none clear' otherwise)")
    headers = ["task", "row", "init", "n runs", "components: sd in points [95% CI] (share, levels, df)", "dominant",
               "note"]
    rows = []
    for (task, system, init), cell in table.groupby(["task", "system", "init_label"], sort=False):
        first = cell.iloc[0]
        estimated = pd.notna(first["variance"])  # else one row: the factors it could not separate
        dominant = cell.loc[cell["dominant"], "component"].tolist()
        rows.append([str(task), str(system), str(init), str(first["n"]),
                     "; ".join(_part(r) for r in cell.to_dict("records")) if estimated else first["component"],
                     dominant[0] if dominant else ("none clear" if estimated else "-"), str(first["note"])])
    doc.table(headers, rows)
    files["variance_components.csv"] = table


def _part(r: dict[str, Any]) -> str:
    """"data_order 0.91 [0.10, 1.80] (12%, 3 levels, 2 df)": a component's sd, its interval, its share, a source's
    levels and the degrees of freedom it rests on."""
    levels = f"{int(r['levels'])} levels" if pd.notna(r["levels"]) else ""
    share = f"{fmt_num(100 * r['share'], '.0f')}%" if pd.notna(r["share"]) else ""  # none: no spread at all
    df = f"{int(r['df'])} df" if pd.notna(r.get("df")) else ""
    inside = ", ".join(x for x in (share, levels, df) if x)
    ci = (f" [{math.sqrt(r['ci_low']):.2f}, {math.sqrt(r['ci_high']):.2f}]" if pd.notna(r.get("ci_low")) else "")
    return f"{r['component']} {fmt_num(r['sd'], '.2f')}{ci}" + (f" ({inside})" if inside else "")
