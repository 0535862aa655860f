"""Table 3's objective x init interaction in the report: a note under the table saying what the test found, and a
section with every pair of objectives and inits (analysis/interaction.py computes them)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from distill_sweep.report.render import Doc, fmt_ci, fmt_num, fmt_p

TITLE = "Table 3: does the init effect differ between objectives (objective x init interaction)"
RULE_TEXT = ("a contrast is called by the same rule as a pair: significant after Holm and, where the runs keep dev "
             "predictions, carried by the multi-bootstrap over seeds and dev examples (report/checks.py)")


def _name(r: dict[str, Any]) -> str:
    return f"{r['a']} vs {r['b']} ({r['init_x']} - {r['init_y']})"


def _detectable(value: float) -> str:
    return "\u2014" if math.isnan(value) else f"\u00b1{value:.2f}"


def family_text(inter: pd.DataFrame, family: int) -> str:
    """What the interaction's Holm family holds."""
    k = int(inter["testable"].sum())
    return (f"Holm over one family of {k + family}: the {k} testable interaction tests and the table's {family} "
            "other testable verdict tests (its rows' init pairs, bold, the difference map's cells)")


def table_note(inter: pd.DataFrame, alpha: float, family: int) -> str:
    """Table 3's claim as tested: which pairs of objectives have an init effect that differs, after Holm."""
    if inter.empty:
        return "objective x init interaction: not testable (fewer than two objectives or two inits)"
    found = [_name(r) for r in inter.to_dict("records") if r["significant_holm"]]
    k = int(inter["testable"].sum())
    if not k:
        return (f"objective x init interaction: none of its {len(inter)} contrasts is testable (each needs two (task, "
                f"seed) units with all four runs and differences that vary; section '{TITLE}' says why)")
    verdict = ("the init effect differs for " + ", ".join(found)) if found else "no contrast is called"
    open_ = [f"{_name(r)} {fmt_num(r['diff'], '+.2f')} {fmt_ci(r['ci_low'], r['ci_high'])}: an interaction below "
             f"\u00b1{r['detectable']:.2f} points cannot be ruled out"
             for r in inter.to_dict("records") if r["testable"] and not r["significant_holm"]]
    rest = ("; not called, and not shown absent (each with its interval, and the interaction its units would detect "
            "with 80% power at the family's first Holm level): " + "; ".join(open_)) if open_ else ""
    return (f"objective x init interaction (the paper's claim that the init matters for some objectives and not for "
            f"others): {verdict} at alpha={alpha} after Holm{rest} ({k} of {len(inter)} contrasts testable; "
            f"{family_text(inter, family)}; {RULE_TEXT}; section '{TITLE}')")


def interaction_section(doc: Doc, files: dict[str, Any], inter: pd.DataFrame, alpha: float, family: int) -> None:
    """Every pair of objectives and inits: the init effects, their difference, its interval, t, p and Holm's p."""
    doc.heading(TITLE)
    if inter.empty:
        doc.text("no contrast to test (fewer than two objectives or two inits with completed runs)")
        return
    doc.text("init effect of an objective A for inits x, y: A_x - A_y at one (task, seed); interaction contrast: "
             "(A_x - A_y) - (B_x - B_y) over the units where all four runs completed (a unit: a task's master "
             "seed, its runs that vary another source's seed averaged first), pooled over tasks; every pair of inits "
             "(not the best against the worst, which the same scores would pick); "
             f"two-sided one-sample t-test of the contrast (the paired t-test of the two init effects); "
             f"{100 * (1 - alpha):g}% CI: the Student t-interval of its mean; {family_text(inter, family)}; "
             f"{RULE_TEXT}; detectable: the interaction its units would detect with 80% power at Holm's first-step "
             "level, at the contrasts' observed spread: below it, a contrast that is not called cannot rule one out")
    headers = ["A", "B", "inits x - y", "n units", "effect A", "effect B", "diff", f"{100 * (1 - alpha):g}% CI",
               "t", "p", "p (Holm)", "detectable (80% power)", "note"]
    rows = [[r["a"], r["b"], f"{r['init_x']} - {r['init_y']}", str(r["n"]), fmt_num(r["effect_a"], "+.2f"),
             fmt_num(r["effect_b"], "+.2f"), fmt_num(r["diff"], "+.2f"), fmt_ci(r["ci_low"], r["ci_high"]),
             fmt_num(r["t"], ".2f"), fmt_p(r["p"]), fmt_p(r["p_holm"]), _detectable(r["detectable"]),
             r["note"] if isinstance(r["note"], str) else ""]
            for r in inter.to_dict("records")]
    doc.table(headers, rows)
    files["interaction_table3.csv"] = inter
