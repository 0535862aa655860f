"""The report's comparisons over seeds and dev examples, for the pairs a tests table compares: per task, the
multi-bootstrap of the difference (analysis/example_stats.py) over the seeds both rows ran (at least 2), from
the records' dev predictions (records/predictions.py). A pair with one seed gets instead a test of its two runs
over the dev examples (McNemar / paired bootstrap): it says only that these two runs differ on this dev set
(dev-example sampling), nothing about the methods, so the report prints it apart (TWO_RUNS_HEADERS). Records
without predictions (written before they were stored) leave their pair to the seed-level statistics, said in
one line; a run whose predictions cannot stand for its record (a damaged file, another dev set than its record's
or than most runs compared with it, numbers that are not its record's: analysis/prediction_checks.py) is left
out of these comparisons and named with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from distill_sweep.analysis import collapse, example_stats, few_seeds, prediction_checks
from distill_sweep.analysis.paper import METRIC_ABBREV, task_label, task_order
from distill_sweep.records.predictions import PREDICTIONS, DevPredictions, PredictionsError, read_predictions
from distill_sweep.records.record import RecordError, load_record
from distill_sweep.report.render import ONE_EXAMPLE_BELOW, one_example_text

HEADERS = ["task", "A", "B", "seeds", "examples", "mean(A-B)", "95% CI (multi-bootstrap)", "p (multi-bootstrap)"]
TWO_RUNS_HEADERS = ["task", "run A", "run B", "seed", "examples", "mean(A-B)", "test of the two runs", "p"]
KIND_SEEDS, KIND_TWO_RUNS = "seeds x examples", "two runs"  # the frame's `kind`: which table a pair is in


def headers(within: Sequence[str] = ()) -> list[str]:
    """The table's columns: HEADERS with the columns a pair is compared within (Table 3: the row) after task."""
    return [HEADERS[0], *within, *HEADERS[1:]]


def two_runs_headers(within: Sequence[str] = ()) -> list[str]:
    return [TWO_RUNS_HEADERS[0], *within, *TWO_RUNS_HEADERS[1:]]


def run_name(row: dict[str, Any]) -> str:
    """A run as the notes name it: task / row / init / seed, and its directory."""
    return (f"{row['task']} / {row['system']} / init {row['init_label']} / seed {row['seed']} "
            f"({Path(row['path']).parent / PREDICTIONS})")


def usable_predictions(done: pd.DataFrame) -> tuple[dict[str, DevPredictions | None], dict[str, str]]:
    """Each completed record's predictions that can stand for it (path -> predictions; None: the record has none,
    written before they were kept), and the runs left out (path -> why, one line): a file that cannot be read or
    trusted, predictions made on another dev set than the record's, or that do not give its metric back
    (analysis/prediction_checks.py)."""
    usable: dict[str, DevPredictions | None] = {}
    left_out: dict[str, str] = {}
    for row in done.to_dict("records"):
        path = str(row["path"])
        try:
            got = read_predictions(Path(path).parent)
        except PredictionsError as exc:
            text = str(exc)
            left_out[path] = text.split(": ", 1)[1] if ": " in text else text  # the notes name the file
            continue
        if got is None:
            usable[path] = None
            continue
        try:
            why = prediction_checks.reason(got, load_record(Path(path)))
        except RecordError as exc:
            why = f"its record cannot be read ({exc})"
        if why is None:
            usable[path] = got
        else:
            left_out[path] = why
    return usable, left_out


