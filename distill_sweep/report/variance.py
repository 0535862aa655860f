"""The variance-components table of the report: where a grid varies more than one source of variance (the config's
`seeds` block), how much of each cell's spread each source explains and which dominates (analysis/variance.py)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from distill_sweep.analysis.variance import RESIDUAL, variance_table
from distill_sweep.report.render import Doc, fmt_num

TITLE = "Variance components: which source of variance dominates each cell's spread"


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
             "MixedLM), as sd in points and share of the total; levels: the values a source took (a component "
             "from L levels rests on L - 1 degrees of freedom: rough at 3); dominant: the largest component")
    headers = ["task", "row", "init", "n runs", "components: sd in points (share, levels)", "dominant", "note"]
    rows = []
    for (task, system, init), cell in table.groupby(["task", "system", "init_label"], sort=False):
        first = cell.iloc[0]
        estimated = pd.notna(first["variance"])  # else one row: the factors it could not separate
        dominant = cell.loc[cell["dominant"], "component"].tolist()
        rows.append([str(task), str(system), str(init), str(first["n"]),
                     "; ".join(_part(r) for r in cell.to_dict("records")) if estimated else first["component"],
                     dominant[0] if dominant else "-", str(first["note"])])
    doc.table(headers, rows)
    files["variance_components.csv"] = table


def _part(r: dict[str, Any]) -> str:
    """"data_order 0.91 (12%, 3 levels)": a component's sd, its share and a source's levels."""
    levels = f"{int(r['levels'])} levels" if pd.notna(r["levels"]) else ""
    share = f"{fmt_num(100 * r['share'], '.0f')}%" if pd.notna(r["share"]) else ""  # none: no spread at all
    inside = ", ".join(x for x in (share, levels) if x)
    return f"{r['component']} {fmt_num(r['sd'], '.2f')}" + (f" ({inside})" if inside else "")
