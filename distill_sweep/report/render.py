"""Renderers: the table model and test results as terminal text, Markdown, LaTeX (booktabs) and CSV."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
from tabulate import tabulate

from distill_sweep.analysis.paper import GLUE_TASKS, METRIC_ABBREV, task_label, task_order
from distill_sweep.analysis.stats import BOOTSTRAP_MIN_N, CI_TEXT, CONFIDENCE
from distill_sweep.report.tables import Cell, Table

MISSING = "—"
# the best cell (tables.mark_best): bold, and in plain text a dagger, never "*" (significance after Holm)
BEST_MARK = "†"
BOLD = {"terminal": "{}" + BEST_MARK, "markdown": "**{}**", "latex": "\\textbf{{{}}}"}
# a cell whose runs all scored the same (±0.00 with n >= 2): said in words under the table (`same_runs_note`)
SAME_MARK = "§"
SAME_MARK_STYLE = {"terminal": SAME_MARK, "markdown": SAME_MARK, "latex": "\\S{}"}
ONE_EXAMPLE_BELOW = 1000  # dev sets smaller than this get the line saying what one example weighs


def one_example_text(task: str, n: int) -> str:
    """What one of a task's `n` dev examples weighs: 100/n points of accuracy, the smallest step a run's score on
    that dev set can take."""
    return (f"{task_label(task)}: {n} dev examples, so one example is 100/{n} = {100 / n:.2g} points of accuracy (of "
            "F1 or MCC about as much), the smallest step a run's score can take")



def fmt_cell(cell: Cell, style: str, show_n: bool = True) -> str:
    """`mean±std (n)`; "—" (n) when missing. style: terminal (best marked †), markdown, latex."""
    if not cell.present:
        text = "--" if style == "latex" else MISSING
        return f"{text} ({cell.n})" if show_n else text
    pm = "$\\pm$" if style == "latex" else "±"
    body = f"{cell.mean:.1f}" + ("" if math.isnan(cell.std) else f"{pm}{cell.std:.2f}")
    body += SAME_MARK_STYLE[style] if cell.runs_agree else ""
    if cell.bold:
        body = BOLD[style].format(body)
    return f"{body} ({cell.n})" if show_n else body


def fmt_avg(cell: Cell, style: str) -> str:
    if not cell.present:
        return "--" if style == "latex" else MISSING
    body = f"{cell.mean:.1f}"
    return BOLD[style].format(body) if cell.bold else body


def latex_escape(text: str) -> str:
    repl = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
    return "".join(repl.get(ch, ch) for ch in text)


def col_header(task: str, metric: str) -> str:
    return f"{task_label(task)} ({METRIC_ABBREV.get(metric, metric)})"


def table_rows(table: Table, style: str) -> tuple[list[str], list[list[str]]]:
    headers = [*table.row_headers, *(col_header(t, table.metrics[t]) for t in table.tasks), "Avg"]
    body = [[*row.labels, *(fmt_cell(row.cells[t], style) for t in table.tasks), fmt_avg(row.cells["avg"], style)]
            for row in table.rows]
    return headers, body


def table_footnotes(table: Table, ddof: int, selection: str) -> list[str]:
    """`selection` says which epoch the scores come from (store.WHICH_TEXT)."""
    best = table.best_note or "no best marked"
    notes = [f"mean±std over seeds (std with ddof={ddof}), (n) = master seeds per cell (the unit of replication); dev scores: {selection}; "
             f"bold ({BEST_MARK} in plain text): {best}" + (" (within each row group)" if len(table.row_headers) > 1
                                                            else "")
             + f"; each cell's {ci_name(table.ci_method)} is in the CSV (ci_low, ci_high) and report.html; a cell "
             "whose runs all scored the same has no interval (no spread to estimate one from), not one of width 0"]
    small = sorted({c.n for r in table.rows for t, c in r.cells.items() if t != "avg" and 2 <= c.n < BOOTSTRAP_MIN_N})
    if table.ci_method != "t" and small:
        notes.append(f"caution: ci={table.ci_method} chosen, but cells have n = {', '.join(map(str, small))} < "
                     f"{BOOTSTRAP_MIN_N}, where a bootstrap CI of the mean covers far less than its nominal level "
                     "(about 75-83% at n = 3-5); ci=t gives the Student t-interval")
    same = same_runs_note(table)
    if same:
        notes.append(same)
    reasons = sorted({r.avg_reason for r in table.rows if r.avg_reason})
    if reasons:
        n = len(table.avg_tasks)
        over = (f"the {n} GLUE tasks" if set(table.avg_tasks) == set(GLUE_TASKS)
                else ", ".join(task_label(t) for t in table.avg_tasks))
        notes.append(f"Avg is over {over} and shown only when all {n} are present (" + "; ".join(reasons) + ")")
    return notes + table.notes


def same_runs_note(table: Table) -> str:
    """The footnote of the SAME_MARK cells ("" where none is): their runs agree exactly, and on a small dev set
    what one example weighs, the step by which two runs' scores could have differed."""
    tasks = task_order({t for r in table.rows for t, c in r.cells.items() if t != "avg" and c.runs_agree})
    if not tasks:
        return ""
    sizes = [f"{task_label(t)}: {table.dev_sizes[t]} dev examples, one example is {100 / table.dev_sizes[t]:.2g} "
             "points" if t in table.dev_sizes else f"{task_label(t)}: dev set size not recorded" for t in tasks]
    return (f"{SAME_MARK} ±0.00: the runs agree exactly, every master seed of the cell scored the same, so there is "
            f"no spread (not a precise one) and no interval ({'; '.join(sizes)}); a score moves in whole examples")


