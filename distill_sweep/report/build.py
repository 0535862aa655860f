"""The report's sections, built once as a `Doc` plus the files to write.

Table 1 = one initialisation (default init name "skip": every k-th teacher layer, "4,8,12" for the
paper's 12-layer teacher and 3-layer student), one row per system. Table 3 = rows system x init.
A system is (procedure, objective, teacher, student): see distill_sweep.analysis.frames.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from distill_sweep.analysis import curves as dev_curves
from distill_sweep.analysis import example_stats, frames, grid_status, paper, stats
from distill_sweep.analysis.interaction import init_interactions
from distill_sweep.report import (
    checklist,
    checks,
    collapsed,
    decoder,
    decoder_lm_eval,
    examples,
    figures,
    interaction,
    layout_table,
    pretraining,
    variance,
)
from distill_sweep.report.layouts import EARLY_EXIT, LAYOUTS, Layout
from distill_sweep.report.method_text import statistics_text, variability_text
from distill_sweep.report.options import ReportOptions, UsageError
from distill_sweep.report.render import (
    MISSING,
    ONE_EXAMPLE_BELOW,
    Doc,
    comparison_rows,
    fmt_ci,
    fmt_p,
    method_comparison_rows,
    one_example_text,
    pair_name,
    plain_latex,
    plain_markdown,
    render_latex,
    render_markdown,
    table_csv,
    table_footnotes,
    table_rows,
    tests_rows,
)
from distill_sweep.report.tables import Table, build_table, dev_sizes, join_family, others
from distill_sweep.report.verdicts import aso_verdict_text, tests_legend

MAX_LISTED = 30  # failed/running/missing jobs listed individually before "... and N more"


def selection_text(which: str) -> str:
    return f"{frames.WHICH_TEXT[which]} (which={which})"


def curves_text(stages: str) -> str:
    """What the dev curves show, under their heading."""
    which = ("the scored stage's epochs only (curves=all adds the earlier stages')" if stages == "scored" else
             "every stage's epochs; the dashed line separates the earlier stages (their dev score from the "
             "student's untrained head) from the scored stage, and no line joins them")
    return (f"mean over seeds at each whole epoch; band: the {stats.CONFIDENCE:.0%} Student t-interval of that mean "
            f"over the seeds (none at one seed; cut at the plot's edge, hover a line for its numbers); {which}; "
            f"more than {figures.SMALL_MULTIPLES_ABOVE} rows: one chart per row, the others grey behind it")


def build_report(opts: ReportOptions, st: frames.Store) -> tuple[Doc, dict[str, Any]]:
    """The whole report as a Doc plus the artefacts to write (name -> str | DataFrame | plot tuple)."""
    # distillations on a corpus and the fine-tuning of their students have Tables 2 and 4 of their own
    own = pretraining.is_own(st.records)
    decoders = decoder.is_own(st.records)  # students of decoder LMs: the decoder table of their own
    # one dev set per task: runs scored on another are left out of every statistic below, named (frames)
    records, dev_notes = frames.one_dev_set(st.records[~own & ~decoders])
    left = set(st.records[~own & ~decoders]["path"]) - set(records["path"])
    st = dataclasses.replace(st, curves=st.curves[~st.curves["path"].isin(left)],
                             early_exit=st.early_exit[~st.early_exit["path"].isin(left)])
    doc = Doc()
    files: dict[str, Any] = {}
    counts = frames.status_counts(st.records)
    _preamble(doc, opts, st, records, counts)
    sc, notes = frames.scores(records, opts.metric)
    paper_sc, _ = frames.scores(records, "paper")
    for note in [*notes, *dev_notes]:
        doc.text(f"note: {note}")
    systems = frames.system_order(records)
    _check_baseline(opts.baseline, systems)
    _own_tables_sections(doc, files, opts, st, records, own, decoders)
    if "1" in opts.tables and not records.empty:
        _table1_sections(doc, files, opts, st, records, sc, paper_sc, systems)
    if "3" in opts.tables and not records.empty:
        _table3_sections(doc, files, opts, st, records, sc, paper_sc, systems)
    variance.variance_section(doc, files, sc)  # only where a grid varies more than one source of variance
    if not st.early_exit.empty and EARLY_EXIT not in opts.layouts:
        _early_exit_section(doc, files, st.early_exit, opts)
    checklist.tuning_section(doc, files, opts.results_path)  # tuned arms: their choices, expected-best curves
    doc.flush_later()  # the tests of two single runs, apart from the tables' verdicts
    _records_sections(doc, opts, st, counts)
    return doc, files


def _preamble(doc: Doc, opts: ReportOptions, st: frames.Store, records: pd.DataFrame,
              counts: dict[str, int]) -> None:
    """The report's heading, then what it counts and with which options and methods."""
    doc.heading(f"distill_sweep report: {opts.results_dir}")
    doc.text(f"jobs: {counts['completed']} completed, {counts['failed']} failed, {counts['running']} running "
             f"(running = started without a final status; a killed job stays 'running')"
             + (f"; {len(st.skipped)} unreadable/partial result.json skipped" if st.skipped else ""))
    metric_text = ("MRPC F1, CoLA MCC as headed in the paper" if opts.metric == "header"
                   else "accuracy for all GLUE tasks, what the paper numbers are")
    doc.text(f"columns: metric={opts.metric} ({metric_text}); ddof={opts.ddof}; alpha={opts.alpha}")
    doc.text(f"epoch selection: {selection_text(opts.which)}")
    doc.text(f"statistics: {statistics_text(opts.ci, opts.alpha)}")
    doc.text(variability_text())
    few = few_seeds_text(records, opts.alpha)
    if few:
        doc.text(few)
    for line in dev_size_lines(records):
        doc.text(line)
    for line in frames.parts_legend(records):
        doc.text(line)