def comparisons(records: pd.DataFrame, tests: pd.DataFrame, metrics: dict[str, str], level: str = "system",
                within: Sequence[str] = ()) -> tuple[list[list[str]], pd.DataFrame, list[str]]:
    """Rows of the table (`headers(within)`), its CSV frame and the notes, for every pair (a, b) of `tests` on
    every task both ran. `records`: the table's records (status, path, task, seed, the `level` column whose
    values a and b are, and the `within` columns the tests hold fixed: Table 1 compares systems, Table 3 the
    inits of one system); `metrics`: task -> the column's metric. A run whose predictions cannot stand for its
    record, or were made on another dev set than most of the runs a comparison pools, is left out and named."""
    done = records[records["status"] == "completed"]
    cache, left_out = usable_predictions(done)
    frame: list[dict] = []
    without, unsupported = 0, set()
    no_file: set[str] = set()
    collapsed_runs: dict[str, str] = {}
    collapsed_mark = "‡"
    # (within..., level, task, master seed) -> its runs: several where a grid crosses another source's seed; the
    # unit of replication is the master seed, its runs averaged (analysis/replication.py)
    by_key: dict[tuple, list[str]] = {}
    seeds_of: dict[tuple, set[int]] = {}  # (within..., level, task) -> its seeds
    for r in done.to_dict("records"):
        unit = (*(r[w] for w in within), r[level], r["task"])
        by_key.setdefault((*unit, int(r["seed"])), []).append(r["path"])
        seeds_of.setdefault(unit, set()).add(int(r["seed"]))

    def has_file(path: str) -> bool:
        return cache.get(path) is not None or path in left_out
    tasks = task_order(set(done["task"]))
    for pair in tests.to_dict("records"):
        fixed = tuple(pair[w] for w in within)
        for task in tasks:
            seeds = sorted(seeds_of.get((*fixed, pair["a"], task), set()) & seeds_of.get((*fixed, pair["b"], task), set()))
            if not seeds:
                continue
            metric = metrics.get(task, "accuracy")
            if not example_stats.supported(metric):
                unsupported.add(metric)
                continue
            paths = [(s, by_key[(*fixed, pair["a"], task, s)], by_key[(*fixed, pair["b"], task, s)]) for s in seeds]
            if all(not any(map(has_file, pa)) or not any(map(has_file, pb)) for _, pa, pb in paths):
                without += 1  # no run of some seed has a file: written before records kept them
                continue
            for _, pa, pb in paths:  # a seed whose other runs have predictions: say why this one has none
                no_file.update(path for path in (*pa, *pb) if not has_file(path))
            usable = [(s, [(x, cache[x]) for x in pa if cache.get(x) is not None],
                       [(x, cache[x]) for x in pb if cache.get(x) is not None]) for s, pa, pb in paths]
            same = _one_dev_set([u for u in usable if u[1] and u[2]], left_out)
            if not same:
                continue
            split = prediction_checks.scored_split(same[0][1][0][1])
            labels = same[0][1][0][1].labels[split]
            frame.append(_scored(same, seeds, split, labels, metric, collapsed_runs,
                                 {"task": task, **dict(zip(within, fixed, strict=True)), "a": pair["a"],
                                  "b": pair["b"], "metric": metric}))
    out = pd.DataFrame(frame)
    rows = [_row(r, within, collapsed_mark) for r in out.to_dict("records") if r["kind"] == KIND_SEEDS] \
        if frame else []
    notes = []
    if rows:
        metric_names = ", ".join(sorted({METRIC_ABBREV.get(m, m) for m in metrics.values()}))
        notes.append(f"multi-bootstrap (Sellam et al. 2022): {example_stats.RESAMPLES:,} resamples of the seeds both "
                     "rows ran (at least 2) and of the dev examples together (seeded), the same for A and B; p "
                     f"two-sided; the column's metric ({metric_names}) on the best epoch's predictions (by the primary "
                     "metric); at few seeds its seed part undercovers, so the interval is the hull of it and the "
                     "t-interval of the per-seed differences, p the larger of the two (p_bootstrap, p_seeds in the "
                     "CSV); a pair with one seed is not here: see the tests of two runs")
    if any(_zero_width(r["ci_low"], r["ci_high"]) for r in frame if r["kind"] == KIND_SEEDS):
        notes.append(ZERO_WIDTH_NOTE)
    notes += one_example_notes(out[out["kind"] == KIND_SEEDS] if rows else out.iloc[0:0])
    if without:
        notes.append(f"note: {without} pair(s) x task without dev predictions in their records (written before "
                     "records kept them): seed-level statistics only")
    if unsupported:
        notes.append(f"note: no per-example statistics for {', '.join(sorted(unsupported))} (only "
                     f"{', '.join(example_stats.METRICS)}): seed-level statistics only")
    named = {r["path"]: r for r in done.to_dict("records")}
    notes += [f"note: predictions left out: {run_name(named[p])}: {why}" for p, why in left_out.items()]
    notes += [f"note: no predictions (written before records kept them): {run_name(named[p])}"
              for p in sorted(no_file)]
    notes += [f"{collapsed_mark} collapsed run (kept in the comparison): {run_name(named[p])}: {why}"
              for p, why in collapsed_runs.items()]
    return rows, out, notes


