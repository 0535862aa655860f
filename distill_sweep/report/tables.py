"""The table model: rows (systems, and inits in Table 3) x task columns of mean±std (n) cells."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from distill_sweep.analysis import replication
from distill_sweep.analysis.frames import init_order, system_order
from distill_sweep.analysis.paper import GLUE_TASKS, column_metric, task_order
from distill_sweep.analysis.stats import holm, paired_ttest


@dataclass
class Cell:
    mean: float = math.nan
    std: float = math.nan
    n: int = 0
    bold: bool = False
    ci_low: float = math.nan  # the CI of the mean over seeds (stats.mean_ci; the table's ci_method)
    ci_high: float = math.nan
    runs: int = 0  # the runs behind the n units (more than n where a grid crosses another source's seed)
    ci_cut: bool = False  # the CI was cut at what the metric can be (stats.clip_to_range)

    @property
    def present(self) -> bool:
        return self.n > 0 and not math.isnan(self.mean)

    @property
    def runs_agree(self) -> bool:
        """Several master seeds whose scores are all the same (a std of 0 up to the float rounding of their mean):
        no spread, which is not a precise one."""
        return self.present and self.n >= 2 and self.std <= 1e-9 * max(1.0, abs(self.mean))


def cell_of(hit: Any) -> Cell:
    """A cell from a row of stats.aggregate (an itertuples row or a Series)."""
    runs = getattr(hit, "runs", hit.n)
    return Cell(float(hit.mean), float(hit.std), int(hit.n), ci_low=float(hit.ci_low), ci_high=float(hit.ci_high),
                runs=int(runs), ci_cut=bool(getattr(hit, "ci_cut", False)))


@dataclass
class Row:
    labels: tuple[str, ...]  # system[, init]
    group: str  # rows of one group are compared for "best" (a column, or one system in Table 3)
    cells: dict[str, Cell]  # task -> cell; "avg" -> Avg (std/n unused)
    avg_reason: str = ""
    init: str = ""  # resolved init label ("4,8,12"), also for Table 1 rows
    system: str = ""
    procedure: str = ""
    objective: str = ""
    teacher: str = ""  # name#id
    student: str = ""  # name#id


Scores = Callable[[Row, str], "pd.Series | None"]  # a row's scores of a column, indexed by (task, seed)


@dataclass
class Table:
    key: str  # "table1" | "table3" | a layout's key (report.layouts)
    title: str
    row_headers: list[str]
    tasks: list[str]
    metrics: dict[str, str]  # task -> metric shown
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    avg_tasks: tuple[str, ...] = GLUE_TASKS  # what the Avg column averages (shown only when all are present)
    ci_method: str = "t"  # how the cells' CIs were computed (stats.CI_METHODS), named in the footnotes
    best_note: str = ""  # how "best" was decided (mark_best), the footnote's words
    scores: Scores | None = None  # a row's scores per column (score_lookup): the figures' tests against a baseline
    # the raw p-values of every verdict the report gives on this table's rows, by kind ("bold", "baseline",
    # "pooled", "interaction"): one Holm family, so two identical rows are named different by any of them at most
    # alpha of the time (`others`, `join_family`)
    family: dict[str, list[float]] = field(default_factory=dict)
    twins: list[str] = field(default_factory=list)  # columns whose bold test is a pooled test's twin (join_family)
    baseline_twins: list[str] = field(default_factory=list)  # the same for the difference map's cells
    # join_family's raw tests, computed once: (column, best cell, p) of bold, and the map's p per row and column
    raw_tests: dict[str, Any] = field(default_factory=dict, repr=False)
    dev_sizes: dict[str, int] = field(default_factory=dict)  # task -> its dev examples, where recorded (dev_sizes)


def dev_sizes(records: pd.DataFrame) -> dict[str, int]:
    """Per task the dev examples its completed runs were scored on (the most common recorded size; a task none of
    whose records says is left out): what one example weighs in its column (render.one_example_text)."""
    if records.empty or "dev_size" not in records.columns:
        return {}
    done = records[(records["status"] == "completed") & records["dev_size"].notna()]
    return {str(task): int(sizes.mode().iloc[0]) for task, sizes in done.groupby("task")["dev_size"]}


def others(table: Table, kind: str) -> list[float]:
    """The raw p-values of the table's verdicts other than `kind`'s: what `kind`'s Holm correction adds to its own."""
    return [p for k, ps in table.family.items() if k != kind for p in ps]