def dev_size_lines(records: pd.DataFrame) -> list[str]:
    """Per task on fewer than render.ONE_EXAMPLE_BELOW dev examples (as its records say), what one example weighs:
    every table's cells and differences on it move in such steps."""
    sizes = dev_sizes(records)
    return [f"dev set: {one_example_text(task, sizes[task])}" for task in paper.task_order(list(sizes))
            if 0 < sizes[task] < ONE_EXAMPLE_BELOW]


def few_seeds_text(records: pd.DataFrame, alpha: float) -> str | None:
    """One sentence where no cell has more than 2 master seeds: at that many the report tells almost nothing apart
    (None with more, or no completed run)."""
    done = records[records["status"] == "completed"] if not records.empty else records
    if done.empty:
        return None
    keys = [k for k in ("task", "system", "init_label", "teacher_id", "student_id") if k in done.columns]
    most = int(done.groupby(keys, dropna=False)["seed"].nunique().max())
    if most > 2:
        return None
    if most == 1:
        return ("seeds: 1 per cell, so nothing here can be told apart: a cell has no spread and no pair can be tested "
                "over seeds (the tests of two runs say only whether two runs differ on this dev set); run more seeds "
                "(+plan_seeds=true -m says how many)")
    from scipy import stats as sps

    needs = float(sps.t.ppf(1 - alpha / 2, 1))  # the two-sided critical t at 1 degree of freedom (before Holm)
    return ("seeds: at most 2 per cell, so almost nothing here can be told apart: a cell's ± is the spread of two "
            f"numbers, a paired t-test on 2 seeds (1 degree of freedom) calls a difference only when it is over "
            f"{needs:.1f} of its standard errors, and ASO gives no verdict; run more seeds (+plan_seeds=true -m says "
            "how many)")


def _check_baseline(baseline: str, systems: list[str]) -> None:
    """A chosen baseline must be a row of the report (the default, no KD, may be absent)."""
    if baseline != frames.NO_KD_LABEL and baseline not in systems:
        raise UsageError(f"baseline={baseline!r} is not a row of this report (rows: {', '.join(systems)})")


def _own_tables_sections(doc: Doc, files: dict[str, Any], opts: ReportOptions, st: frames.Store,
                         records: pd.DataFrame, own: pd.Series, decoders: pd.Series) -> None:
    """Other systems' own tables, before the generic ones: the layouts asked for (a preset's, or
    table=<layout>), the students distilled on a corpus (`own`), the decoder students (`decoders`)."""
    for key in opts.layouts:
        if key == EARLY_EXIT:
            _early_exit_section(doc, files, st.early_exit, opts)
        else:
            _layout_section(doc, files, LAYOUTS[key], records, opts)
    if own.any():
        _pretraining_sections(doc, files, st.records[own], opts)
    if decoders.any():
        _decoder_sections(doc, files, st.records[decoders], opts)


def _table1_sections(doc: Doc, files: dict[str, Any], opts: ReportOptions, st: frames.Store, records: pd.DataFrame,
                     sc: pd.DataFrame, paper_sc: pd.DataFrame, systems: list[str]) -> None:
    """Table 1 (one init, a row per system): the table, its t-tests and examples, the paper's numbers, dev curves."""
    table, t1_records, t1_sc = _table1(opts, records, sc)
    flagged = collapsed.flag_table(files, table, t1_sc)
    t1_paths = set(t1_records["path"])
    # one family for every verdict on the table's pairs: bold, the difference map's cells and the pooled tests
    join_family(table, opts.baseline, opts.alpha, True, pooled=[])
    tests = stats.paired_tests(t1_sc, "system", (), opts.alpha, levels=systems,
                               family_extra=others(table, "pooled"))
    join_family(table, opts.baseline, opts.alpha, True, pooled=tests["p"].tolist())
    _table_section(doc, files, table, opts)
    tests = _checked(tests, checks.pair_arms("system"), t1_records, table.metrics, opts.alpha)
    _tests_section(doc, files, "table1", "Table 1 paired t-tests: rows (same init)", tests, [], opts,
                   also=_also(table))
    for line in collapsed.tests_lines(flagged):
        doc.text(line)
    _examples_section(doc, files, "table1", t1_records, tests, table)
    if not tests.empty:
        tested = set(tests["a"]) | set(tests["b"])
        doc.figure('<div class="figures">' + figures.tests_matrix(
            tests, [s for s in systems if s in tested], "Table 1", opts.alpha) + "</div>")
    _every_init_section(doc, files, opts, records, sc, systems, others(table, "pooled"))
    if opts.paper:
        _paper_section(doc, files, "1", paper_sc[paper_sc["path"].isin(t1_paths)], opts, by_init=False)
    curves = dev_curves.curve_stages(st.curves, opts.curves)
    if not curves.empty:
        t1_curves = curves[curves["path"].isin(t1_paths)]
        files["curves.png"] = ("plot", t1_curves, table.title, systems, None)
        doc.figure(f"<h2>Dev curves: {table.title}</h2><p>{curves_text(opts.curves)}</p>"
                   + figures.curve_figures(t1_curves, systems, None))


