"""The decoder table's lm-eval section: the scores of the lm-eval stage (procedure.lm_eval, the record's `lm_eval`
block) per objective x init x data source, mean±std over seeds (n) as the decoder table's cells (report/decoder.py),
one column per task and metric, the teacher's own scores first (the stage scores it once), and the paired comparisons of `decoder.pairs` (each objective vs fkl, each data
source vs fixed) on every task and metric over seeds x documents, from the per-example files beside the records
(`lm_eval_samples.npz`): the multi-bootstrap of the mean difference with the small-sample guard of the other
decoder comparisons (analysis/few_seeds.py), Holm over the rows. Records without the block (the stage off, or written before it) are left out; a
setting none of whose records has it gets no section.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from distill_sweep.analysis import example_stats, few_seeds, stats
from distill_sweep.records.lm_eval_results import TaskSamples, read_samples
from distill_sweep.records.predictions import PredictionsError

from . import decoder

NOTE = ("lm-eval: the lm-evaluation-harness scores of the student after its last epoch (procedure.lm_eval), mean±std "
        "over seeds, (n) = runs; columns task: metric")


def scores(path: str, whose: str = "student") -> dict[str, float]:
    """A record's lm-eval scores (the student's, or its teacher's) as `task: metric` -> value ({} without them)."""
    rec: dict[str, Any] = json.loads(Path(path).read_text())
    block = rec.get("lm_eval") or {}
    block = (block.get("teacher") or {} if whose == "teacher" else block).get("scores") or {}
    return {f"{task}: {metric}": float(v) for task, metrics in block.items() for metric, v in metrics.items()}


def table(part: pd.DataFrame, ddof: int) -> tuple[list[str], list[list[str]]] | None:
    """(headers, rows) for one setting's runs (decoder.runs' rows), None when none has lm-eval scores."""
    got = pd.DataFrame([scores(p) for p in part["path"]], index=part.index)
    if got.empty or got.shape[1] == 0:
        return None
    columns = sorted(got.columns)
    part = decoder._with_source(part.join(got))
    sources = decoder._sources(part)
    axis = sources != [decoder.FIXED]
    headers = ["objective", "init", *(["data"] if axis else []), *columns]
    rows = []
    teacher = next((t for t in (scores(p, "teacher") for p in part["path"]) if t), {})
    if teacher:  # the setting's one teacher, scored once on the same documents (a row of its own, no spread)
        rows.append(["teacher", "", *([""] if axis else []),
                     *(f"{teacher[c]:.3f}" if c in teacher else "—" for c in columns)])
    for objective in sorted(part["objective"].unique(), key=lambda o: (o != decoder.BASELINE, o)):
        for init in decoder._inits(part):
            for source in sources:
                cell = part[(part["objective"] == objective) & (part["init"] == init) & (part["data"] == source)]
                if cell.empty or cell[columns].isna().all().all():
                    continue
                rows.append([objective, init, *([source] if axis else [])]
                            + [decoder._cell(cell[c], ddof) for c in columns])
    return headers, rows


COMPARISON_HEADERS = ["comparison", "init", "task: metric", "seeds", "documents", "mean diff",
                      "95% CI (multi-bootstrap)", "p (multi-bootstrap)", "p (Holm)"]


def _samples(path: str, problems: list[str]) -> dict[str, TaskSamples] | None:
    try:
        return read_samples(Path(path).parent)
    except PredictionsError as err:  # a damaged file: named, its runs left out
        problems.append(str(err))
        return None


def comparisons(part: pd.DataFrame) -> tuple[list[list[str]], list[str]]:
    """Rows (COMPARISON_HEADERS) and notes: per pair and task metric, the seeds both ran whose files hold the task
    on the same documents (the same docs_hash and ids; at least 2 seeds)."""
    problems: list[str] = []
    cache: dict[str, dict[str, TaskSamples] | None] = {}

    def samples(path: str) -> dict[str, TaskSamples] | None:
        if path not in cache:
            cache[path] = _samples(path, problems)
        return cache[path]

    found: list[tuple[list[str], float]] = []
    for label, init, tested, baseline in decoder.pairs(part):
        other, base = decoder._by_seed(tested, "path"), decoder._by_seed(baseline, "path")
        seeds = sorted(set(base.index) & set(other.index))
        got = [(samples(other[s]), samples(base[s])) for s in seeds]
        got = [(a, b) for a, b in got if a is not None and b is not None]
        tasks = sorted({t for a, b in got for t in set(a) & set(b)})
        for task in tasks:
            both = [(a[task], b[task]) for a, b in got if task in a and task in b]
            first = both[0][0]
            same = [(x, y) for x, y in both if x.docs_hash == y.docs_hash == first.docs_hash
                    and np.array_equal(x.doc_id, first.doc_id) and np.array_equal(y.doc_id, first.doc_id)]
            if len(same) < 2:
                continue
            for metric in sorted(set(first.metrics)):
                if not all(metric in x.metrics and metric in y.metrics for x, y in same):
                    continue
                a = np.stack([x.metrics[metric] for x, _ in same])
                b = np.stack([y.metrics[metric] for _, y in same])
                mb = few_seeds.guarded(example_stats.multi_bootstrap_means(a, b), list((a - b).mean(axis=1)))
                found.append(([label, init, f"{task}: {metric}", str(len(same)), str(a.shape[1]),
                               f"{mb['diff']:+.3f}", f"[{mb['ci_low']:+.3f}, {mb['ci_high']:+.3f}]",
                               decoder._p(mb["p"])], mb["p"]))
    rows = [[*row, decoder._p(h)] for (row, _), h in zip(found, stats.holm([p for _, p in found]), strict=True)]
    notes = []
    if rows:
        notes.append(f"lm-eval over documents: the multi-bootstrap (Sellam et al. 2022) of mean(A-B), "
                     f"{example_stats.RESAMPLES:,} resamples of the seeds both ran (at least 2, on the same documents) "
                     "and of the documents together (seeded); at few seeds the interval is the hull of it and the "
                     "t-interval of the per-seed differences, p the larger of the two; Holm over this table's rows")
    notes += [f"note: lm-eval samples left out: {p}" for p in problems]
    return rows, notes
