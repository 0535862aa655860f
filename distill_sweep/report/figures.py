"""The HTML report's figures, from the report's own numbers: a heatmap per table, a matrix of the pairwise
tests, dev curves per task, and the hover text of a table's cells (their confidence intervals)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import pandas as pd

from distill_sweep.analysis import aso, stats
from distill_sweep.analysis import curves as dev_curves
from distill_sweep.analysis.paper import METRIC_ABBREV, task_label, task_order
from distill_sweep.report import svg
from distill_sweep.report.render import fmt_ci, fmt_p
from distill_sweep.report.tables import Cell, Table, baseline_p, heat_columns, holm_with_twins, others
from distill_sweep.report.verdicts import fmt_seeds_range


def cell_tip(cell: Cell, method: str = "t") -> str:
    """A cell's hover text: its mean, its CI (named by `method`, the table's ci_method), std and n."""
    if not cell.present:
        return f"no completed run (n = {cell.n})"
    if cell.runs_agree:
        return f"mean {cell.mean:.2f}, n = {cell.n}: every run scored the same, no spread and no interval"
    if math.isnan(cell.ci_low):
        return f"mean {cell.mean:.2f}, n = {cell.n}: one run, no interval"
    return (f"mean {cell.mean:.2f}, {stats.CONFIDENCE:.0%} CI [{cell.ci_low:.2f}, {cell.ci_high:.2f}] "
            f"({stats.CI_TEXT[method]}{', cut at what the metric can be' if cell.ci_cut else ''}), "
            f"std {cell.std:.2f}, n = {cell.n}")


def table_tips(table: Table) -> list[list[str]]:
    """Per cell of the rendered table (labels, tasks, Avg): the hover text of the HTML page."""
    return [[*("" for _ in row.labels), *(cell_tip(row.cells[t], table.ci_method) for t in table.tasks),
             "mean over the tasks' means" if row.cells["avg"].present else row.avg_reason]
            for row in table.rows]


def _row_name(labels: Sequence[str]) -> str:
    return " / ".join(labels)


DIFF_POINTS = 5.0  # the difference maps' colour scale: +-this many points is full colour, whatever the data
SCORE_LIMITS = (0.0, 100.0)  # the score maps' colour scale, in points (-100 for MCC / Pearson below 0)


def table_heatmaps(table: Table, baseline: str | None, alpha: float = 0.05) -> str:
    """The table's means coloured by score on a fixed 0-100 scale; and, when the table has `baseline` rows, each
    row's difference to the baseline row of the same init on a fixed +-DIFF_POINTS scale, washed out where the
    difference is not significant (`baseline_tests`), marked * where it is."""
    cols = heat_columns(table)
    names = [task_label(t) if t != "avg" else "Avg" for t in cols]
    rows = [_row_name(r.labels) for r in table.rows]
    means = [[r.cells[t].mean if r.cells[t].present else math.nan for t in cols] for r in table.rows]
    texts = [[f"{v:.1f}" if not math.isnan(v) else "—" for v in line] for line in means]
    tips = [[f"{name} · {names[j]}: " + (cell_tip(r.cells[t], table.ci_method) if t != "avg" else
                                         (f"Avg {r.cells[t].mean:.2f}" if r.cells[t].present else r.avg_reason))
             for j, t in enumerate(cols)] for name, r in zip(rows, table.rows, strict=True)]
    negative = any(v < 0 for line in means for v in line if not math.isnan(v))
    limits = (-100.0, 100.0) if negative else SCORE_LIMITS
    out = [svg.heatmap(rows, names, means, texts, tips, diverging=False, css="heatmap", limits=limits,
                       legend=f"{table.title}: mean dev score on a fixed {limits[0]:g}-{limits[1]:g} scale (darker = "
                       "higher); grey = no completed run", unit="mean dev score (points)")]
    base = {r.init: r for r in table.rows if r.system == baseline}
    if base:
        deltas = [[(r.cells[t].mean - base[r.init].cells[t].mean) if r.init in base and r.cells[t].present
                   and base[r.init].cells[t].present else math.nan for t in cols] for r in table.rows]
        sig, pvals = baseline_tests(table, base, cols, alpha)
        texts = [[(f"{v:+.1f}" + ("*" if sig[i][j] else "")) if not math.isnan(v) else "—"
                  for j, v in enumerate(line)] for i, line in enumerate(deltas)]
        tips = [[f"{name} · {names[j]}: {v:+.2f} vs {baseline}" + (f", p (Holm) = {fmt_p(pvals[i][j])}"
                                                                  if not math.isnan(pvals[i][j]) else ", not tested")
                 if not math.isnan(v) else f"{name} · {names[j]}: —"
                 for j, v in enumerate(line)] for i, (name, line) in enumerate(zip(rows, deltas, strict=True))]
        quiet = [[not s for s in line] for line in sig]
        out.append(svg.heatmap(rows, names, deltas, texts, tips, diverging=True, css="heatmap delta",
                               limits=(-DIFF_POINTS, DIFF_POINTS), quiet=quiet,
                               legend=f"difference to {baseline} at the same init (blue = better, red = worse; "
                               f"full colour at {DIFF_POINTS:g} points or more); * = p < {alpha} after Holm over "
                               "this map's cells and the table's other verdict tests, one family (paired t-test on "
                               "matched seeds; Avg: matched (task, seed) pairs); "
                               "washed out = not significant, or not testable",
                               unit=f"points vs {baseline}"))
    return '<div class="figures">' + "".join(out) + "</div>"


def baseline_tests(table: Table, base: dict[str, Any], cols: Sequence[str], alpha: float
                   ) -> tuple[list[list[bool]], list[list[float]]]:
    """Per cell of the difference map: whether the row differs from its baseline (two-sided paired t-test on
    matched seeds, tables.baseline_p; Holm over the map's testable cells and the table's other verdict tests,
    tables.others: one family), and the Holm p (NaN: not tested)."""
    baseline = next(iter(base.values())).system if base else None
    cached = table.raw_tests.get("baseline") if table.raw_tests.get("baseline_of") == baseline else None
    raw = cached if cached is not None and list(cols) == heat_columns(table) else baseline_p(table, baseline, cols)
    twin = [col in table.baseline_twins for _ in raw for col in cols]
    flat = holm_with_twins([p for line in raw for p in line], twin, others(table, "baseline"))
    adjusted = [list(flat[i * len(cols):(i + 1) * len(cols)]) for i in range(len(table.rows))]
    return [[bool(p < alpha) for p in line] for line in adjusted], adjusted


def test_tip(r: dict[str, Any]) -> str:
    if not r.get("testable", True):
        return f"{r['a']} vs {r['b']}: n = {r['n']} pairs, mean(A-B) {r['mean_diff']:+.2f}; not testable ({r['note']})"
    return (f"{r['a']} vs {r['b']}: n = {r['n']} pairs, mean(A-B) {r['mean_diff']:+.2f} "
            f"{fmt_ci(r['ci_low'], r['ci_high'])}, d = {r['d']:.2f}, p = {fmt_p(r['p'])}, "
            f"p (Holm) = {fmt_p(r['p_holm'])}, ASO eps_min A>B {r['aso_ab']:.2f} / B>A {r['aso_ba']:.2f}"
            f" (verdict below {r.get('aso_limit', aso.ASO_THRESHOLD):.3g}), seeds needed "
            f"{fmt_seeds_range(r.get('seeds_low', r['seeds']), r.get('seeds_high', r['seeds']))}"
            + (f"; {r['note']}" if r["note"] else ""))


def matrix_text(r: dict[str, Any], sign: float) -> str:
    """A test matrix cell's text: d_z and its marks (* significant after Holm, ▲ ASO better); "(n=2)" where d
    rests on one degree of freedom; "untested" for a pair with no test (no d of ±inf)."""
    if not r.get("testable", True):
        return "untested"
    d = sign * r["d"]
    mark = "*" if r["significant_holm"] else ""
    mark += "▲" if r["aso_better"] == ("A" if sign > 0 else "B") else ""
    text = "d nan" if math.isnan(d) else f"d {d:+.1f}"
    return text + mark + (f" n={r['n']}" if r["n"] < stats.MIN_RELIABLE_PAIRS else "")


def tests_matrix(tests: pd.DataFrame, levels: Sequence[str], title: str, alpha: float) -> str:
    """Rows x columns of the levels: colour = the mean difference of row minus column in points, on a fixed
    +-DIFF_POINTS scale (with 2 seeds d_z can be ±inf for a 0.2-point gap, so it is the text, not the colour),
    washed out where the pair is not significant after Holm; text = d_z with * = significant after Holm,
    ▲ = the row almost stochastically better than the column (ASO, calibrated), "n=2" where d rests on 2 pairs."""
    index = {(r["a"], r["b"]): (r, 1.0) for r in tests.to_dict("records")}
    index.update({(r["b"], r["a"]): (r, -1.0) for r in tests.to_dict("records")})
    values, texts, tips, quiet = [], [], [], []
    for a in levels:
        vline, tline, pline, qline = [], [], [], []
        for b in levels:
            hit = index.get((a, b))
            if a == b or hit is None:
                vline.append(math.nan)
                tline.append("" if a == b else "—")
                pline.append(f"{a} vs {b}: not tested" if a != b else a)
                qline.append(False)
                continue
            r, sign = hit
            vline.append(sign * r["mean_diff"])
            tline.append(matrix_text(r, sign))
            pline.append(test_tip(r))
            qline.append(not r["significant_holm"])
        values.append(vline)
        texts.append(tline)
        tips.append(pline)
        quiet.append(qline)
    legend = (f"{title}: colour = mean difference of row minus column (blue = row better; full colour at "
              f"{DIFF_POINTS:g} points or more), washed out where not significant after Holm; text = Cohen's d_z; "
              f"* = p < {alpha} after Holm; ▲ = row almost stochastically better (ASO, threshold calibrated at the "
              "pair's seeds); n=2: d from 2 pairs (one degree of freedom); hover for the CI")
    return svg.heatmap(list(levels), list(levels), values, texts, tips, diverging=True, css="matrix", legend=legend,
                       unit="mean(row - column), points", limits=(-DIFF_POINTS, DIFF_POINTS), quiet=quiet)


def per_task_matrices(scores: pd.DataFrame, row_order: Sequence[str], alpha: float) -> str:
    """Table 3 per task: every pair of rows (objective and init) tested on the task's seeds; one family over
    every task's pairs together (Holm, and ASO's Bonferroni), so a matrix's marks are corrected for all of them.
    `scores` has a `row` column."""
    tasks = [t for t in task_order(scores["task"].unique())
             if len({r for r in row_order if r in set(scores.loc[scores["task"] == t, "row"])}) >= 2]
    if not tasks:
        return ""
    sub = scores[scores["task"].isin(tasks)]
    tests = stats.paired_tests(sub, "row", ("task",), alpha, levels=list(row_order), group_order=tasks)
    out = []
    for task in tasks:
        present = set(sub.loc[sub["task"] == task, "row"])
        levels = [r for r in row_order if r in present]
        mine = tests[(tests["task"] == task) & tests["a"].isin(present) & tests["b"].isin(present)]
        out.append(tests_matrix(mine, levels, f"Table 3, {task_label(task)}", alpha))
    return '<div class="figures">' + "".join(out) + "</div>"


SMALL_MULTIPLES_ABOVE = 4  # rows in one task's chart; more get a small chart each, the others faint behind
# (unless every row is lone points: marks side by side do not tangle)


@dataclass
class CurvePanel:
    """One chart of the dev curves: a task's rows, or one row of it (small multiples)."""

    title: str
    series: list[svg.Series]  # context series (the task's other rows, faint) first
    boundary: float | None  # between the earlier stages and the scored one; None: scored stage only
    y_limits: tuple[float, float]  # shared by a task's small multiples
    y_label: str

    @property
    def x_label(self) -> str:
        return "epoch (intermediate | scored stage)" if self.boundary is not None else "epoch of the scored stage"