def _every_init_section(doc: Doc, files: dict[str, Any], opts: ReportOptions, records: pd.DataFrame,
                        sc: pd.DataFrame, systems: list[str], table1_extra: list[float]) -> None:
    """Table 1's comparison of the objectives at every init the store holds, where it holds more than one: one
    tests table with an init column, so no init's comparison is left to a hover. Its Holm family holds Table 1's
    bold and difference-map tests too (`table1_extra`): a superset of Table 1's family, so a pair at Table 1's init
    that this table calls, Table 1's tests call too (Holm's adjusted p never falls as a family grows), and the
    two tables together name a winner between two identical rows no more often than Table 1 alone."""
    inits = frames.init_order(records)
    if len(inits) < 2 or sc.empty:
        return
    primary = records.groupby("task")["primary_metric"].first().to_dict()
    metrics = {t: paper.column_metric(t, opts.metric, primary.get(t)) for t in primary}  # as build_table's
    tests = stats.paired_tests(sc, "system", ("init_label",), opts.alpha, levels=systems, group_order=inits,
                               family_extra=table1_extra)
    tests = _checked(tests, checks.pair_arms("system", ("init_label",)), records, metrics, opts.alpha)
    extra = sum(not math.isnan(p) for p in table1_extra)
    _tests_section(doc, files, "table1_inits", "Table 1 at every init: paired t-tests of the objectives within each "
                   "init", tests, ["init_label"], opts, also=(extra, "Table 1 bold and difference-map tests"))


def _table1(opts: ReportOptions, records: pd.DataFrame, sc: pd.DataFrame
            ) -> tuple[Table, pd.DataFrame, pd.DataFrame]:
    """Table 1 of the records of its init (opts.table1_init), with those records and their scores."""
    t1_records, t1_note = frames.select_init(records, opts.table1_init)
    t1_sc = sc[sc["path"].isin(set(t1_records["path"]))]
    agg = stats.aggregate(t1_sc, ddof=opts.ddof, ci=opts.ci)
    labels = sorted(set(t1_records["init_label"]))
    names = sorted(set(t1_records["init_name"].astype(str)))  # the init shown, not the one asked for
    title = f"Table 1: objectives (init {', '.join(names) or opts.table1_init}: layers {', '.join(labels) or MISSING})"
    table = build_table("table1", title, t1_records, agg, stats.row_averages(agg), by_init=False,
                        metric_mode=opts.metric, scores=t1_sc, alpha=opts.alpha)
    if t1_note:
        table.notes.append(t1_note)
    return table, t1_records, t1_sc


def _table3_sections(doc: Doc, files: dict[str, Any], opts: ReportOptions, st: frames.Store, records: pd.DataFrame,
                     sc: pd.DataFrame, paper_sc: pd.DataFrame, systems: list[str]) -> None:
    """Table 3 (rows system x init): the table, t-tests of the inits within each row and their examples, every
    pair of rows per task, the paper's numbers, dev curves per row and init."""
    agg = stats.aggregate(sc, ddof=opts.ddof, ci=opts.ci)
    table = build_table("table3", "Table 3: objective x student initialisation", records, agg,
                        stats.row_averages(agg), by_init=True, metric_mode=opts.metric, scores=sc, alpha=opts.alpha)
    flagged = collapsed.flag_table(files, table, sc)
    inits = frames.init_order(records)
    # the table's claim is an interaction: tested in one Holm family with its rows' init tests, bold and the
    # difference map's cells (each corrected over all), stated under the table
    contrasts = init_interactions(sc, systems, inits, opts.alpha)["p"].dropna().tolist()
    join_family(table, opts.baseline, opts.alpha, interaction=contrasts, pooled=[])
    tests = stats.paired_tests(sc, "init_label", ("system",), opts.alpha, levels=inits, group_order=systems,
                               family_extra=others(table, "pooled"))
    join_family(table, opts.baseline, opts.alpha, interaction=contrasts, pooled=tests["p"].tolist())
    family = [p for p in others(table, "interaction") if not math.isnan(p)]
    inter = init_interactions(sc, systems, inits, opts.alpha, family_p=family)
    # one rule for every verdict (report/checks.py): the seed-level Holm test, then the multi-bootstrap's check
    tests = _checked(tests, checks.pair_arms("init_label", ("system",)), records, table.metrics, opts.alpha)
    inter = _checked(inter, checks.interaction_arms, records, table.metrics, opts.alpha)
    table.notes.append(interaction.table_note(inter, opts.alpha, len(family)))
    _table_section(doc, files, table, opts)
    _tests_section(doc, files, "table3", "Table 3 paired t-tests: inits within each row", tests,
                   ["system"], opts, also=_also(table))
    for line in collapsed.tests_lines(flagged):
        doc.text(line)
    interaction.interaction_section(doc, files, inter, opts.alpha, len(family))
    _examples_section(doc, files, "table3", records, tests, table, level="init_label", within=("system",))
    _per_task_figure(doc, table, sc, opts.alpha)
    if opts.paper:
        _paper_section(doc, files, "3", paper_sc, opts, by_init=True)
    curves = dev_curves.curve_stages(st.curves, opts.curves)
    if not curves.empty and curves["init_label"].nunique() > 1:
        files["curves_inits.png"] = ("plot", curves, "dev curves per row and init", systems, inits)
        doc.figure(f"<h2>Dev curves per row and init</h2><p>{curves_text(opts.curves)}</p>"
                   + figures.curve_figures(curves, systems, inits))