def score_lookup(scores: pd.DataFrame, key: Callable[[Row], tuple[Any, ...]], by: Sequence[str],
                 avg_tasks: Sequence[str]) -> Scores:
    """`mark_best`'s scores from a scores frame (columns by..., task, seed, value): a column's are the row's
    seeds of that task; the Avg's, the row's (task, seed) pairs over `avg_tasks`. The runs of one master seed (a
    grid crossing another source's seed) are averaged first: the unit of replication (analysis/replication.py)."""
    units = replication.unit_means(scores, [*by, "task"]) if not scores.empty else scores
    index = {k if isinstance(k, tuple) else (k,): g.set_index(["task", "seed"])["value"]
             for k, g in units.groupby(list(by), sort=False)} if not units.empty else {}

    def get(row: Row, col: str) -> pd.Series | None:
        values = index.get(key(row))
        if values is None:
            return None
        tasks = list(avg_tasks) if col == "avg" else [col]
        return values[values.index.get_level_values("task").isin(tasks)]

    return get


def best_tests(rows: Sequence[Row], columns: Sequence[str], scores: Scores) -> list[tuple[Cell, float]]:
    """Each column's best cell within each row group against its runner-up: (the best cell, the raw p of a
    two-sided paired t-test on their matched seeds; the Avg: on matched (task, seed) pairs)."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    tests: list[tuple[Cell, float]] = []
    for members in groups.values():
        for col in columns:
            cands = sorted([r for r in members if col in r.cells and r.cells[col].present],
                           key=lambda r: r.cells[col].mean, reverse=True)
            if len(cands) < 2:
                continue
            a, b = scores(cands[0], col), scores(cands[1], col)
            if a is None or b is None:
                continue
            both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
            _, p, _ = paired_ttest(both["a"].to_numpy(), both["b"].to_numpy())
            tests.append((cands[0].cells[col], p))
    return tests


def mark_best(rows: Sequence[Row], columns: Sequence[str], scores: Scores | None = None,
              alpha: float = 0.05, family_extra: Sequence[float] = (), twins: Sequence[str] = (),
              tests_by_column: Sequence[tuple[str, Cell, float]] | None = None) -> str:
    """Bold the best mean of each column within each row group, only where it is significantly better than the
    runner-up: a two-sided paired t-test on their matched seeds (the Avg: on matched (task, seed) pairs), Holm
    over every such test of the table and `family_extra` (the raw p-values of the table's other verdicts: one
    family), p < alpha. `twins`: the columns whose test is one of `family_extra`'s (the pooled test of the same
    pair on the same units: a table of one task, or the Avg over every task of the table); the same verdict, so it
    is counted once (`holm_with_twins`). `tests_by_column`: the (column, best cell, raw p) of those tests where
    the caller has them already. Without `scores` nothing is bold. Returns the footnote's words."""
    for row in rows:
        for cell in row.cells.values():
            cell.bold = False
    if scores is None:
        return "no best marked (this table has no paired test of the best against the runner-up)"
    if tests_by_column is None:
        tests_by_column = [(col, cell, p) for col in columns for cell, p in best_tests(rows, [col], scores)]
    tests = [(cell, p, col in twins) for col, cell, p in tests_by_column]
    adjusted = holm_with_twins([p for _, p, _ in tests], [t for _, _, t in tests], family_extra)
    for (cell, _, _), p in zip(tests, adjusted, strict=True):
        cell.bold = bool(p < alpha)
    m = sum(not (math.isnan(p) or twin) for _, p, twin in tests)
    extra = sum(not math.isnan(p) for p in family_extra)
    family = (f"Holm over one family of {m + extra}: the table's {m} such test(s) that are not a pooled test's "
              f"twin and its {extra} other verdict test(s) (the pooled pairs, the difference map's cells against the "
              "baseline, Table 3's interaction contrasts), so two identical rows are named different by any of them "
              f"at most {alpha} of the time" if extra else f"Holm over the table's {m} such test(s)")
    return (f"best per column marked only where it is significantly better than the runner-up: two-sided "
            f"paired t-test on their matched seeds (Avg: matched (task, seed) pairs), {family}, p < {alpha}")


