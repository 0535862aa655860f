"""`python -m distill_sweep.report [results_dir] [key=value ...]`: tables, t-tests, paper comparison, plot.

Reads only result.json records (via distill_sweep.stats) and the paper's numbers in results/paper/.
Prints the report and writes it to <results_dir>/tables/ (Markdown, LaTeX with booktabs, CSV, PNG).

Table 1 = one initialisation (default init name "skip": every k-th teacher layer, "4,8,12" for the
paper's 12-layer teacher and 3-layer student), rows = objectives. Table 3 = rows objective x init.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tabulate import tabulate

from distill_sweep import stats

PROG = "distill_sweep.report"
USAGE = (
    f"usage: python -m {PROG} [results_dir] [table=1|3|all] [metric=header|paper] [which=best|final|max] "
    "[ddof=1] [paper=true|false] [preset=NAME] [alpha=0.05] [table1_init=skip] [out=DIR] [paper_dir=DIR]"
)
MISSING = "—"
DEFAULT_PAPER_DIR = Path(__file__).resolve().parents[1] / "results" / "paper"
PAPER_FILES = {"1": "table1_task_specific_objectives.csv", "3": "table3_task_specific_init.csv"}
MAX_LISTED = 30  # failed/running/missing jobs listed individually before "... and N more"


class UsageError(ValueError):
    """A bad command line: reported as one line on stderr, exit code 2."""


# ----------------------------------------------------------------------------- options


@dataclass
class Options:
    results_dir: Path = Path("results")
    table: str = "all"  # "1" | "3" | "all"
    metric: str = "header"  # column metrics: the paper's headers (MRPC F1, CoLA MCC) or "paper" (accuracy)
    which: str = "best"  # see distill_sweep.stats
    ddof: int = 1
    paper: bool = True
    preset: str | None = None
    alpha: float = 0.05
    table1_init: str = "skip"
    out: Path | None = None  # default <results_dir>/tables
    paper_dir: Path = DEFAULT_PAPER_DIR

    @property
    def tables(self) -> list[str]:
        return ["1", "3"] if self.table == "all" else [self.table]

    @property
    def out_dir(self) -> Path:
        return self.out if self.out is not None else self.results_dir / "tables"


def _bool(key: str, value: str) -> bool:
    low = value.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise UsageError(f"{key} must be true or false, got {value!r}")


def _choice(key: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise UsageError(f"{key} must be one of {'|'.join(choices)}, got {value!r}")
    return value


def parse_args(argv: Sequence[str]) -> Options:
    """key=value arguments plus at most one positional results_dir; raises UsageError."""
    opts = Options()
    positional: list[str] = []
    for arg in argv:
        if "=" not in arg:
            if arg.startswith("-"):
                raise UsageError(f"unknown option {arg!r} (arguments are key=value)")
            positional.append(arg)
            continue
        key, value = arg.split("=", 1)
        key = key.strip().lstrip("+")
        if key == "table":
            opts.table = _choice(key, value, ("1", "3", "all"))
        elif key == "metric":
            opts.metric = _choice(key, value, stats.METRIC_MODES)
        elif key == "which":
            opts.which = _choice(key, value, stats.WHICH_CHOICES)
        elif key == "ddof":
            if not value.isdigit():
                raise UsageError(f"ddof must be a non-negative integer, got {value!r}")
            opts.ddof = int(value)
        elif key == "paper":
            opts.paper = _bool(key, value)
        elif key == "preset":
            opts.preset = value or None
        elif key == "alpha":
            try:
                opts.alpha = float(value)
            except ValueError:
                raise UsageError(f"alpha must be a number in (0, 1), got {value!r}") from None
            if not 0.0 < opts.alpha < 1.0:
                raise UsageError(f"alpha must be a number in (0, 1), got {value!r}")
        elif key == "table1_init":
            opts.table1_init = value
        elif key == "out":
            opts.out = Path(value)
        elif key == "paper_dir":
            opts.paper_dir = Path(value)
        elif key == "results_dir":
            positional.append(value)
        else:
            raise UsageError(
                f"unknown argument {key!r} (expected results_dir, table, metric, which, ddof, paper, "
                "preset, alpha, table1_init, out, paper_dir)"
            )
    if len(positional) > 1:
        raise UsageError(f"expected at most one results_dir, got {positional}")
    if positional:
        opts.results_dir = Path(positional[0])
    return opts


# ----------------------------------------------------------------------------- table model


@dataclass
class Cell:
    mean: float = math.nan
    std: float = math.nan
    n: int = 0
    bold: bool = False

    @property
    def present(self) -> bool:
        return self.n > 0 and not math.isnan(self.mean)


@dataclass
class Row:
    labels: tuple[str, ...]  # objective[, init]
    group: str  # rows of one group are compared for "best" (a column, or one objective in Table 3)
    cells: dict[str, Cell]  # task -> cell; "avg" -> Avg (std/n unused)
    avg_reason: str = ""
    init: str = ""  # resolved init label ("4,8,12"), also for Table 1 rows


@dataclass
class Table:
    key: str  # "table1" | "table3"
    title: str
    row_headers: list[str]
    tasks: list[str]
    metrics: dict[str, str]  # task -> metric shown
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def mark_best(rows: Sequence[Row], columns: Sequence[str]) -> None:
    """Bold the best mean per column within each row group, compared at display precision (one
    decimal) so two printed 89.2s are both bold; nothing is bold with fewer than two candidates."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    for members in groups.values():
        for col in columns:
            cands = [r.cells[col] for r in members if col in r.cells and r.cells[col].present]
            if len(cands) < 2:
                continue
            best = max(round(c.mean, 1) for c in cands)
            for c in cands:
                c.bold = round(c.mean, 1) == best