def _also(table: Table) -> tuple[int, str]:
    """The pooled tests' family beyond themselves (`_tests_section`'s `also`): the table's other verdict tests."""
    kinds = {"bold": "best-vs-runner-up (bold)", "baseline": "difference-map (vs the baseline)",
             "interaction": "objective x init interaction"}
    counts = {k: sum(not math.isnan(p) for p in ps) for k, ps in table.family.items() if k != "pooled"}
    named = [f"{n} {kinds.get(k, k)}" for k, n in counts.items() if n]
    return sum(counts.values()), "testable other verdict tests (" + ", ".join(named) + ")"


def _checked(claims: pd.DataFrame, arms: Any, records: pd.DataFrame, metrics: dict[str, str], alpha: float
             ) -> pd.DataFrame:
    """`checks.apply` on a table's claims (`metrics`: task -> the column's metric), reading the runs' dev predictions
    only when the seed-level test calls one."""
    if claims.empty or not claims["significant_holm"].any():
        return claims.assign(p_check=math.nan, p_check_holm=math.nan)
    done = records[records["status"] == "completed"]
    cache, _ = examples.usable_predictions(done)  # the runs left out are named by the examples section
    return checks.apply(claims, arms, done, cache, metrics, alpha)


def _per_task_figure(doc: Doc, table: Table, sc: pd.DataFrame, alpha: float) -> None:
    """Every pair of Table 3's rows tested within each task (the HTML page's matrices), rows named as in the table."""
    names = {(r.system, r.init): " / ".join(r.labels) for r in table.rows}
    rows = [names.get((system, init), f"{system} / {init}")
            for system, init in zip(sc["system"], sc["init_label"], strict=True)]
    matrices = figures.per_task_matrices(sc.assign(row=rows), list(names.values()), alpha)
    if matrices:
        doc.figure("<h2>Table 3 per task: every pair of rows</h2><p>paired on seeds within the task; one family for "
                   "all the matrices below: Holm and ASO's Bonferroni over every task's pairs together, apart from "
                   "the table's family (checked by simulation: for a pair of identical rows they add no verdict "
                   "beyond alpha; docs/guide/report.md, 'One verdict per question')</p>" + matrices)


def _records_sections(doc: Doc, opts: ReportOptions, st: frames.Store, counts: dict[str, int]) -> None:
    """The jobs: failed and running ones, the preset's grid, every record (HTML page), the records left out."""
    _jobs_sections(doc, st.records)
    _grid_section(doc, st.records, opts.preset)
    counts_line = ", ".join(f"{n} {status}" for status, n in counts.items())
    doc.figure(f"<h2>Jobs ({counts_line})</h2><p>every record, failed first; the link opens its result.json</p>"
               + figures.jobs_table(st.records, lambda p: Path(os.path.relpath(p, opts.out_dir)).as_posix()))
    if st.skipped:
        doc.heading(f"Records left out ({len(st.skipped)})")
        _listing(doc, st.skipped)


def _table_section(doc: Doc, files: dict[str, Any], table: Table, opts: ReportOptions) -> None:
    selection = selection_text(opts.which)
    table.ci_method = opts.ci  # every table's cells were aggregated with it
    doc.heading(table.title)
    headers, rows = table_rows(table, "terminal")
    _, md_rows = table_rows(table, "markdown")
    runs = files.get(f"runs_{table.key}.csv")  # collapsed runs marked, values per seed on hover (report.collapsed)
    rows, md_rows = collapsed.mark_cells(table, runs, rows), collapsed.mark_cells(table, runs, md_rows)
    doc.table(headers, rows, md_rows, tips=collapsed.seed_tips(table, runs, figures.table_tips(table)), css="report")
    for note in table_footnotes(table, opts.ddof, selection):
        doc.text(note)
    doc.figure(figures.table_heatmaps(table, opts.baseline, opts.alpha))
    files[f"{table.key}.md"] = render_markdown(table, opts.ddof, selection)
    files[f"{table.key}.tex"] = render_latex(table, opts.ddof, selection)
    files[f"{table.key}.csv"] = table_csv(table, opts.ddof, opts.which)


def _tests_section(doc: Doc, files: dict[str, Any], key: str, title: str, tests: pd.DataFrame,
                   within: list[str], opts: ReportOptions, also: tuple[int, str] = (0, "")) -> None:
    """`also`: the number and name of the table's other tests in the same Holm family (Table 3: its interaction
    contrasts), said in the family's line."""
    doc.heading(title)
    if tests.empty:
        doc.text("no pairs to test (fewer than two levels with completed runs)")
        return
    records = tests.to_dict("records")
    testable = [r for r in records if r["testable"]]
    untestable = [f"{pair_name(r, within)} ({r['note']})" for r in records if not r["testable"]]
    pairs = "pair" if len(testable) == 1 else "pairs"
    family = f"the {len(testable)} testable {pairs} of {len(records)}"
    if also[0]:
        family = f"one family of {len(testable) + also[0]}: {family} and the table's {also[0]} {also[1]}"
    doc.text("two-sided paired t-test (scipy.stats.ttest_rel) on scores matched by (task, seed), pooled "
             f"over tasks; Holm correction over {family}"
             + (f"; not testable: {', '.join(untestable)}" if untestable else "")
             + "; the same family ASO's verdict is Bonferroni-corrected over and the seeds needed are planned for")
    doc.text(f"one verdict per pair: 'significant' (and the matrix's `*`, ASO's verdict) is {checks.RULE}; the per-task "
             "comparisons over dev examples below are statistics, not further verdicts")
    for line in tests_legend(tests, opts.alpha, also[0]):
        doc.text(line)
    headers, rows = tests_rows(tests, within, opts.alpha)
    doc.table(headers, rows)
    doc.text(aso_verdict_text(records, within, len(testable) + also[0], opts.alpha))
    few = [f"{pair_name(r, within)} ({r['n']} pairs)" for r in testable if r["few_pairs"]]
    if few:
        doc.text(f"caution: {len(few)} test(s) rest on fewer than {stats.MIN_RELIABLE_PAIRS} pairs (under 2 "
                 f"degrees of freedom), their p is unreliable: {', '.join(few)}")
    if not testable:
        doc.text(f"no pair could be tested, so none is called significant or not at alpha={opts.alpha}")
    else:
        raw = [_open(r, within) for r in testable if not r["significant"]]
        doc.text(f"NOT significant at alpha={opts.alpha} (raw p, as in the paper), of the {len(testable)} "
                 f"testable: " + ("; ".join(raw) or "none"))
        extra = [_open(r, within) for r in testable if not r["significant_holm"] and r["significant"]]
        doc.text("additionally not called after Holm: " + ("; ".join(extra) or "none"))
        if raw or extra:
            doc.text("not significant is not shown equal: each pair above with its "
                     f"{100 * (1 - opts.alpha):g}% CI and the difference its pairs would detect with 80% power at "
                     "Holm's first-step level (at the observed spread); a difference below it cannot be ruled out")
    files[f"ttests_{key}.csv"] = tests