def holm_with_twins(own: Sequence[float], twin: Sequence[bool], others_p: Sequence[float]) -> list[float]:
    """Holm-adjusted p of `own` tests in one family with `others_p`. A twin is a test that another verdict of the
    family makes on the same data (the same pair on the same units): it is not counted again, and its adjusted p is
    its twin's (the adjusted p of the family's test with the same raw p; Holm's adjusted p is a non-decreasing
    function of the raw p within a family)."""
    counted = [p for p, t in zip(own, twin, strict=True) if not t]
    family = np.asarray([*counted, *(p for p in others_p if not math.isnan(p))], dtype=float)
    adjusted = holm(family) if len(family) else np.asarray([])
    out, k = [], 0
    for p, t in zip(own, twin, strict=True):
        if not t:
            out.append(float(adjusted[k]))
            k += 1
        elif math.isnan(p):
            out.append(math.nan)
        else:  # the largest adjusted p of the family's tests at or below this raw p (its twin's, up to rounding)
            below = adjusted[family <= p * (1.0 + 1e-9)] if len(family) else adjusted
            out.append(float(below.max()) if len(below) else math.nan)
    return out


def baseline_p(table: Table, baseline: str | None, columns: Sequence[str]) -> list[list[float]]:
    """The difference map's raw p per row and column: each row against the `baseline` row at its init, a two-sided
    paired t-test on matched seeds (Avg: matched (task, seed) pairs); NaN where not tested (the baseline itself,
    no baseline at that init, no scores)."""
    base = {r.init: r for r in table.rows if r.system == baseline}
    raw = [[math.nan] * len(columns) for _ in table.rows]
    if table.scores is None or not base:
        return raw
    for i, r in enumerate(table.rows):
        b = base.get(r.init)
        if b is None or b is r:
            continue
        for j, col in enumerate(columns):
            if not (col in r.cells and r.cells[col].present and col in b.cells and b.cells[col].present):
                continue  # no cell to mark (an Avg the table does not show)
            x, y = table.scores(r, col), table.scores(b, col)
            if x is None or y is None:
                continue
            both = pd.concat([x.rename("a"), y.rename("b")], axis=1, join="inner").dropna()
            raw[i][j] = paired_ttest(both["a"].to_numpy(), both["b"].to_numpy())[1]
    return raw


def heat_columns(table: Table) -> list[str]:
    """The columns the difference map shows: the tasks, then the Avg."""
    return [*table.tasks, "avg"]


def twin_columns(table: Table) -> list[str]:
    """The columns whose best-vs-runner-up (or vs-baseline) test is the pooled test of the same pair on the same
    units: the one task of a one-task table, the Avg where it averages every task of the table."""
    same = list(table.tasks) if len(table.tasks) == 1 else []
    return [*same, *(["avg"] if table.tasks and set(table.tasks) <= set(table.avg_tasks) else [])]


def join_family(table: Table, baseline: str | None, alpha: float, baseline_pooled: bool = False,
                pooled_every_pair: bool = True, **others_p: Sequence[float]) -> None:
    """Put the table's verdicts in one Holm family: the bold tests, the difference map's cells against `baseline`
    and `others_p` (the pooled pairs' and, in Table 3, the interaction contrasts' raw p-values), then bold again
    with the others in its family. A bold test (a difference-map cell, where `baseline_pooled`: the pooled tests
    hold every pair of rows) that is a pooled test's twin (`twin_columns`) counts once. The difference map's stars
    (figures.baseline_tests) read the same family. `pooled_every_pair` False: the pooled tests hold only some
    pairs of rows (a layout's pairs against its baselines), so no bold test is taken for a twin and each counts
    (conservative: a family one test larger where a pair is both)."""
    if table.scores is None:
        return
    twins = twin_columns(table) if "pooled" in others_p and pooled_every_pair else []
    table.twins = twins
    table.baseline_twins = twins if baseline_pooled else []
    columns = [*table.tasks, "avg"]
    if table.raw_tests.get("baseline_of") != baseline:  # the raw tests do not change between calls: once each
        table.raw_tests = {"baseline_of": baseline, "baseline": baseline_p(table, baseline, heat_columns(table)),
                           "bold": [(col, cell, p) for col in columns
                                    for cell, p in best_tests(table.rows, [col], table.scores)]}
    bold = table.raw_tests["bold"]
    table.family["bold"] = [p for col, _, p in bold if col not in twins]
    table.family["baseline"] = [p for line in table.raw_tests["baseline"]
                                for p, col in zip(line, heat_columns(table), strict=True)
                                if col not in table.baseline_twins]
    table.family.update({k: list(v) for k, v in others_p.items()})
    table.best_note = mark_best(table.rows, columns, table.scores, alpha, others(table, "bold"), twins, bold)