def build_table(
    key: str,
    title: str,
    records: pd.DataFrame,
    agg: pd.DataFrame,
    averages: pd.DataFrame,
    by_init: bool,
    metric_mode: str,
) -> Table:
    """Rows and columns come from every selected record (any status), so objectives/tasks whose runs
    all failed or are still running still show up, as missing cells with n = 0."""
    tasks = stats.task_order(records["task"].unique()) if not records.empty else []
    primary = records.groupby("task")["primary_metric"].first().to_dict() if not records.empty else {}
    metrics = {t: stats.column_metric(t, metric_mode, primary.get(t)) for t in tasks}
    table = Table(key=key, title=title, row_headers=["Objective", "Init"] if by_init else ["Objective"],
                  tasks=tasks, metrics=metrics)
    cell_index = {(r.objective, r.init_label, r.task): r for r in agg.itertuples(index=False)}
    avg_index = {(r.objective, r.init_label): r for r in averages.itertuples(index=False)}
    inits = stats.init_order(records)
    for obj in stats.objective_order(records["objective"].unique() if not records.empty else []):
        present = set(records.loc[records["objective"] == obj, "init_label"])
        for init in [i for i in inits if i in present]:
            cells = {}
            for task in tasks:
                hit = cell_index.get((obj, init, task))
                cells[task] = Cell(hit.mean, hit.std, int(hit.n)) if hit is not None else Cell()
            avg = avg_index.get((obj, init))
            if avg is not None and not math.isnan(avg.avg):
                cells["avg"], reason = Cell(float(avg.avg), math.nan, 1), ""
            else:
                cells["avg"] = Cell()
                reason = avg.reason if avg is not None else "no completed runs"
            labels = (obj, init) if by_init else (obj,)
            table.rows.append(Row(labels=labels, group=obj if by_init else "", cells=cells,
                                  avg_reason=reason, init=init))
    mark_best(table.rows, [*tasks, "avg"])
    return table


# ----------------------------------------------------------------------------- formatting


def fmt_cell(cell: Cell, style: str, show_n: bool = True) -> str:
    """`mean±std (n)`; "—" (n) when missing. style: terminal (best marked *), markdown, latex."""
    if not cell.present:
        text = "--" if style == "latex" else MISSING
        return f"{text} ({cell.n})" if show_n else text
    pm = "$\\pm$" if style == "latex" else "±"
    body = f"{cell.mean:.1f}" + ("" if math.isnan(cell.std) else f"{pm}{cell.std:.2f}")
    if cell.bold:
        body = {"terminal": f"{body}*", "markdown": f"**{body}**", "latex": f"\\textbf{{{body}}}"}[style]
    return f"{body} ({cell.n})" if show_n else body


