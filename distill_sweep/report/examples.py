"""The report's comparisons over seeds and dev examples, for the pairs a tests table compares: per task, the
multi-bootstrap of the difference (analysis/example_stats.py) over the seeds both rows ran (at least 2), from
the records' dev predictions (records/predictions.py). A pair with one seed gets instead a test of its two runs
over the dev examples (McNemar / paired bootstrap): it says only that these two runs differ on this dev set
(dev-example sampling), nothing about the methods, so the report prints it apart (TWO_RUNS_HEADERS). Records
without predictions (written before they were stored) leave their pair to the seed-level statistics, said in
one line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from distill_sweep.analysis import example_stats, few_seeds
from distill_sweep.analysis.paper import METRIC_ABBREV, task_label, task_order
from distill_sweep.records.predictions import DevPredictions, PredictionsError, read_predictions

HEADERS = ["task", "A", "B", "seeds", "examples", "mean(A-B)", "95% CI (multi-bootstrap)", "p (multi-bootstrap)"]
TWO_RUNS_HEADERS = ["task", "run A", "run B", "seed", "examples", "mean(A-B)", "test of the two runs", "p"]
KIND_SEEDS, KIND_TWO_RUNS = "seeds x examples", "two runs"  # the frame's `kind`: which table a pair is in


def headers(within: Sequence[str] = ()) -> list[str]:
    """The table's columns: HEADERS with the columns a pair is compared within (Table 3: the row) after task."""
    return [HEADERS[0], *within, *HEADERS[1:]]


def two_runs_headers(within: Sequence[str] = ()) -> list[str]:
    return [TWO_RUNS_HEADERS[0], *within, *TWO_RUNS_HEADERS[1:]]


def _load(paths: list[str], cache: dict[str, DevPredictions | None], problems: list[str]) -> None:
    for path in paths:
        if path not in cache:
            try:
                cache[path] = read_predictions(Path(path).parent)
            except PredictionsError as exc:
                cache[path] = None
                problems.append(str(exc))


def comparisons(records: pd.DataFrame, tests: pd.DataFrame, metrics: dict[str, str], level: str = "system",
                within: Sequence[str] = ()) -> tuple[list[list[str]], pd.DataFrame, list[str]]:
    """Rows of the table (`headers(within)`), its CSV frame and the notes, for every pair (a, b) of `tests` on
    every task both ran. `records`: the table's records (status, path, task, seed, the `level` column whose
    values a and b are, and the `within` columns the tests hold fixed: Table 1 compares systems, Table 3 the
    inits of one system); `metrics`: task -> the column's metric."""
    done = records[records["status"] == "completed"]
    cache: dict[str, DevPredictions | None] = {}
    problems: list[str] = []
    _load(list(done["path"]), cache, problems)
    frame: list[dict] = []
    without, unsupported = 0, set()
    by_key: dict[tuple, str] = {}
    seeds_of: dict[tuple, set[int]] = {}  # (within..., level, task) -> its seeds
    for r in done.to_dict("records"):
        unit = (*(r[w] for w in within), r[level], r["task"])
        by_key[(*unit, int(r["seed"]))] = r["path"]
        seeds_of.setdefault(unit, set()).add(int(r["seed"]))
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
            got = [(cache[by_key[(*fixed, pair["a"], task, s)]], cache[by_key[(*fixed, pair["b"], task, s)]])
                   for s in seeds]
            usable = [(s, pa, pb) for s, (pa, pb) in zip(seeds, got, strict=True) if pa is not None and pb is not None]
            if not usable:
                without += 1
                continue
            split = next(iter(usable[0][1].preds))  # the first dev split: the one the column's metric scores
            same = [(s, pa, pb) for s, pa, pb in usable
                    if pa.same_dev(usable[0][1], split) and pb.same_dev(usable[0][1], split)]
            if not same:  # A and B of the first seed were scored on different dev sets
                without += 1
                continue
            labels = same[0][1].labels[split]
            a = np.stack([pa.preds[split] for _, pa, _ in same])
            b = np.stack([pb.preds[split] for _, _, pb in same])
            entry = {"task": task, **dict(zip(within, fixed, strict=True)), "a": pair["a"], "b": pair["b"],
                     "metric": metric, "seeds": len(same), "seeds_matched": len(seeds), "examples": len(labels)}
            if len(same) == 1:  # two runs: a test of these runs over the examples, not of the methods
                test, p_one = example_stats.one_seed_test(a[0], b[0], labels, metric)
                diff = weighted_metric_diff(a[0], b[0], labels, metric)
                frame.append({**entry, "kind": KIND_TWO_RUNS, "mean_diff": 100 * diff, "ci_low": math.nan,
                              "ci_high": math.nan, "p": math.nan, "one_seed": same[0][0], "one_seed_test": test,
                              "one_seed_p": p_one})
                continue
            mb = few_seeds.multi_bootstrap(a, b, labels, metric)  # with its small-sample guard
            frame.append({**entry, "kind": KIND_SEEDS, "mean_diff": 100 * mb["diff"], "ci_low": 100 * mb["ci_low"],
                          "ci_high": 100 * mb["ci_high"], "p": mb["p"], "p_bootstrap": mb["p_bootstrap"],
                          "p_seeds": mb["p_seeds"], "one_seed": math.nan, "one_seed_test": "", "one_seed_p": math.nan})
    out = pd.DataFrame(frame)
    rows = [_row(r, within) for r in out.to_dict("records") if r["kind"] == KIND_SEEDS] if frame else []
    notes = []
    if rows:
        metric_names = ", ".join(sorted({METRIC_ABBREV.get(m, m) for m in metrics.values()}))
        notes.append(f"multi-bootstrap (Sellam et al. 2022): {example_stats.RESAMPLES:,} resamples of the seeds both "
                     "rows ran (at least 2) and of the dev examples together (seeded), the same for A and B; p "
                     f"two-sided; the column's metric ({metric_names}) on the best epoch's predictions (by the primary "
                     "metric); at few seeds its seed part undercovers, so the interval is the hull of it and the "
                     "t-interval of the per-seed differences, p the larger of the two (p_bootstrap, p_seeds in the "
                     "CSV); a pair with one seed is not here: see the tests of two runs")
    if without:
        notes.append(f"note: {without} pair(s) x task without dev predictions in their records (written before "
                     "records kept them): seed-level statistics only")
    if unsupported:
        notes.append(f"note: no per-example statistics for {', '.join(sorted(unsupported))} (only "
                     f"{', '.join(example_stats.METRICS)}): seed-level statistics only")
    notes += [f"note: predictions left out: {p}" for p in problems]
    return rows, out, notes


def _row(r: dict, within: Sequence[str]) -> list[str]:
    dropped = r["seeds_matched"] - r["seeds"]
    return [task_label(r["task"]), *(str(r[w]) for w in within), r["a"], r["b"],
            f"{r['seeds']}" + (f" (of {r['seeds_matched']})" if dropped else ""), str(r["examples"]),
            f"{r['mean_diff']:+.2f}", f"[{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]", _p(r["p"])]


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


def _p(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return f"{value:.2e}" if value < 1e-3 else f"{value:.4f}"