def build_table(
    key: str,
    title: str,
    records: pd.DataFrame,
    agg: pd.DataFrame,
    averages: pd.DataFrame,
    by_init: bool,
    metric_mode: str,
    scores: pd.DataFrame | None = None,
    alpha: float = 0.05,
) -> Table:
    """Rows and columns come from every selected record (any status), so systems/tasks whose runs
    all failed or are still running still show up, as missing cells with n = 0. `agg` and `averages`
    are keyed by (system, init_label); `scores` (stats' scores frame) lets `mark_best` test the best cells."""
    tasks = task_order(records["task"].unique()) if not records.empty else []
    primary = records.groupby("task")["primary_metric"].first().to_dict() if not records.empty else {}
    metrics = {t: column_metric(t, metric_mode, primary.get(t)) for t in tasks}
    table = Table(key=key, title=title, row_headers=["Objective", "Init"] if by_init else ["Objective"],
                  tasks=tasks, metrics=metrics, dev_sizes=dev_sizes(records))
    cell_index = {(r.system, r.init_label, r.task): r for r in agg.itertuples(index=False)}
    avg_index = {(r.system, r.init_label): r for r in averages.itertuples(index=False)}
    inits = init_order(records)
    for system in system_order(records):
        mine = records[records["system"] == system]
        first = mine.iloc[0]
        present = set(mine["init_label"])
        for init in [i for i in inits if i in present]:
            cells = {}
            for task in tasks:
                hit = cell_index.get((system, init, task))
                cells[task] = cell_of(hit) if hit is not None else Cell()
            avg = avg_index.get((system, init))
            if avg is not None and not math.isnan(avg.avg):
                cells["avg"], reason = Cell(float(avg.avg), math.nan, 1), ""
            else:
                cells["avg"] = Cell()
                reason = avg.reason if avg is not None else "no completed runs"
            table.rows.append(Row(
                labels=(system, init) if by_init else (system,), group=system if by_init else "",
                cells=cells, avg_reason=reason, init=init, system=system, procedure=str(first["procedure"]),
                objective=str(first["objective"]), teacher=f"{first['teacher_name']}#{first['teacher_id']}",
                student=f"{first['student_name']}#{first['student_id']}"))
    lookup = (score_lookup(scores, lambda r: (r.system, r.init), ("system", "init_label"), table.avg_tasks)
              if scores is not None else None)
    table.best_note = mark_best(table.rows, [*tasks, "avg"], lookup, alpha)
    table.scores = lookup
    if lookup is not None:
        table.family["bold"] = [p for _, p in best_tests(table.rows, [*tasks, "avg"], lookup)]
    for note in (units_note(table.rows), cut_note(table)):
        if note:
            table.notes.append(note)
    return table


def cut_note(table: Table) -> str:
    """The footnote naming the cells whose interval was cut at the metric's range ("" where none was)."""
    cut = [f"{' / '.join(r.labels)} / {t}" for r in table.rows for t, c in r.cells.items() if t != "avg" and c.ci_cut]
    if not cut:
        return ""
    return (f"CI cut at what the metric can be (0 to 100; -100 to 100 for MCC and correlations) in {len(cut)} "
            f"cell(s): {', '.join(cut)}; the t-interval over few seeds with a large spread reaches past it, and the "
            "cut interval holds the true mean whenever the uncut one does")


def units_note(rows: Sequence[Row]) -> str:
    """The footnote of a table whose cells average several runs per master seed ("" where none does)."""
    cells = [c for r in rows for k, c in r.cells.items() if k != "avg" and c.present]
    if not any(c.runs > c.n for c in cells):
        return ""
    most = max(round(c.runs / c.n) for c in cells)
    return (f"n counts master seeds, the unit of replication: the runs of one master seed that vary another source's "
            f"seed (up to {most} per seed here) are averaged first, then mean, std, CI and every test are over the "
            "master seeds' means (docs/guide/report.md, 'The unit of replication')")