def fmt_avg(cell: Cell, style: str) -> str:
    if not cell.present:
        return "--" if style == "latex" else MISSING
    body = f"{cell.mean:.1f}"
    if cell.bold:
        body = {"terminal": f"{body}*", "markdown": f"**{body}**", "latex": f"\\textbf{{{body}}}"}[style]
    return body


def latex_escape(text: str) -> str:
    repl = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
    return "".join(repl.get(ch, ch) for ch in text)


def _col_header(task: str, metric: str) -> str:
    return f"{stats.task_label(task)} ({stats.METRIC_ABBREV.get(metric, metric)})"


def table_rows(table: Table, style: str) -> tuple[list[str], list[list[str]]]:
    headers = [*table.row_headers, *(_col_header(t, table.metrics[t]) for t in table.tasks), "Avg"]
    body = [[*row.labels, *(fmt_cell(row.cells[t], style) for t in table.tasks), fmt_avg(row.cells["avg"], style)]
            for row in table.rows]
    return headers, body


def table_footnotes(table: Table, ddof: int, which: str) -> list[str]:
    notes = [f"mean±std over seeds (std with ddof={ddof}), (n) = runs per cell; dev scores from `{which}`; "
             "best per column marked" + (" within each objective" if len(table.row_headers) > 1 else "")]
    reasons = sorted({r.avg_reason for r in table.rows if r.avg_reason})
    if reasons:
        notes.append("Avg is over the 7 GLUE tasks and shown only when all 7 are present ("
                     + "; ".join(reasons) + ")")
    return notes + table.notes