def ci_name(method: str) -> str:
    """A cell interval's name in footnotes and hover text: "95% CI (Student t-interval ...)"."""
    return f"{CONFIDENCE:.0%} CI ({CI_TEXT[method]})"


def render_markdown(table: Table, ddof: int, selection: str) -> str:
    headers, rows = table_rows(table, "markdown")
    notes = "\n".join(f"- {n}" for n in table_footnotes(table, ddof, selection))
    return f"# {table.title}\n\n{tabulate(rows, headers=headers, tablefmt='pipe', disable_numparse=True)}\n\n{notes}\n"


def render_latex(table: Table, ddof: int, selection: str) -> str:
    """A booktabs table. n is printed only where it differs from the table's most common n."""
    ns = [c.n for r in table.rows for t, c in r.cells.items() if t != "avg" and c.n > 0]
    modal = max(set(ns), key=ns.count) if ns else 0
    spec = "l" * len(table.row_headers) + "r" * (len(table.tasks) + 1)
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}", r"\toprule"]
    names = [*table.row_headers, *(task_label(t) for t in table.tasks), "Avg"]
    lines.append(" & ".join(latex_escape(x) for x in names) + r" \\")
    units = [""] * len(table.row_headers) + [METRIC_ABBREV.get(table.metrics[t], table.metrics[t])
                                             for t in table.tasks] + [""]
    lines.append(" & ".join(latex_escape(x) for x in units) + r" \\")
    lines.append(r"\midrule")
    prev_group = None
    for row in table.rows:
        if prev_group is not None and len(table.row_headers) > 1 and row.group != prev_group:
            lines.append(r"\midrule")
        prev_group = row.group
        cells = [fmt_cell(row.cells[t], "latex", show_n=(row.cells[t].n != modal)) for t in table.tasks]
        vals = [*(latex_escape(x) for x in row.labels), *cells, fmt_avg(row.cells["avg"], "latex")]
        lines.append(" & ".join(vals) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    caption = (f"{latex_escape(table.title)}. Mean$\\pm$std over seeds (std with ddof={ddof}), "
               f"n = {modal} master seeds per cell unless shown in parentheses; dev scores: {latex_escape(selection)}; "
               f"{latex_escape(ci_name(table.ci_method))} in the CSV.")
    lines += [rf"\caption{{{caption}}}", rf"\label{{tab:{table.key}}}", r"\end{table}", ""]
    return "\n".join(lines)


def plain_markdown(title: str, headers: list[str], rows: list[list[str]], notes: list[str]) -> str:
    """A table already formatted cell by cell (the decoder tables), as Markdown with its notes."""
    table = tabulate(rows, headers=headers, tablefmt="pipe", disable_numparse=True)
    return f"# {title}\n\n{table}\n\n" + "".join(f"- {n}\n" for n in notes)


def plain_latex(title: str, key: str, headers: list[str], rows: list[list[str]], notes: list[str]) -> str:
    """The same as a booktabs table: the first column left-aligned, the others right; the notes in the caption."""
    def cell(text: str) -> str:  # "1.234±0.010 (3)": the ± as maths, the rest escaped
        return "$\\pm$".join(latex_escape(part) for part in str(text).split("±"))

    spec = "l" + "r" * (len(headers) - 1)
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(cell(h) for h in headers) + r" \\", r"\midrule"]
    lines += [" & ".join(cell(c) for c in row) + r" \\" for row in rows]
    caption = ". ".join([latex_escape(title), *(cell(n) for n in notes)])
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{caption}}}", rf"\label{{tab:{key}}}", r"\end{table}", ""]
    return "\n".join(lines)