Runs = list[tuple[str, DevPredictions]]  # a unit's runs of one side: (record path, its predictions)


def _scored(same: list[tuple[int, Runs, Runs]], seeds: list[int], split: str, labels: np.ndarray, metric: str,
            collapsed_runs: dict[str, str], head: dict[str, Any]) -> dict[str, Any]:
    """One pair x task's row of the CSV frame: its seeds (left out, collapsed: the collapsed runs are named in
    `collapsed_runs`), then the multi-bootstrap with its few-seeds guard (KIND_SEEDS) or, at one seed, the test
    of the two runs (KIND_TWO_RUNS). `same`: per master seed, the runs of A and of B (several where a grid crosses
    another source's seed: each unit's score is the mean of its runs')."""
    a = [np.stack([p.preds[split] for _, p in ra]) for _, ra, _ in same]
    b = [np.stack([p.preds[split] for _, p in rb]) for _, _, rb in same]
    dropped = sorted(set(seeds) - {s for s, _, _ in same})
    flagged = []  # seeds with a collapsed run (analysis/collapse.py): kept, marked and named
    for s, ra, rb in same:
        for path, got in (*ra, *rb):
            why = _collapsed(got.preds[split], labels, metric)
            if why:
                collapsed_runs[path] = why
                flagged.append(s)
    entry = {**head, "seeds": len(same), "seeds_matched": len(seeds), "seeds_left_out": " ".join(map(str, dropped)),
             "seeds_collapsed": " ".join(map(str, sorted(set(flagged)))), "examples": len(labels)}
    if len(same) == 1:  # two runs: a test of these runs over the examples, not of the methods
        test, p_one = example_stats.one_seed_test(a[0][0], b[0][0], labels, metric)
        diff = weighted_metric_diff(a[0][0], b[0][0], labels, metric)
        return {**entry, "kind": KIND_TWO_RUNS, "mean_diff": 100 * diff, "ci_low": math.nan, "ci_high": math.nan,
                "p": math.nan, "one_seed": same[0][0], "one_seed_test": test, "one_seed_p": p_one}
    mb = few_seeds.multi_bootstrap(a, b, labels, metric)  # with its small-sample guard
    return {**entry, "kind": KIND_SEEDS, "mean_diff": 100 * mb["diff"], "ci_low": 100 * mb["ci_low"],
            "ci_high": 100 * mb["ci_high"], "p": mb["p"], "p_bootstrap": mb["p_bootstrap"], "p_seeds": mb["p_seeds"],
            "one_seed": math.nan, "one_seed_test": "", "one_seed_p": math.nan}


def _row(r: dict, within: Sequence[str], collapsed_mark: str) -> list[str]:
    left_out = f"; seed {', '.join(r['seeds_left_out'].split())} left out" if r["seeds_left_out"] else ""
    seeds = f"{r['seeds']}" + (f" (of {r['seeds_matched']}{left_out})" if r["seeds_matched"] != r["seeds"] else "")
    return [task_label(r["task"]), *(str(r[w]) for w in within), r["a"], r["b"],
            seeds + (f" {collapsed_mark}" if r["seeds_collapsed"] else ""), str(r["examples"]),
            f"{r['mean_diff']:+.2f}", _interval(r["ci_low"], r["ci_high"]), _p(r["p"])]


def _zero_width(low: float, high: float) -> bool:
    return not (math.isnan(low) or math.isnan(high)) and low == high