def render_latex(table: Table, ddof: int, which: str) -> str:
    """A booktabs table. n is printed only where it differs from the table's most common n."""
    ns = [c.n for r in table.rows for t, c in r.cells.items() if t != "avg" and c.n > 0]
    modal = max(set(ns), key=ns.count) if ns else 0
    spec = "l" * len(table.row_headers) + "r" * (len(table.tasks) + 1)
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}", r"\toprule"]
    names = [*table.row_headers, *(stats.task_label(t) for t in table.tasks), "Avg"]
    lines.append(" & ".join(latex_escape(x) for x in names) + r" \\")
    units = [""] * len(table.row_headers) + [stats.METRIC_ABBREV.get(table.metrics[t], table.metrics[t])
                                             for t in table.tasks] + [""]
    lines.append(" & ".join(latex_escape(x) for x in units) + r" \\")
    lines.append(r"\midrule")
    prev_group = None
    for row in table.rows:
        if prev_group is not None and len(table.row_headers) > 1 and row.group != prev_group:
            lines.append(r"\midrule")
        prev_group = row.group
        cells = []
        for t in table.tasks:
            c = row.cells[t]
            cells.append(fmt_cell(c, "latex", show_n=(c.n != modal)))
        vals = [*(latex_escape(x) for x in row.labels), *cells, fmt_avg(row.cells["avg"], "latex")]
        lines.append(" & ".join(vals) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    caption = (f"{table.title}. Mean$\\pm$std over seeds (std with ddof={ddof}), "
               f"n = {modal} runs per cell unless shown in parentheses; dev scores from \\texttt{{{which}}}.")
    lines += [rf"\caption{{{caption}}}", rf"\label{{tab:{table.key}}}", r"\end{table}", ""]
    return "\n".join(lines)


def table_csv(table: Table, ddof: int, which: str) -> pd.DataFrame:
    """Tidy numbers behind a table (one row per cell, Avg as task "avg")."""
    out = []
    for row in table.rows:
        for task in [*table.tasks, "avg"]:
            c = row.cells[task]
            out.append({"objective": row.labels[0], "init": row.init, "task": task, "metric": table.metrics.get(task, ""),
                        "mean": c.mean if c.present else math.nan, "std": c.std,
                        "n": c.n if task != "avg" else None, "best": c.bold, "ddof": ddof,
                        "which": which, "note": row.avg_reason if task == "avg" else ""})
    frame = pd.DataFrame(out)
    if not frame.empty:
        frame["n"] = frame["n"].astype("Int64")  # an integer column with blanks for the Avg rows
    return frame


def _p(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return f"{value:.2e}" if value < 1e-3 else f"{value:.4f}"


def tests_rows(tests: pd.DataFrame, within: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    headers = [*within, "A", "B", "n pairs", "mean(A-B)", "t", "p", "p (Holm)", "note"]
    rows = []
    for r in tests.to_dict("records"):
        rows.append([*(str(r[w]) for w in within), r["a"], r["b"], str(r["n"]),
                     "nan" if math.isnan(r["mean_diff"]) else f"{r['mean_diff']:+.2f}",
                     "nan" if math.isnan(r["t"]) else f"{r['t']:.2f}", _p(r["p"]), _p(r["p_holm"]), r["note"]])
    return headers, rows


def not_significant(tests: pd.DataFrame, within: Sequence[str], column: str) -> list[str]:
    out = []
    for r in tests.to_dict("records"):
        if not math.isnan(r["p"]) and not r[column]:
            prefix = " ".join(f"{r[w]}:" for w in within)
            out.append(f"{prefix} ({r['a']}, {r['b']})".strip())
    return out


def comparison_rows(comp: pd.DataFrame, by_init: bool) -> tuple[list[str], list[list[str]]]:
    """Wide: one row per objective[/init], a cell `ours vs paper (delta)` per task present in both."""
    tasks = [t for t in stats.task_order(set(comp["task"]) - {"avg"})]
    cols = [*tasks, "avg"] if (comp["task"] == "avg").any() else tasks
    headers = ["Objective", *(["Init"] if by_init else []),
               *(f"{stats.task_label(t)} (acc)" if t in stats.GLUE_TASKS else ("Avg" if t == "avg" else t)
                 for t in cols)]
    rows = []
    for (obj, init), grp in comp.groupby(["objective", "init_label"], sort=False):
        cells = {r["task"]: r for r in grp.to_dict("records")}
        line = [obj, *([init] if by_init else [])]
        for t in cols:
            r = cells.get(t)
            line.append(MISSING if r is None else f"{r['ours']:.1f} vs {r['paper']:.1f} ({round(r['delta'], 1) or 0.0:+.1f})")  # no "-0.0"
        rows.append(line)
    return headers, rows


# ----------------------------------------------------------------------------- plot


def plot_curves(curves: pd.DataFrame, path: Path, title: str, by_init: bool) -> bool:
    """Per-epoch dev curves of the primary metric: one subplot per task, one line per objective
    (per objective x init when by_init), mean over seeds with a ±std band; the dashed vertical
    line is the boundary between the intermediate and the prediction stage. False if no data."""
    by = ["objective", "init_label"] if by_init else ["objective"]
    means = stats.curve_means(curves, by)
    if means.empty:
        return False
    import matplotlib

    matplotlib.use("Agg")  # headless: never needs a display
    import matplotlib.pyplot as plt

    tasks = stats.task_order(means["task"].unique())
    ncols = min(4, len(tasks))
    nrows = math.ceil(len(tasks) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.2 * nrows), squeeze=False)
    objectives = stats.objective_order(means["objective"].unique())
    cmap = plt.get_cmap("tab10" if len(objectives) <= 10 else "tab20")
    colors = {o: cmap(i % cmap.N) for i, o in enumerate(objectives)}
    inits = stats.init_order(curves) if by_init else [None]
    styles = {lab: ["-", "--", ":", "-."][i % 4] for i, lab in enumerate(inits)}
    for ax, task in zip(axes.flat, tasks, strict=False):
        sub = means[means["task"] == task]
        for obj, init in ((o, i) for o in objectives for i in inits):  # legend in paper order
            line = sub[sub["objective"] == obj]
            if init is not None:
                line = line[line["init_label"] == init]
            if line.empty:
                continue
            label = obj if init is None else f"{obj} [{init}]"
            ls = styles[init]
            ax.plot(line["x"], line["mean"], ls, color=colors[obj], label=label, marker=".", lw=1.2)
            band = line["std"].fillna(0.0)
            ax.fill_between(line["x"], line["mean"] - band, line["mean"] + band, color=colors[obj], alpha=0.12)
        boundary = sub["boundary"].dropna()
        if not boundary.empty:
            ax.axvline(float(boundary.iloc[0]), color="grey", ls="--", lw=0.8)
        metric = str(sub["metric"].iloc[0])
        ax.set_title(stats.task_label(task))
        ax.set_xlabel("epoch (intermediate | prediction)")
        ax.set_ylabel(f"dev {stats.METRIC_ABBREV.get(metric, metric)} (%)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(tasks):]:
        ax.set_visible(False)
    legend: dict[str, Any] = {}  # every line of every subplot once (a task may lack some objectives)
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    order = [f"{o}" if i is None else f"{o} [{i}]" for o in objectives for i in inits]
    labels = [lab for lab in order if lab in legend]
    fig.legend([legend[lab] for lab in labels], labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------- report


class Doc:
    """Collects the report once and renders it for the terminal (tabulate "simple") and Markdown."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, Any]] = []

    def heading(self, text: str) -> None:
        self.blocks.append(("h", text))

    def text(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, headers: list[str], rows: list[list[str]], md_rows: list[list[str]] | None = None) -> None:
        self.blocks.append(("t", (headers, rows, md_rows if md_rows is not None else rows)))

    def render(self, markdown: bool) -> str:
        out: list[str] = []
        for kind, payload in self.blocks:
            if kind == "h":
                out += ["", f"## {payload}" if markdown else f"== {payload} ==", ""]
            elif kind == "p":
                out.append(payload + ("  " if markdown else ""))
            else:
                headers, rows, md_rows = payload
                fmt = "pipe" if markdown else "simple"
                if out and out[-1] != "":
                    out.append("")
                out += [tabulate(md_rows if markdown else rows, headers=headers, tablefmt=fmt,
                                 disable_numparse=True), ""]
        return "\n".join(out).strip() + "\n"


def _job_line(rec: dict[str, Any]) -> str:
    return f"{rec['task']} / {rec['objective']} / init {rec['init_spec']} / seed {rec['seed']}"


def _listing(doc: Doc, items: list[str]) -> None:
    for item in items[:MAX_LISTED]:
        doc.text(f"- {item}")
    if len(items) > MAX_LISTED:
        doc.text(f"- ... and {len(items) - MAX_LISTED} more")


def _grid_section(doc: Doc, records: pd.DataFrame, preset: str | None) -> None:
    if preset is None:
        return
    doc.heading(f"Grid status versus preset {preset!r}")
    try:
        from distill_sweep.grid import expected_jobs  # the lead's module; may not exist yet
    except ImportError as exc:
        doc.text(f"grid comparison skipped: distill_sweep.grid.expected_jobs is unavailable ({exc})")
        return
    try:
        expected = list(expected_jobs(preset))
    except Exception as exc:  # Hydra composition errors have no common base worth naming: a bad preset
        raise UsageError(f"preset {preset!r}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    completed, failed, missing = stats.grid_status(records, expected)
    running = set()
    if not records.empty:
        for r in records[records["status"] == "running"].to_dict("records"):
            running.add(stats.job_key(r["task"], r["objective"], r["init_spec"], r["seed"]))
    keys = [stats.job_key(j["task"], j["objective"], j["init_spec"], j["seed"]) for j in missing]
    n_running = sum(k in running for k in keys)
    doc.text(f"{len(expected)} expected jobs: {len(completed)} completed, {len(failed)} failed, "
             f"{len(missing)} missing ({n_running} of them running, {len(missing) - n_running} not started)")
    _listing(doc, [f"{'running' if k in running else 'missing'}: {_job_line(j)}" for j, k in zip(missing, keys, strict=True)]
             + [f"failed: {_job_line(j)}" for j in failed])


def build_report(opts: Options, store: stats.Store) -> tuple[Doc, dict[str, Any]]:
    """The whole report as a Doc plus the artefacts to write (name -> str | DataFrame | Table)."""
    records = store.records
    doc = Doc()
    files: dict[str, Any] = {}
    counts = stats.status_counts(records)
    doc.heading(f"distill_sweep report: {opts.results_dir}")
    doc.text(f"jobs: {counts['completed']} completed, {counts['failed']} failed, {counts['running']} running "
             f"(running = started without a final status; a killed job stays 'running')"
             + (f"; {len(store.skipped)} unreadable/partial result.json skipped" if store.skipped else ""))
    doc.text(f"columns: metric={opts.metric} ({'MRPC F1, CoLA MCC as headed in the paper' if opts.metric == 'header' else 'accuracy for all GLUE tasks, what the paper numbers are'}); "
             f"which={opts.which}; ddof={opts.ddof}; alpha={opts.alpha}")

    sc, notes = stats.scores(records, opts.metric)
    paper_sc, _ = stats.scores(records, "paper")
    t1_records, t1_note = stats.select_init(records, opts.table1_init)
    for note in notes:
        doc.text(f"note: {note}")

    if "1" in opts.tables:
        t1_paths = set(t1_records["path"])
        t1_sc = sc[sc["path"].isin(t1_paths)]
        agg = stats.aggregate(t1_sc, ddof=opts.ddof)
        table = build_table("table1", f"Table 1: objectives, init {opts.table1_init}", t1_records, agg,
                            stats.row_averages(agg), by_init=False, metric_mode=opts.metric)
        if t1_note:
            table.notes.append(t1_note)
        labels = sorted(set(t1_records["init_label"]))
        table.title = f"Table 1: objectives (init {opts.table1_init}: layers {', '.join(labels) or MISSING})"
        _table_section(doc, files, table, opts)
        tests = stats.paired_tests(t1_sc, "objective", (), opts.alpha,
                                   levels=stats.objective_order(t1_sc["objective"].unique()))
        _tests_section(doc, files, "table1", "Table 1 paired t-tests: objectives (same init)", tests, [], opts)
        if opts.paper:
            _paper_section(doc, files, "1", paper_sc[paper_sc["path"].isin(t1_paths)], opts, by_init=False)
        if not store.curves.empty:
            files["curves.png"] = ("plot", store.curves[store.curves["path"].isin(t1_paths)],
                                   table.title, False)

    if "3" in opts.tables:
        agg = stats.aggregate(sc, ddof=opts.ddof)
        table = build_table("table3", "Table 3: objective x student initialisation", records, agg,
                            stats.row_averages(agg), by_init=True, metric_mode=opts.metric)
        _table_section(doc, files, table, opts)
        tests = stats.paired_tests(sc, "init_label", ("objective",), opts.alpha, levels=stats.init_order(records))
        _tests_section(doc, files, "table3", "Table 3 paired t-tests: inits within each objective", tests,
                       ["objective"], opts)
        if opts.paper:
            _paper_section(doc, files, "3", paper_sc, opts, by_init=True)
        if not store.curves.empty and store.curves["init_label"].nunique() > 1:
            files["curves_inits.png"] = ("plot", store.curves, "dev curves per objective and init", True)

    failed = records[records["status"] == "failed"] if not records.empty else records
    if not failed.empty:
        doc.heading(f"Failed jobs ({len(failed)})")
        lines = []
        for rec in failed.to_dict("records"):
            err = (rec["error"] or "no error message").strip().splitlines() or ["no error message"]
            lines.append(f"{_job_line(rec)}: {err[0]}  [{rec['path']}]")
        _listing(doc, lines)
    running = records[records["status"] == "running"] if not records.empty else records
    if not running.empty:
        doc.heading(f"Running jobs ({len(running)})")
        _listing(doc, [f"{_job_line(r)}  (started {r['started_at']})" for r in running.to_dict("records")])
    _grid_section(doc, records, opts.preset)
    return doc, files


def _table_section(doc: Doc, files: dict[str, Any], table: Table, opts: Options) -> None:
    doc.heading(table.title)
    headers, rows = table_rows(table, "terminal")
    _, md_rows = table_rows(table, "markdown")
    doc.table(headers, rows, md_rows)
    for note in table_footnotes(table, opts.ddof, opts.which):
        doc.text(note)
    files[f"{table.key}.md"] = (f"# {table.title}\n\n" + tabulate(md_rows, headers=headers, tablefmt="pipe",
                                disable_numparse=True) + "\n\n" + "\n".join(
                                    f"- {n}" for n in table_footnotes(table, opts.ddof, opts.which)) + "\n")
    files[f"{table.key}.tex"] = render_latex(table, opts.ddof, opts.which)
    files[f"{table.key}.csv"] = table_csv(table, opts.ddof, opts.which)


def _tests_section(doc: Doc, files: dict[str, Any], key: str, title: str, tests: pd.DataFrame,
                   within: list[str], opts: Options) -> None:
    doc.heading(title)
    if tests.empty:
        doc.text("no pairs to test (fewer than two levels with completed runs)")
        return
    doc.text("two-sided paired t-test (scipy.stats.ttest_rel) on scores matched by (task, seed), pooled "
             f"over tasks; Holm correction over the {len(tests)} tests of this table")
    headers, rows = tests_rows(tests, within)
    doc.table(headers, rows)
    raw = not_significant(tests, within, "significant")
    doc.text(f"NOT significant at alpha={opts.alpha} (raw p, as in the paper): " + (", ".join(raw) or "none"))
    extra = [p for p in not_significant(tests, within, "significant_holm") if p not in raw]
    doc.text("additionally NOT significant after Holm: " + (", ".join(extra) or "none"))
    untested = tests[tests["p"].isna()]
    if not untested.empty:
        doc.text(f"{len(untested)} pair(s) not testable (see note column)")
    files[f"ttests_{key}.csv"] = tests


def _paper_section(doc: Doc, files: dict[str, Any], which_table: str, paper_sc: pd.DataFrame,
                   opts: Options, by_init: bool) -> None:
    doc.heading(f"Comparison with the paper's Table {which_table} (paper metrics: accuracy everywhere)")
    path = opts.paper_dir / PAPER_FILES[which_table]
    if not path.is_file():
        doc.text(f"paper numbers not found at {path}; comparison skipped")
        return
    agg = stats.aggregate(paper_sc, ddof=opts.ddof)
    comp = stats.compare_with_paper(agg, stats.row_averages(agg), stats.load_paper_table(path))
    if comp.empty:
        doc.text("no cell in common with the paper (same objective, init layers and GLUE task)")
        return
    headers, rows = comparison_rows(comp, by_init)
    doc.table(headers, rows)
    cells = comp[comp["task"] != "avg"]
    doc.text(f"ours vs paper (ours - paper) over {len(cells)} matched cells: mean delta "
             f"{cells['delta'].mean():+.2f}, mean |delta| {cells['delta'].abs().mean():.2f}; "
             "paper MRPC/CoLA columns are accuracy (see results/paper/README.md)")
    files[f"paper_table{which_table}.csv"] = comp


def write_files(out_dir: Path, files: dict[str, Any]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, payload in files.items():
        path = out_dir / name
        if isinstance(payload, tuple) and payload and payload[0] == "plot":
            _, curves, title, by_init = payload
            if not plot_curves(curves, path, title, by_init):
                continue
        elif isinstance(payload, pd.DataFrame):
            payload.to_csv(path, index=False)
        else:
            path.write_text(str(payload), encoding="utf-8")
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        return 0
    try:
        opts = parse_args(argv)
        if not opts.results_dir.is_dir():
            raise UsageError(f"results_dir {str(opts.results_dir)!r} does not exist or is not a directory")
        store = stats.load_store(opts.results_dir, opts.which)
        for why in store.skipped:
            print(f"{PROG}: warning: skipped {why}", file=sys.stderr)
        if store.records.empty:
            print(f"no readable result.json under {opts.results_dir}; nothing to report")
            return 0
        doc, files = build_report(opts, store)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    report = doc.render(markdown=False)
    files["report.md"] = doc.render(markdown=True)
    written = write_files(opts.out_dir, files)
    print(report)
    print(f"wrote {len(written)} files to {opts.out_dir}: " + ", ".join(p.name for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