def curve_panels(curves: pd.DataFrame, systems: Sequence[str], inits: Sequence[str] | None
                 ) -> tuple[list[list[CurvePanel]], list[tuple[str, str, str]]]:
    """The dev curves' charts, per task (in task order): one chart of every row, or, with more than
    SMALL_MULTIPLES_ABOVE rows of several epochs, one per row (its inits as dashes) with the others' means faint
    behind; and
    the legend's (label, colour, dash). A point is the mean over seeds at an epoch, its band the t-interval
    of that mean (curves.curve_means); a curve is broken between stages (`scored`)."""
    by = ["system", "init_label"] if inits is not None else ["system"]
    means = dev_curves.curve_means(curves, by)
    if means.empty:
        return [], []
    present = set(means["system"])
    systems = [s for s in systems if s in present] + sorted(present - set(systems))
    colours = {s: svg.PALETTE[i % len(svg.PALETTE)] for i, s in enumerate(systems)}
    levels: list[str | None] = list(inits) if inits is not None else [None]
    dashes = {lab: svg.DASHES[i % len(svg.DASHES)] for i, lab in enumerate(levels)}
    out, keys = [], {}
    for task in task_order(means["task"].unique()):
        sub = means[means["task"] == task]
        lines: dict[str, list[svg.Series]] = {}
        for system, init, label, line in dev_curves.curve_lines(sub, systems, inits):
            lines.setdefault(system, []).append(svg.Series(
                label, line["x"].tolist(), line["mean"].tolist(), line["ci_low"].tolist(), line["ci_high"].tolist(),
                colours[system], dashes[init], parts=line["scored"].astype(int).tolist(),
                n=line["n"].astype(int).tolist()))
            keys[label] = (label, colours[system], dashes[init])
        every = [s for group in lines.values() for s in group]
        boundary = sub["boundary"].dropna()
        metric = str(sub["metric"].iloc[0])
        y_label = f"dev {METRIC_ABBREV.get(metric, metric)} (%)"
        cut = float(boundary.iloc[0]) if not boundary.empty else None
        limits = svg.y_range(every)
        if len(lines) <= SMALL_MULTIPLES_ABOVE or max(len(run) for s in every for run in s.runs()) < 2:
            out.append([CurvePanel(task_label(task), every, cut, limits, y_label)])
            continue
        out.append([CurvePanel(f"{task_label(task)}: {system}",
                               [dataclasses.replace(s, context=True) for other, group in lines.items()
                                if other != system for s in group] + group, cut, limits, y_label)
                    for system, group in lines.items()])
    return out, list(keys.values())