def _open(r: dict[str, Any], within: list[str]) -> str:
    """A pair that is not called, with what it cannot rule out."""
    return (f"{pair_name(r, within)} {fmt_ci(r['ci_low'], r['ci_high'])}, below \u00b1{r['detectable']:.2f} "
            "cannot be ruled out")


def _examples_section(doc: Doc, files: dict[str, Any], key: str, records: pd.DataFrame, tests: pd.DataFrame,
                      table: Table, level: str = "system", within: tuple[str, ...] = ()) -> None:
    """The pairs of a tests table over seeds and dev examples (report.examples), where records carry predictions:
    `level` is the records' column the pairs' a and b name, `within` the columns the tests hold fixed."""
    if tests.empty:
        return
    rows, frame, notes = examples.comparisons(records, tests, table.metrics, level, within)
    if not rows and not notes and frame.empty:
        return
    name = table.title.split(":")[0]
    if rows or notes:
        doc.heading(f"{name}: comparisons over seeds and dev examples")
    if rows:
        seeds = frame[frame["kind"] == examples.KIND_SEEDS].drop(columns=["kind", "one_seed", "one_seed_test",
                                                                          "one_seed_p"])
        seeds = seeds.assign(p_holm=stats.holm(seeds["p"].to_numpy()))
        doc.table([*examples.headers(within), "p (Holm)"],
                  [[*row, fmt_p(p)] for row, p in zip(rows, seeds["p_holm"], strict=True)])
        doc.text(f"Holm over its {len(seeds)} multi-bootstrap p-values (every pair x task above): statistics per "
                 "task, not verdicts; a pair's one verdict is its tests table's, which the same multi-bootstrap "
                 "pooled over the pair's tasks must also carry")
        files[f"examples_{key}.csv"] = seeds
    for note in notes:
        doc.text(note)
    runs = examples.two_runs_rows(frame, within)
    if runs:  # apart from the methods' verdicts: it tests two runs, not two methods
        doc.defer("h", f"{name}: tests of two single runs over dev examples (not of the methods)")
        doc.defer("p", "pairs with one matched seed: McNemar's test for accuracy (exact below "
                  f"{example_stats.MCNEMAR_EXACT_BELOW} discordant examples), else a paired bootstrap over the "
                  "examples. It covers only the sampling of the dev examples: it says whether these two runs differ "
                  "on this dev set, not whether the methods do (a second seed of each can reverse it; two equal "
                  "methods whose runs vary by seed are called different far more often than p says)")
        two = frame[frame["kind"] == examples.KIND_TWO_RUNS].drop(columns=["kind", "ci_low", "ci_high", "p"])
        two = two.assign(one_seed_p_holm=stats.holm(two["one_seed_p"].to_numpy()))
        runs = [[*row, fmt_p(p)] for row, p in zip(runs, two["one_seed_p_holm"], strict=True)]
        doc.defer("t", ([*examples.two_runs_headers(within), "p (Holm)"], runs, runs, None, ""))
        doc.defer("p", f"one family, this table: Holm over its {len(two)} p-values")
        files[f"two_runs_{key}.csv"] = two


