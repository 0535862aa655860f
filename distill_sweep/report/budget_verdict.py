"""The tuning section's cost and budget-vs-verdict parts: each arm's trials and their measured cost (with its unit),
and for each pair of arms of one task the comparison of their expected best at every budget, with the budgets
where the winner flips (analysis/budget_verdict.py), as a table, an SVG line chart and `budget_verdict.csv`.

report/checklist.py calls these: `arm_cost` for each arm's entry, `cost_text` in its lines, `section` in the
report's tuning section, `verdict_budget_text` in the checklist.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from itertools import combinations
from typing import Any

import pandas as pd

from distill_sweep.analysis.budget_verdict import (
    ESTIMATORS,
    BudgetPoint,
    by_cost,
    by_trials,
    crossovers,
    leader,
    verdict_text,
)
from distill_sweep.report.svg import PALETTE, legend

UNITS = {"seconds": "seconds: GPU where measured, else CPU", "flops": "FLOPs"}
NAMES = {"dodge": "Dodge et al.", "tang": "Tang et al. (unbiased)"}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def arm_cost(records: Sequence[dict[str, Any]], unit: str = "trials") -> dict[str, Any]:
    """The measured cost of an arm's trials from their records' `cost` blocks: their count, the sums of CPU-seconds
    (a pack member's share), GPU-seconds and FLOPs (None where no record has it), how many records hold no cost,
    and `unit`, what the arm's budget was counted in (tune.budget_by)."""
    cpu, gpu, flops, shares, counted = 0.0, None, None, 0, 0
    for record in records:
        cost = record.get("cost")
        if not isinstance(cost, dict) or not _number(cost.get("cpu_seconds")) or cost.get("cpu_seconds") < 0:
            continue
        counted += 1
        cpu += float(cost.get("cpu_seconds"))
        if _number(cost.get("gpu_seconds")):
            gpu = (gpu or 0.0) + float(cost.get("gpu_seconds"))
        if _number(cost.get("flops")):
            flops = (flops or 0.0) + float(cost.get("flops"))
        shares += isinstance(cost.get("share"), dict)
    return {"unit": unit, "records": counted, "without_cost": len(records) - counted, "cpu_seconds": cpu,
            "gpu_seconds": gpu, "flops": flops, "pack_shares": shares}


def cost_text(cost: dict[str, Any]) -> str:
    """`12 trial records: 3.4 CPU-seconds, 1.2e+09 FLOPs (budget by flops)`, and what is left out."""
    parts = [f"{cost['cpu_seconds']:.4g} CPU-seconds"]
    if cost.get("gpu_seconds") is not None:
        parts.append(f"{cost['gpu_seconds']:.4g} GPU-seconds")
    parts.append(f"{cost['flops']:.3g} FLOPs" if cost.get("flops") is not None else "FLOPs not counted")
    shares = f", {cost['pack_shares']} of them a pack member's share" if cost.get("pack_shares") else ""
    left = f"; {cost['without_cost']} record(s) with no cost (written before costs were measured)" \
        if cost.get("without_cost") else ""
    return (f"{cost['records']} trial record(s): {', '.join(parts)}{shares} (budget by {cost.get('unit', 'trials')})"
            f"{left}")


def _spent(cost: dict[str, Any]) -> float | None:
    """What the arm's budget unit says it spent (None: trials, or not measured)."""
    unit = cost.get("unit")
    if unit == "flops":
        return cost.get("flops")
    if unit == "seconds":
        return cost.get("gpu_seconds") if cost.get("gpu_seconds") is not None else cost.get("cpu_seconds")
    return None


def _studies(arm: dict[str, Any]) -> int:
    """How many studies the arm was tuned by (tune.studies; chosen.json's `studies` lists them)."""
    return len(arm["studies"]) if isinstance(arm.get("studies"), list) and arm["studies"] else 1


def verdict_budget_text(arm: dict[str, Any]) -> str:
    """The budget the grid's verdict was made at: the values chosen after the arm's completed trials (and their
    cost, in the unit its budget was counted in); with several studies, the median study's, whose values the grid
    ran, with every study's cost beside it (each study had the budget)."""
    cost = arm.get("cost") or {}
    unit = cost.get("unit", "trials")
    name = "FLOPs" if unit == "flops" else "seconds"
    after, spent, studies = arm["completed_trials"], _spent(cost), ""
    each = {s.get("study"): s for s in arm.get("study_trials") or []}
    if _studies(arm) > 1 and arm.get("median_study") in each:
        median = each[arm["median_study"]]
        after, spent = median["completed"], _spent(median["cost"])
        costs = [_spent(s["cost"]) for s in each.values()]
        spread = (f", each study's {', '.join(f'{c:.4g}' for c in costs)} {name}"
                  if all(c is not None for c in costs) else "")
        studies = (f" by its median study (study {arm['median_study']}, of {_studies(arm)} with the same budget"
                   f"{spread})")
    if spent is not None:
        return (f"the grid's comparison is at the values chosen{studies} after {after} trial(s) costing "
                f"{spent:.4g} {name} (a budget in {unit}); at another budget the winner may differ: see the "
                "budget-vs-verdict table")
    return (f"the grid's comparison is at the values chosen{studies} after {after} trial(s) (a budget in "
            "trials); at another budget the winner may differ: see the budget-vs-verdict table")


def budget_words(arm: dict[str, Any]) -> str:
    """`a budget of 8` (trials), or the budget in cost: `a budget of 1.2e+10 FLOPs` (tune.budget) or `a budget in
    FLOPs of tune.trials=8 x the mean first-trial cost`."""
    unit = (arm.get("cost") or {}).get("unit", "trials")
    studies = f"{_studies(arm)} studies, each with " if _studies(arm) > 1 else ""
    if unit == "trials":
        return f"{studies}a budget of {arm['trials']}"
    name = "FLOPs" if unit == "flops" else "seconds"
    budget = arm.get("budget")
    if _number(budget):
        return f"{studies}a budget of {budget:.4g} {name}"
    return f"{studies}a budget in {name} of tune.trials={arm['trials']} x the mean first-trial cost"


def trials_cell(arm: dict[str, Any]) -> str:
    """The report's trials cell: `3/8` (completed of the budget), or `5 (budget in flops)`; with S studies, their
    trials together (`12/12 over 3 studies`)."""
    unit = (arm.get("cost") or {}).get("unit", "trials")
    studies = f" over {_studies(arm)} studies" if _studies(arm) > 1 else ""
    return f"{arm['completed_trials']}/{arm['trials'] * _studies(arm)}{studies}" if unit == "trials" else \
        f"{arm['completed_trials']} (budget in {unit}){studies}"


def _label(arm: dict[str, Any]) -> str:
    return f"{arm['objective']} {arm['init']} ({arm['task']})"


def pairs(arms: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every pair of arms of one task and metric, each with trial scores."""
    return [(a, b) for a, b in combinations(arms, 2)
            if a["task"] == b["task"] and a.get("metric") == b.get("metric") and a["trial_scores"]
            and b["trial_scores"]]


def comparisons(arms: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pair's comparison by trials and, where both budgets were in cost and every trial's cost is known, by
    cost."""
    out = []
    for a, b in pairs(arms):
        entry = {"a": a, "b": b, "axes": {"trials": by_trials(a["trial_scores"], b["trial_scores"])}}
        ca, cb = a.get("cost") or {}, b.get("cost") or {}
        unit = ca.get("unit")
        if unit in ("seconds", "flops") and unit == cb.get("unit") and not ca.get("without_cost") \
                and not cb.get("without_cost"):
            spent_a, spent_b = _spent(ca), _spent(cb)
            if spent_a and spent_b and ca.get("records") and cb.get("records"):
                entry["axes"][unit] = by_cost(a["trial_scores"], b["trial_scores"], spent_a / ca["records"],
                                              spent_b / cb["records"])
        out.append(entry)
    return out


def _rows(points: Sequence[BudgetPoint], unit: str) -> list[list[str]]:
    rows = []
    for p in points:
        budget = str(int(p.budget)) if unit == "trials" else f"{p.budget:.4g}"
        cells = [budget, f"{p.n_a} / {p.n_b}"]
        for estimator in ESTIMATORS:
            a, b = (p.dodge_a, p.dodge_b) if estimator == "dodge" else (p.tang_a, p.tang_b)
            diff = p.difference(estimator)
            cells += [f"{100 * a:.2f} / {100 * b:.2f}", f"{100 * diff:+.2f}",
                      {1: "A", -1: "B", 0: "tie"}[leader(diff)]]
        rows.append(cells)
    return rows


HEADERS = ["budget", "trials A / B", "Dodge A / B", "A − B", "ahead", "Tang A / B", "A − B", "ahead"]


def section(doc: Any, files_out: dict[str, Any], arms: Sequence[dict[str, Any]]) -> None:
    """The report's budget-vs-verdict part (nothing where no two arms of a task were tuned)."""
    found = comparisons(arms)
    if not found:
        return
    doc.heading("Budget vs verdict")
    doc.text("for each pair of arms of a task: their expected best holdout score (in points) at each tuning budget, "
             "by Dodge et al.'s estimator and Tang et al.'s unbiased one, the difference A − B, which arm is ahead, "
             "and the budgets where the winner flips (a crossover); with budgets in cost, also at each cost step "
             "(each arm affording cost / its mean trial cost trials). Every row in budget_verdict.csv")
    rows_csv = []
    for entry in found:
        a, b = entry["a"], entry["b"]
        for unit, points in entry["axes"].items():
            if not points:
                continue
            words = verdict_text(points, "A", "B", "trials" if unit == "trials" else UNITS.get(unit, unit))
            doc.text(f"A = {_label(a)}, B = {_label(b)}, budget in {unit}: "
                     + "; ".join(f"{NAMES[e]}: {words[e]}" for e in ESTIMATORS))
            doc.table(HEADERS, _rows(points, unit))
            doc.figure(verdict_svg(points, f"{_label(a)} − {_label(b)}", unit) + legend(
                [(f"A − B, {NAMES[e]}", PALETTE[i], "" if e == "dodge" else "6 3") for i, e in enumerate(ESTIMATORS)]))
            rows_csv += [{"task": a["task"], "arm_a": a["study"], "arm_b": b["study"], "axis": unit,
                          "budget": p.budget, "n_a": p.n_a, "n_b": p.n_b, "dodge_a": p.dodge_a, "dodge_b": p.dodge_b,
                          "tang_a": p.tang_a, "tang_b": p.tang_b, "dodge_diff": p.difference("dodge"),
                          "tang_diff": p.difference("tang"),
                          "crossover_dodge": p.budget in crossovers([q.difference("dodge") for q in points],
                                                                    [q.budget for q in points]),
                          "crossover_tang": p.budget in crossovers([q.difference("tang") for q in points],
                                                                   [q.budget for q in points])}
                         for p in points]
    files_out["budget_verdict.csv"] = pd.DataFrame(rows_csv)


def verdict_svg(points: Sequence[BudgetPoint], title: str, unit: str, width: int = 460, height: int = 260) -> str:
    """A − B against the budget, one line per estimator, the zero line, and a dashed vertical at each crossover;
    every point's tooltip has its numbers."""
    if not points:
        return ""
    pad_l, pad_r, pad_t, pad_b = 52, 12, 24, 38
    xs = [p.budget for p in points]
    diffs = {e: [100 * p.difference(e) for p in points] for e in ESTIMATORS}
    values = [0.0, *(v for d in diffs.values() for v in d)]
    y0, y1 = min(values), max(values)
    y0, y1 = (y0 - 1, y1 + 1) if y1 - y0 < 1e-9 else (y0 - 0.08 * (y1 - y0), y1 + 0.08 * (y1 - y0))
    x0, x1 = min(xs), max(xs)

    def px(x: float) -> float:
        return pad_l + (x - x0) / ((x1 - x0) or 1.0) * (width - pad_l - pad_r)

    def py(y: float) -> float:
        return height - pad_b - (y - y0) / (y1 - y0) * (height - pad_t - pad_b)

    axis = "trials n" if unit == "trials" else f"budget ({UNITS.get(unit, unit)})"
    out = [f'<svg class="budget-verdict" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="{escape(title)}">',
           f'<text x="{width / 2:.0f}" y="15" text-anchor="middle" font-size="13">{escape(title)}</text>',
           f'<rect x="{pad_l}" y="{pad_t}" width="{width - pad_l - pad_r}" height="{height - pad_t - pad_b}" '
           'fill="none" stroke="#999"/>',
           f'<line class="zero" x1="{pad_l}" x2="{width - pad_r}" y1="{py(0):.1f}" y2="{py(0):.1f}" stroke="#666"/>',
           f'<text x="{(pad_l + width - pad_r) / 2:.0f}" y="{height - 6}" text-anchor="middle" font-size="11">'
           f'{escape(axis)}</text>',
           f'<text x="12" y="{(pad_t + height - pad_b) / 2:.0f}" text-anchor="middle" font-size="11" '
           f'transform="rotate(-90 12 {(pad_t + height - pad_b) / 2:.0f})">A − B, expected best (points)</text>']
    for k in range(5):
        y = y0 + (y1 - y0) * k / 4
        out.append(f'<text x="{pad_l - 6}" y="{py(y) + 4:.1f}" text-anchor="end" font-size="10">{y:+.1f}</text>')
    for x in sorted({xs[0], xs[-1], *xs[:: max(1, len(xs) // 6)]}):
        label = f"{int(x)}" if unit == "trials" else f"{x:.3g}"
        out.append(f'<text x="{px(x):.1f}" y="{height - pad_b + 14}" text-anchor="middle" font-size="10">'
                   f'{label}</text>')
    for i, estimator in enumerate(ESTIMATORS):
        colour, dash = PALETTE[i], "" if estimator == "dodge" else ' stroke-dasharray="6 3"'
        for flip in crossovers(diffs[estimator], xs):
            out.append(f'<line class="crossover" x1="{px(flip):.1f}" x2="{px(flip):.1f}" y1="{pad_t}" '
                       f'y2="{height - pad_b}" stroke="{colour}" stroke-opacity="0.6" stroke-dasharray="3 3"/>')
        line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, diffs[estimator], strict=True))
        tips = "; ".join(f"{x:g}: {y:+.2f}" for x, y in zip(xs, diffs[estimator], strict=True))
        out.append(f'<g><title>A − B, {escape(NAMES[estimator])}: {escape(tips)}</title>'
                   f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.6"{dash}/>'
                   + "".join(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.4" fill="{colour}"/>'
                             for x, y in zip(xs, diffs[estimator], strict=True)) + "</g>")
    out.append("</svg>")
    return "".join(out)


__all__ = ["arm_cost", "budget_words", "comparisons", "cost_text", "pairs", "section", "trials_cell",
           "verdict_budget_text", "verdict_svg"]