def curve_figures(curves: pd.DataFrame, systems: Sequence[str], inits: Sequence[str] | None) -> str:
    """Per task: the dev metric per epoch, mean over seeds with its t-interval band (`curve_panels`)."""
    panels, keys = curve_panels(curves, systems, inits)
    if not panels:
        return ""
    charts = []
    for task in panels:
        small = len(task) > 1
        charts.append('<div class="figures">' + "".join(
            svg.line_chart(p.title, p.series, x_label=p.x_label, y_label=p.y_label, boundary=p.boundary,
                           y_limits=p.y_limits, width=300 if small else 420, height=210 if small else 260)
            for p in task) + "</div>")
    return "".join(charts) + svg.legend(keys)


def jobs_table(records: pd.DataFrame, link: Callable[[str], str]) -> str:
    """Every record: status, the job, its primary dev score, the first line of its error, a link to it."""
    order = {"failed": 0, "running": 1, "completed": 2}
    ranked = records.assign(_rank=records["status"].map(order).fillna(3)).sort_values(
        ["_rank", "task", "system", "init_label", "seed"], kind="stable")
    heads = ("status", "task", "row", "init", "seed", "dev (primary)", "best epoch", "teacher dev", "wall time",
             "peak memory", "error", "record")
    lines = ['<table class="jobs"><thead><tr>' + "".join(f"<th>{h}</th>" for h in heads) + "</tr></thead><tbody>"]
    for r in ranked.to_dict("records"):
        err = (str(r["error"] or "").strip().splitlines() or [""])[0]
        teacher = (r.get("teacher_dev") or {}).get(r["primary_metric"])
        cells = (r["status"], r["task"], r["system"] or r["objective"], r["init_label"], r["seed"],
                 _num(r["primary"], 100.0, ".1f"), r.get("best_epoch") or "", _num(teacher, 100.0, ".1f"),
                 _num(r.get("wall_time_s"), 1.0, ".0f", " s"), _num(r.get("peak_memory_mb"), 1.0, ".0f", " MB"), err)
        lines.append(f'<tr class="{escape(str(r["status"]))}">' + "".join(f"<td>{escape(str(c))}</td>" for c in cells)
                     + f'<td><a href="{escape(link(r["path"]))}">result.json</a></td></tr>')
    lines.append("</tbody></table>")
    return "".join(lines)


def _num(value: Any, scale: float, spec: str, unit: str = "") -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(v) else f"{v * scale:{spec}}{unit}"


def missing_table(jobs: list[dict[str, Any]], preset: str) -> str:
    """The jobs of a preset's grid that have no record yet: task, objective, init, seed."""
    lines = [f"<details open><summary>{len(jobs)} job(s) of preset {escape(preset)} not started</summary>"
             '<table class="jobs"><thead><tr><th>status</th><th>task</th><th>procedure</th><th>objective</th>'
             "<th>init</th><th>seed</th></tr></thead><tbody>"]
    for j in jobs:
        cells = ("missing", j.get("task"), j.get("procedure", ""), j.get("objective"), j.get("init_spec"), j.get("seed"))
        lines.append('<tr class="missing">' + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
    lines.append("</tbody></table></details>")
    return "".join(lines)