def _paper_section(doc: Doc, files: dict[str, Any], which_table: str, paper_sc: pd.DataFrame,
                   opts: ReportOptions, by_init: bool) -> None:
    doc.heading(f"Comparison with the paper's Table {which_table} (paper metrics: accuracy everywhere)")
    path = Path(opts.paper_dir) / paper.PAPER_FILES[which_table]
    if not path.is_file():
        doc.text(f"paper numbers not found at {path}; comparison skipped")
        return
    agg = stats.aggregate(paper_sc, ddof=opts.ddof, ci=opts.ci)
    settings = paper_sc[paper.SETTING_COLUMNS].drop_duplicates(["system", "init_label"])
    comp, excluded = paper.compare_with_paper(agg, stats.row_averages(agg), settings, paper.load_paper_table(path))
    setting = (f"procedure {paper.PAPER_PROCEDURE}, a {paper.PAPER_TEACHER_LAYERS}-layer teacher, a "
               f"{paper.PAPER_STUDENT} {paper.PAPER_STUDENT_LAYERS}-layer student, init "
               + ", ".join(f"{name} = {layers}" for name, layers in paper.PAPER_INIT_LAYERS.items()))
    if comp.empty:
        doc.text(f"no cell in common with the paper (its setting: {setting}; same objective, init rule and GLUE task)")
    else:
        headers, rows = comparison_rows(comp, by_init)
        doc.table(headers, rows)
        cells = comp[comp["task"] != "avg"]
        doc.text(f"ours vs paper (ours - paper) over {len(cells)} matched cells: mean delta "
                 f"{cells['delta'].mean():+.2f}, mean |delta| {cells['delta'].abs().mean():.2f}; "
                 "paper MRPC/CoLA columns are accuracy (see results/paper/README.md)")
        files[f"paper_table{which_table}.csv"] = comp
    if not excluded.empty:
        doc.text(f"not compared, not the paper's setting ({setting}):")
        _listing(doc, [f"{r['system']} [{r['init_label']}]: {r['reason']}" for r in excluded.to_dict("records")])


def _layout_section(doc: Doc, files: dict[str, Any], layout: Layout, records: pd.DataFrame,
                    opts: ReportOptions) -> None:
    """Another system's own table (report.layouts): the table, t-tests against its baselines, the paper's
    numbers beside ours."""
    built = layout_table.build_layout(layout, records, opts.metric, opts.ddof, opts.alpha, opts.paper_dir, opts.ci,
                                      opts.baseline)
    if built.n_records == 0:
        doc.heading(layout.title)
        doc.text(f"no records of this layout's rows ({', '.join(layout.row_headers)}: "
                 + "; ".join(" / ".join(row) for row in layout.skeleton) + ")")
        return
    built.table.notes += [f"note: {note}" for note in built.notes]
    layout_sc, _ = frames.scores(built.records, layout.metric_mode or opts.metric)
    flagged = collapsed.flag_table(files, built.table, layout_sc, dict(zip(
        zip(built.records["system"], built.records["init_label"], strict=True), built.records["row"], strict=True)))
    _table_section(doc, files, built.table, opts)
    built.tests = _checked(built.tests, checks.pair_arms("row"), built.records, built.table.metrics, opts.alpha)
    _tests_section(doc, files, layout.key, f"{layout.title}: paired t-tests against the baselines", built.tests,
                   [], opts, also=_also(built.table))
    for line in collapsed.tests_lines(flagged):
        doc.text(line)
    _examples_section(doc, files, layout.key, built.records, built.tests, built.table, level="row")
    if opts.paper and built.comparison is not None:
        doc.heading(f"{layout.title}: the paper's numbers beside ours")
        metrics = {t: paper.column_metric(t, layout.metric_mode or opts.metric) for t in set(built.comparison["task"])}
        headers, rows = method_comparison_rows(built.comparison, metrics)
        doc.table(headers, rows)
        doc.text("ours vs the paper's printed number (ours - paper); — = no number of ours to set beside it (no "
                 "completed run, or a row not compared: listed below)")
        files[f"paper_{layout.key}.csv"] = built.comparison
    if built.not_compared:
        doc.text("not compared with the paper:")
        _listing(doc, built.not_compared)


def _early_exit_section(doc: Doc, files: dict[str, Any], exits: pd.DataFrame, opts: ReportOptions) -> None:
    """FastBERT's speed-accuracy trade-off: per task, row and speed, the metric (mean±std over seeds), the
    mean exit layer and the mean speed-up in FLOPs over the full model; paired t-tests of each speed against
    speed 0 (every example through every layer: the full model)."""
    doc.heading("Early exit: speed vs accuracy (FastBERT)")
    if exits.empty:
        doc.text("no early-exit records (procedure=fastbert, e.g. experiment=fastbert)")
        return
    grouped = exits.groupby(["task", "system", "speed"], sort=True)
    summary = grouped.agg(mean=("value", "mean"), std=("value", "std"), n=("value", "count"),
                          exit_layer=("mean_exit_layer", "mean"), speedup=("speedup", "mean"),
                          metric=("metric", "first")).reset_index()
    rows = [[paper.task_label(r.task), r.system, f"{r.speed:g}", fmt_mean_std(r.mean, r.std, int(r.n)),
             f"{r.exit_layer:.2f}", f"{r.speedup:.2f}x"] for r in summary.itertuples(index=False)]
    doc.table(["task", "row", "speed", "dev metric", "mean exit layer", "speed-up (FLOPs)"], rows)
    doc.text("an example leaves at the first layer whose normalised entropy is <= speed; speed 0 = the full "
             "model; FLOPs counted from the layer shapes over each example's real tokens")
    files["early_exit.csv"] = summary
    files["early_exit.png"] = ("speed_plot", summary)
    if 0.0 not in set(exits["speed"]):
        doc.text("no speed 0 (the full model) among procedure.speeds: no t-tests")
        return
    levels = exits.assign(level=[f"speed {s:g}" for s in exits["speed"]])
    pairs = [(f"speed {s:g}", "speed 0") for s in sorted(set(exits["speed"]) - {0.0})]
    tests = stats.paired_tests(levels, "level", ("system",), opts.alpha, pairs=pairs)
    _tests_section(doc, files, "early_exit", "Early exit paired t-tests: each speed vs speed 0 (the full model)",
                   tests, ["system"], opts)