def table_csv(table: Table, ddof: int, which: str) -> pd.DataFrame:
    """Tidy numbers behind a table (one row per cell, Avg as task "avg")."""
    out = []
    for row in table.rows:
        for task in [*table.tasks, "avg"]:
            c = row.cells[task]
            flat = task != "avg" and c.present and c.n >= 2 and c.std == 0.0  # all runs equal: no interval
            out.append({"row": row.system, "procedure": row.procedure, "objective": row.objective,
                        "teacher": row.teacher, "student": row.student, "init": row.init, "task": task,
                        "metric": table.metrics.get(task, ""), "mean": c.mean if c.present else math.nan,
                        "std": c.std, "n": c.n if task != "avg" else None, "ci_low": math.nan if flat else c.ci_low,
                        "ci_high": math.nan if flat else c.ci_high,
                        "ci_method": table.ci_method if task != "avg" else "", "best": c.bold, "ddof": ddof,
                        "which": which, "note": row.avg_reason if task == "avg" else
                        ("every run scored the same: no interval" if flat else "")})
    frame = pd.DataFrame(out)
    if not frame.empty:
        frame["n"] = frame["n"].astype("Int64")  # an integer column with blanks for the Avg rows
    return frame


def fmt_p(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return f"{value:.2e}" if value < 1e-3 else f"{value:.4f}"


def fmt_ci(low: float, high: float, digits: int = 2) -> str:
    return "nan" if math.isnan(low) else f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def fmt_seeds(seeds: float) -> str:
    """Seeds needed: "never" where no difference was observed; "nan" unknown."""
    if math.isnan(seeds):
        return "nan"
    return "never" if math.isinf(seeds) else f"{int(seeds)}"


def fmt_num(value: float, spec: str) -> str:
    return "nan" if math.isnan(value) else format(value, spec)


def tests_rows(tests: pd.DataFrame, within: Sequence[str], alpha: float = 0.05) -> tuple[list[str], list[list[str]]]:
    """The tests table; its CI column is the 1 - alpha t-interval of mean(A-B) (stats.paired_t_ci). An untestable
    pair shows "—" for its CI, d, t, p, ASO and seeds (its note says why), never "nan"; a pair of fewer than 3
    matched pairs its d with "(n=2)"."""
    from distill_sweep.report.verdicts import fmt_seeds_range  # the words and formats of the verdicts

    headers = [*within, "A", "B", "n pairs", "mean(A-B)", f"{100 * (1 - alpha):g}% CI", "d", "t", "p", "p (Holm)",
               "ASO A>B", "ASO B>A", "seeds (range)", "note"]
    rows = []
    for r in tests.to_dict("records"):
        ok = bool(r.get("testable", True))
        d = fmt_num(r["d"], ".2f") if ok else MISSING
        if ok and r["n"] < 3 and not math.isnan(r["d"]):
            d += f" (n={r['n']})"
        rows.append([*(str(r[w]) for w in within), r["a"], r["b"], str(r["n"]), fmt_num(r["mean_diff"], "+.2f"),
                     fmt_ci(r["ci_low"], r["ci_high"]) if ok else MISSING, d,
                     *((fmt_num(r["t"], ".2f"), fmt_p(r["p"]), fmt_p(r["p_holm"])) if ok else [MISSING] * 3),
                     fmt_num(r["aso_ab"], ".2f") if ok else MISSING,
                     fmt_num(r["aso_ba"], ".2f") if ok else MISSING,
                     fmt_seeds_range(r.get("seeds_low", r["seeds"]), r.get("seeds_high", r["seeds"])) if ok else MISSING,
                     r["note"]])
    return headers, rows


def pair_name(r: dict[str, Any], within: Sequence[str]) -> str:
    prefix = " ".join(f"{r[w]}:" for w in within)
    return f"{prefix} {r['a']} vs {r['b']}".strip()


def comparison_rows(comp: pd.DataFrame, by_init: bool) -> tuple[list[str], list[list[str]]]:
    """Wide: one row per system[/init], a cell `ours vs paper (delta)` per task present in both."""
    tasks = task_order(set(comp["task"]) - {"avg"})
    cols = [*tasks, "avg"] if (comp["task"] == "avg").any() else tasks
    headers = ["Objective", *(["Init"] if by_init else []),
               *(f"{task_label(t)} (acc)" if t in GLUE_TASKS else ("Avg" if t == "avg" else t) for t in cols)]
    rows = []
    for (system, init), grp in comp.groupby(["system", "init_label"], sort=False):
        cells = {r["task"]: r for r in grp.to_dict("records")}
        line = [system, *([init] if by_init else [])]
        for t in cols:
            r = cells.get(t)
            line.append(MISSING if r is None else
                        f"{r['ours']:.1f} vs {r['paper']:.1f} ({round(r['delta'], 1) or 0.0:+.1f})")  # no "-0.0"
        rows.append(line)
    return headers, rows


def method_comparison_rows(comp: pd.DataFrame, metrics: dict[str, str]) -> tuple[list[str], list[list[str]]]:
    """Another system's table beside ours (report.layout_table): one row per (paper method, our row), a cell
    `ours vs paper (delta)` per task of the paper's table, `— vs paper` where we have no number."""
    tasks = [t for t in dict.fromkeys(comp["task"]) if t != "avg"]
    cols = [*tasks, *(["avg"] if (comp["task"] == "avg").any() else [])]
    headers = ["Paper", "Ours", *(col_header(t, metrics.get(t, "")) if t in metrics else task_label(t) for t in tasks),
               *(["Avg"] if "avg" in cols else [])]
    rows = []
    for (method, name), grp in comp.groupby(["method", "row"], sort=False):
        cells = {r["task"]: r for r in grp.to_dict("records")}
        line = [str(method), str(name)]
        for t in cols:
            r = cells.get(t)
            if r is None:
                line.append(MISSING)
            elif math.isnan(r["ours"]):
                line.append(f"{MISSING} vs {r['paper']:.1f}")
            else:
                line.append(f"{r['ours']:.1f} vs {r['paper']:.1f} ({round(r['delta'], 1) or 0.0:+.1f})")
        rows.append(line)
    return headers, rows


class Doc:
    """Collects the report once and renders it for the terminal (tabulate "simple") and Markdown; the HTML
    page (report.html_page) renders the same blocks plus the figures, which only it shows."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, Any]] = []
        self.later: list[tuple[str, Any]] = []  # blocks kept apart from the sections that made them (`flush_later`)

    def defer(self, kind: str, payload: Any) -> None:
        """A block for a section of its own further down (`flush_later` places it): a number that must not sit
        beside the methods' verdicts (the tests of two runs)."""
        self.later.append((kind, payload))

    def flush_later(self) -> None:
        self.blocks += self.later
        self.later = []

    def heading(self, text: str) -> None:
        self.blocks.append(("h", text))

    def text(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, headers: list[str], rows: list[list[str]], md_rows: list[list[str]] | None = None,
              tips: list[list[str]] | None = None, css: str = "") -> None:
        """`tips`: per-cell hover text of the HTML page (a cell's CI); `css`: its class there."""
        self.blocks.append(("t", (headers, rows, md_rows if md_rows is not None else rows, tips, css)))

    def figure(self, html: str) -> None:
        """An HTML fragment (inline SVG, a details block) that only the HTML page shows."""
        self.blocks.append(("f", html))

    def render(self, markdown: bool) -> str:
        out: list[str] = []
        for kind, payload in self.blocks:
            if kind == "f":
                continue
            if kind == "h":
                out += ["", f"## {payload}" if markdown else f"== {payload} ==", ""]
            elif kind == "p":
                out.append(payload + ("  " if markdown else ""))
            else:
                headers, rows, md_rows, _, _ = payload
                fmt = "pipe" if markdown else "simple"
                if out and out[-1] != "":
                    out.append("")
                out += [tabulate(md_rows if markdown else rows, headers=headers, tablefmt=fmt,
                                 disable_numparse=True), ""]
        return "\n".join(out).strip() + "\n"