def _interval(low: float, high: float) -> str:
    """The interval as `[low, high]`, or named where it has no width (ZERO_WIDTH_NOTE says what that means)."""
    return f"zero width, at {low:+.2f}" if _zero_width(low, high) else f"[{low:+.2f}, {high:+.2f}]"


ZERO_WIDTH_NOTE = ("zero width: every resample of the seeds and dev examples gave the same difference, since the runs "
                   "of A and of B were right on the same dev examples in every seed; that is no precision but nothing "
                   "to resample, and its p of 1 says only that no difference was seen on these examples")


def one_example_notes(frame: pd.DataFrame) -> list[str]:
    """Per task compared here on fewer than 1,000 dev examples, what one example weighs: 100/n points of accuracy
    (of F1 or MCC about as much), the smallest step a score on that dev set can take; differences below it are one
    example either way."""
    if frame.empty:
        return []
    notes = []
    for task, n in sorted({(str(t), int(n)) for t, n in zip(frame["task"], frame["examples"], strict=True)}):
        if 0 < n < ONE_EXAMPLE_BELOW:
            notes.append(f"{one_example_text(task, n)}: a difference under that is less than one example per run")
    return notes


def two_runs_rows(frame: pd.DataFrame, within: Sequence[str] = ()) -> list[list[str]]:
    """The tests of two runs (pairs with one seed: `kind` KIND_TWO_RUNS), TWO_RUNS_HEADERS with `within`."""
    if frame.empty:
        return []
    return [[task_label(r["task"]), *(str(r[w]) for w in within), f"{r['a']} (seed {int(r['one_seed'])})",
             f"{r['b']} (seed {int(r['one_seed'])})", str(int(r["one_seed"])), str(r["examples"]),
             f"{r['mean_diff']:+.2f}", r["one_seed_test"], _p(r["one_seed_p"])]
            for r in frame.to_dict("records") if r["kind"] == KIND_TWO_RUNS]


def weighted_metric_diff(a: np.ndarray, b: np.ndarray, labels: np.ndarray, metric: str) -> float:
    """metric(A) - metric(B) on every example once."""
    ones = np.ones((1, len(labels)))
    return float(example_stats.weighted_metric(metric, a, labels, ones)[0]
                 - example_stats.weighted_metric(metric, b, labels, ones)[0])


def _collapsed(preds: np.ndarray, labels: np.ndarray, metric: str) -> str | None:
    """analysis/collapse.py's rule on one run's dev predictions."""
    score = float(example_stats.weighted_metric(metric, preds, labels, np.ones((1, len(labels))))[0])
    return collapse.reason(score, metric, collapse.majority_score(labels, metric), preds, labels)


def _one_dev_set(usable: list[tuple[int, Runs, Runs]], left_out: dict[str, str]) -> list[tuple[int, Runs, Runs]]:
    """The runs whose predictions were made on the dev content most of these runs were (records that keep no dev
    hash are only checked here), and the seeds left with runs of both A and B; the other runs go to `left_out`
    with the reason."""
    if not usable:
        return []
    split = prediction_checks.scored_split(usable[0][1][0][1])

    def dev(p: DevPredictions) -> str | None:
        return p.dev_hash.get(split or "") if split in p.preds else None

    most = prediction_checks.majority_dev(dev(p) for _, ra, rb in usable for _, p in (*ra, *rb))
    same = []
    for s, ra, rb in usable:
        for path, p in (*ra, *rb):
            if most is None or dev(p) != most:
                left_out.setdefault(path, f"its predictions were made on another dev set ({split} content "
                                          f"{prediction_checks.short(dev(p))}) than most runs it is compared "
                                          f"with ({prediction_checks.short(most)})")
        keep_a = [(x, p) for x, p in ra if most is not None and dev(p) == most]
        keep_b = [(x, p) for x, p in rb if most is not None and dev(p) == most]
        if keep_a and keep_b:
            same.append((s, keep_a, keep_b))
    return same


def _p(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return f"{value:.2e}" if value < 1e-3 else f"{value:.4f}"