def fmt_mean_std(mean: float, std: float, n: int) -> str:
    return f"{mean:.1f}±{std:.2f} ({n})" if not math.isnan(std) else f"{mean:.1f} ({n})"


def _job_line(rec: dict[str, Any]) -> str:
    """A job of the records or of a preset's grid: task / row / init / its seeds (every source that tells it apart)."""
    seeds = rec.get("seed_label") or f"seed {rec['seed']}"
    return f"{rec['task']} / {rec.get('system') or rec['objective']} / init {rec['init_spec']} / {seeds}"


def _listing(doc: Doc, items: list[str]) -> None:
    for item in items[:MAX_LISTED]:
        doc.text(f"- {item}")
    if len(items) > MAX_LISTED:
        doc.text(f"- ... and {len(items) - MAX_LISTED} more")


def _jobs_sections(doc: Doc, records: pd.DataFrame) -> None:
    failed = records[records["status"] == "failed"]
    if not failed.empty:
        doc.heading(f"Failed jobs ({len(failed)})")
        lines = []
        for rec in failed.to_dict("records"):
            err = (rec["error"] or "no error message").strip().splitlines() or ["no error message"]
            lines.append(f"{_job_line(rec)}: {err[0]}  [{rec['path']}]")
        _listing(doc, lines)
    running = records[records["status"] == "running"]
    if not running.empty:
        doc.heading(f"Running jobs ({len(running)})")
        _listing(doc, [f"{_job_line(r)}  (started {r['started_at']})" for r in running.to_dict("records")])


def _grid_section(doc: Doc, records: pd.DataFrame, preset: str | None) -> None:
    if preset is None:
        return
    doc.heading(f"Grid status versus preset {preset!r}")
    try:
        from distill_sweep.sweep.compose import expected_jobs
    except ImportError as exc:
        doc.text(f"grid comparison skipped: distill_sweep.sweep.compose.expected_jobs is unavailable ({exc})")
        return
    try:
        expected = list(expected_jobs(preset))
    except Exception as exc:  # Hydra composition errors have no common base worth naming: a bad preset
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise UsageError(f"preset {preset!r}: {type(exc).__name__}: {first}") from None
    completed, failed, missing = grid_status.grid_status(records, expected)
    running = {key for r in records[records["status"] == "running"].to_dict("records")
               for key in (grid_status.job_key(r["task"], r["objective"], r["init_spec"], r["seed"]),
                           ("hash", str(r["config_hash"])[:10]))}
    keys = [next((k for k in grid_status.expected_keys(j) if k in running), None) for j in missing]
    n_running = sum(k is not None for k in keys)
    doc.text(f"{len(expected)} expected jobs: {len(completed)} completed, {len(failed)} failed, "
             f"{len(missing)} missing ({n_running} of them running, {len(missing) - n_running} not started)")
    _listing(doc, [f"{'running' if k is not None else 'missing'}: {_job_line(j)}" for j, k in zip(missing, keys, strict=True)]
             + [f"failed: {_job_line(j)}" for j in failed])
    not_started = [j for j, k in zip(missing, keys, strict=True) if k is None]
    if not_started:  # the HTML page lists them all (the text above stops at MAX_LISTED)
        doc.figure(figures.missing_table(not_started, preset))


def _decoder_sections(doc: Doc, files: dict[str, Any], records: pd.DataFrame, opts: ReportOptions) -> None:
    """The decoder tables (distill_sweep.report.decoder): objective x init with perplexity, t-tests vs fkl."""
    frame = decoder.runs(records)
    if frame.empty:
        doc.heading("Decoder distillation")
        doc.text(f"{len(records)} causal_lm record(s), none completed yet")
        return
    parts = decoder.setting_parts(frame)
    for i, (title, headers, rows, test_headers, tests, teacher) in enumerate(decoder.tables(frame, opts.ddof,
                                                                                             opts.alpha)):
        doc.heading(title)
        doc.text(teacher)
        doc.table(headers, rows)
        notes = [f"final epoch's dev values, mean±std over master seeds (ddof={opts.ddof}), (n) = master seeds (a "
                 "seed's runs that vary another source's seed averaged first: the unit of replication); perplexity: "
                 "lower is better" + (f"; {decoder.SOURCES_NOTE}" if "data" in headers else "")
                 + (f"; {decoder.GENERATION_NOTE}" if decoder.GENERATION_LABELS & set(headers) else ""),
                 *decoder.collapsed_notes(parts[i])]
        for note in notes:
            doc.text(note)
        files[f"decoder{i + 1}.md"] = plain_markdown(title, headers, rows, [teacher, *notes])
        files[f"decoder{i + 1}.tex"] = plain_latex(title, f"decoder{i + 1}", headers, rows, [teacher, *notes])
        if tests:
            doc.table(test_headers, tests)
            doc.text(f"paired t-tests by master seed (its runs averaged first) on perplexity, each objective vs fkl under the same init (and data "
                     f"source), each data source vs {decoder.FIXED} under the same objective and init; Holm over "
                     f"this table's tests, * below alpha={opts.alpha}; {100 * (1 - opts.alpha):g}% CI: the t-interval "
                     "of the mean difference over the seed pairs that the t-test inverts; d: Cohen's d_z")
            ex_rows, two_runs, ex_notes = decoder.comparisons(parts[i])
            if ex_rows:
                doc.table(decoder.EXAMPLE_HEADERS, ex_rows)
                files[f"decoder{i + 1}_sequences.csv"] = pd.DataFrame(ex_rows, columns=decoder.EXAMPLE_HEADERS)
            for note in ex_notes:
                doc.text(note)
            if two_runs:  # apart from the methods' verdicts: it tests two runs, not two methods
                doc.defer("h", f"{title}: tests of two single runs over dev sequences (not of the methods)")
                doc.defer("p", "pairs with one matched seed: a paired bootstrap over the dev sequences of the two "
                          "runs (a master seed's runs averaged first, where it has several). It covers only the "
                          "sampling of the dev sequences: whether these two runs differ on this dev set, not whether "
                          "the methods do; Holm over this table's rows")
                doc.defer("t", (decoder.TWO_RUNS_HEADERS, two_runs, two_runs, None, ""))
                files[f"decoder{i + 1}_two_runs.csv"] = pd.DataFrame(two_runs, columns=decoder.TWO_RUNS_HEADERS)
        files[f"decoder{i + 1}.csv"] = pd.DataFrame(rows, columns=headers)
        scored = decoder_lm_eval.table(parts[i], opts.ddof)
        if scored is not None:  # the lm-eval stage's scores (procedure.lm_eval)
            doc.heading(f"{title}: lm-eval")
            doc.table(*scored)
            doc.text(decoder_lm_eval.NOTE)
            for note in decoder_lm_eval.chance_notes(parts[i]):
                doc.text(note)
            files[f"decoder{i + 1}_lm_eval.csv"] = pd.DataFrame(scored[1], columns=scored[0])
            spread = decoder_lm_eval.spread(parts[i])
            if spread is not None:  # sampled with evaluation seeds: their spread beside the training seeds'
                doc.text(decoder_lm_eval.SAMPLED_NOTE)
                doc.table(*spread)
                doc.text(decoder_lm_eval.SPREAD_NOTE)
                files[f"decoder{i + 1}_lm_eval_spread.csv"] = pd.DataFrame(spread[1], columns=spread[0])
            compared, lm_notes = decoder_lm_eval.comparisons(parts[i])
            if compared:
                doc.table(decoder_lm_eval.COMPARISON_HEADERS, compared)
                files[f"decoder{i + 1}_lm_eval_tests.csv"] = pd.DataFrame(compared,
                                                                         columns=decoder_lm_eval.COMPARISON_HEADERS)
            for note in lm_notes:
                doc.text(note)
    files["decoder_runs.csv"] = frame.drop(columns=["teacher_dev", "path"])


def _pretraining_sections(doc: Doc, files: dict[str, Any], records: pd.DataFrame, opts: ReportOptions) -> None:
    """Tables 2 and 4 (distill_sweep.report.pretraining), each beside the paper's numbers."""
    sc, _ = frames.scores(records, opts.metric)
    best = pretraining.best_over_grid(pretraining.distilled_runs(records, sc))
    distilled = records[records["procedure"] == pretraining.SOURCE_PROCEDURE]
    if best.empty:
        doc.heading("Tables 2 and 4: students distilled on a corpus")
        doc.text(f"{len(distilled)} distillation record(s), no completed fine-tuning of their students yet "
                 "(finetune_grid runs them after the distillations)")
        return
    layouts = [("2", "Table 2: task-agnostic objectives (random init)", best[best["init"] == "random"], False),
               ("4", "Table 4: task-agnostic init (random vs first layers)", best, True)]
    for which, title, rows, by_init in layouts:
        if which not in opts.tables or rows.empty or (by_init and set(rows["init"]) == {"random"}):
            continue
        table = pretraining.build(f"table{which}", title, rows, by_init, opts.metric, opts.ddof, opts.ci)
        table.notes.append(f"{rows['points'].max()} fine-tuning grid point(s) per student and task at most; "
                           f"the best point of each cell is in table{which}_best_points.csv")
        _table_section(doc, files, table, opts)
        files[f"table{which}_best_points.csv"] = rows.drop(columns=["path"])
        if opts.paper:
            _pretraining_paper(doc, files, which, table, opts)


def _pretraining_paper(doc: Doc, files: dict[str, Any], which: str, table: Table, opts: ReportOptions) -> None:
    doc.heading(f"Comparison with the paper's Table {which} (single runs; MRPC F1, CoLA MCC)")
    path = Path(opts.paper_dir) / pretraining.PAPER_FILES[which]
    if not path.is_file():
        doc.text(f"paper numbers not found at {path}; comparison skipped")
        return
    ours, prior = pretraining.load_paper(path)
    comp = pretraining.compare(table, ours)
    if opts.metric != "header":
        doc.text("metric=paper shows accuracy in every column; the paper's Tables 2 and 4 head MRPC F1 and CoLA "
                 "MCC, so those two columns are not compared")
        comp = comp[~comp["task"].isin(["mrpc", "cola", "avg"])]
    if comp.empty:
        doc.text("no cell in common with the paper (same objective, init and GLUE task)")
    else:
        doc.table(["row", "init", "task", "n", "ours", "paper", "ours - paper"],
                  [[r.row, r.init, paper.task_label(r.task) if r.task != "avg" else "Avg",
                    "" if pd.isna(r.n) else str(int(r.n)), f"{r.ours:.1f}", f"{r.paper:.1f}", f"{r.delta:+.1f}"]
                   for r in comp.itertuples(index=False)])
        files[f"paper_table{which}.csv"] = comp
    if which == "2" and not prior.empty:
        headers, rows = pretraining.reference_rows(prior)
        doc.text("reference lines, the prior work in the paper's Table 2 (their own papers' numbers):")
        doc.table(headers, rows)
