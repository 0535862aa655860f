"""The decoder table's lm-eval section: the scores of the lm-eval stage (procedure.lm_eval, the record's `lm_eval`
block) per objective x init x data source, mean±std over seeds (n) as the decoder table's cells (report/decoder.py),
one column per task and metric, the teacher's own scores first (the stage scores it once), and the paired comparisons of `decoder.pairs` (each objective vs fkl, each data
source vs fixed) on every task and metric over seeds x documents, from the per-example files beside the records
(`lm_eval_samples.npz`): the multi-bootstrap of the mean difference with the small-sample guard of the other
decoder comparisons (analysis/few_seeds.py), Holm over the rows. A task sampled with evaluation seeds
(procedure.lm_eval.sampling_seeds) is scored per run by its mean over them (the comparisons: each document's value
averaged over them), and `spread` sets its spread over sampling seeds beside its spread over training seeds
(analysis/nested_spread.py). Records without the block (the stage off, or written before it) are left out; a
setting none of whose records has it gets no section.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from distill_sweep.analysis import collapse, example_stats, few_seeds, stats
from distill_sweep.analysis.nested_spread import nested_spread
from distill_sweep.records.lm_eval_results import TaskSamples, read_samples
from distill_sweep.records.predictions import PredictionsError

from . import decoder

NOTE = ("lm-eval: the lm-evaluation-harness scores of the student after its last epoch (procedure.lm_eval), mean±std "
        "over master seeds, (n) = master seeds (a seed's runs that vary another source's seed averaged first); columns "
        "task: metric")
SAMPLED_NOTE = ("a task sampled with evaluation seeds (procedure.lm_eval.sampling_seeds): a run's score is its mean over "
                "them, so its ± is the spread over training seeds of the per-model means; the spread over sampling "
                "seeds is the next table's")


def scores(path: str, whose: str = "student", entry: str = "scores") -> dict[str, float]:
    """A record's lm-eval scores (the student's, or its teacher's) as `task: metric` -> value ({} without them);
    `entry="chance"`: the chance levels of its multiple-choice scores (procedures/lm_eval_stage.py, chance_of)."""
    rec: dict[str, Any] = json.loads(Path(path).read_text())
    block = rec.get("lm_eval") or {}
    block = (block.get("teacher") or {} if whose == "teacher" else block).get(entry) or {}
    return {f"{task}: {metric}": float(v) for task, metrics in block.items() for metric, v in metrics.items()}


def _at_chance(got: dict[str, float], chance: dict[str, float], column: str) -> bool:
    return column in got and column in chance and collapse.at_baseline(got[column], chance[column])


def chance_notes(part: pd.DataFrame) -> list[str]:
    """One line per run, and for the teacher, whose multiple-choice score is at chance (analysis/collapse.py's
    margin above a uniform guess among each document's choices): its cells carry the collapse mark."""
    notes = []
    teacher = next((p for p in part["path"] if scores(p, "teacher")), None)
    if teacher is not None:
        got, chance = scores(teacher, "teacher"), scores(teacher, "teacher", "chance")
        for column in sorted(c for c in got if _at_chance(got, chance, c)):
            notes.append(f"{decoder.collapse_mark} the teacher's lm-eval {column} {got[column]:.3f} is at chance "
                         f"({chance[column]:.3f}, a uniform guess among each document's choices): its students "
                         "distil a teacher that does not know the task")
    for r in part.to_dict("records"):
        got, chance = scores(r["path"]), scores(r["path"], "student", "chance")
        for column in sorted(c for c in got if _at_chance(got, chance, c)):
            notes.append(f"{decoder.collapse_mark} {r['objective']} / {r['init']} / seed {r['seed']} "
                         f"({Path(r['path']).parent}): lm-eval {column} {got[column]:.3f} at chance "
                         f"({chance[column]:.3f})")
    if notes:
        notes.append(f"{decoder.collapse_mark} marks an lm-eval cell at chance: at most {100 * collapse.MARGIN:g} point "
                     "above the mean over the documents of 1 / their number of choices")
    return notes


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
    teacher_path = next((p for p in part["path"] if scores(p, "teacher")), None)
    if teacher_path is not None:  # the setting's one teacher, scored once on the same documents (a row of its own,
        # no spread), marked where it is at chance as its students are
        teacher, chance = scores(teacher_path, "teacher"), scores(teacher_path, "teacher", "chance")
        rows.append(["teacher", "", *([""] if axis else []),
                     *(f"{teacher[c]:.3f}{_mark(_at_chance(teacher, chance, c))}" if c in teacher else "—"
                       for c in columns)])
    levels = {p: scores(p, "student", "chance") for p in part["path"]}
    for objective in sorted(part["objective"].unique(), key=lambda o: (o != decoder.BASELINE, o)):
        for init in decoder._inits(part):
            for source in sources:
                cell = part[(part["objective"] == objective) & (part["init"] == init) & (part["data"] == source)]
                if cell.empty or cell[columns].isna().all().all():
                    continue
                rows.append([objective, init, *([source] if axis else [])]
                            + [decoder._cell(decoder.seed_means(cell, c), ddof)
                               + _mark(any(_at_chance({c: float(v)}, levels[p], c)
                                           for v, p in zip(cell[c], cell["path"], strict=True) if pd.notna(v)))
                               for c in columns])
    return headers, rows


def _mark(at: bool) -> str:
    return f" {decoder.collapse_mark}" if at else ""


def sampled(path: str) -> tuple[list[int], dict[str, list[float]]]:
    """A record's sampling seeds and per-seed scores (`lm_eval.sampling`) as `task: metric` -> one value per seed."""
    rec: dict[str, Any] = json.loads(Path(path).read_text())
    block = (rec.get("lm_eval") or {}).get("sampling") or {}
    per_seed = block.get("scores") or {}
    return [int(s) for s in block.get("seeds") or []], {
        f"{task}: {metric}": [float(x) for x in v] for task, metrics in per_seed.items() for metric, v in metrics.items()}


def _f(x: float, fmt: str = "{:.3f}") -> str:
    return "—" if math.isnan(x) else fmt.format(x)


def spread(part: pd.DataFrame) -> tuple[list[str], list[list[str]]] | None:
    """(headers, rows) of the evaluation-sampling spread against the training-seed spread (analysis/nested_spread.py)
    per objective x init x data source and sampled task metric, None when no run was sampled with seeds."""
    got = {p: sampled(p) for p in part["path"]}
    metrics = sorted({m for _, v in got.values() for m in v})
    if not metrics:
        return None
    part = decoder._with_source(part)
    sources = decoder._sources(part)
    axis = sources != [decoder.FIXED]
    headers = ["objective", "init", *(["data"] if axis else []), "task: metric", "mean", "sd training seeds (n)",
               "sd sampling seeds, pooled (k)", "seeds", "var training", "var sampling", "training share"]
    rows = []
    for objective in sorted(part["objective"].unique(), key=lambda o: (o != decoder.BASELINE, o)):
        for init in decoder._inits(part):
            for source in sources:
                cell = part[(part["objective"] == objective) & (part["init"] == init) & (part["data"] == source)]
                for metric in metrics:
                    runs = [(int(seed), *got[p]) for seed, p in zip(cell["seed"], cell["path"], strict=True)
                            if metric in got[p][1]]
                    if not runs:
                        continue
                    seeds, values = unit_values(runs, metric)
                    sp = nested_spread(values, seeds=seeds)
                    k = sorted(set(sp["k"]))
                    seeds = str(k[0]) if len(k) == 1 else f"{k[0]}-{k[-1]}"
                    rows.append([objective, init, *([source] if axis else []), metric, _f(sp["mean"]),
                                 f"{_f(sp['sd_training'])} ({sp['n']})",
                                 f"{_f(sp['sd_sampling'])} ({seeds})", sp["design"] if sp["n"] > 1 else "—",
                                 "0 (clipped)" if sp["clipped"] else _f(sp["var_training"], "{:.2e}"),
                                 _f(sp["var_sampling"], "{:.2e}"), _f(100 * sp["training_share"], "{:.0f}%")])
    return headers, rows


def unit_values(runs: list[tuple[int, list[int], dict[str, list[float]]]], metric: str
                ) -> tuple[list[list[int]], list[list[float]]]:
    """Per master seed (the unit of replication, analysis/replication.py) its sampling seeds and its score per
    sampling seed, from its runs' (master seed, sampling seeds, `sampled` scores): one run as it is; several runs
    (a grid crossing another source's seed) that drew with the same sampling seeds, their mean per sampling seed;
    runs that drew with other seeds, their values one after another (a nested design)."""
    by_unit: dict[int, list[tuple[list[int], list[float]]]] = {}
    for unit, seeds, scores_ in runs:
        by_unit.setdefault(unit, []).append((list(seeds), list(scores_[metric])))
    out_seeds, out_values = [], []
    for members in by_unit.values():
        first = members[0][0]
        if all(s == first and len(v) == len(members[0][1]) for s, v in members):
            out_seeds.append(first)
            out_values.append([float(x) for x in np.mean([v for _, v in members], axis=0)])
        else:
            out_seeds.append([s for seeds, _ in members for s in seeds])
            out_values.append([x for _, v in members for x in v])
    return out_seeds, out_values


SPREAD_NOTE = ("evaluation-sampling vs training-seed spread (random effects, the ANOVA estimator): sd training seeds = "
               "sd_T, the sd of the per-model means over sampling seeds (n models); sd sampling seeds = sd_S, the "
               "within-model sd pooled over the models (k seeds each); var sampling = sd_S^2; var training = max(0, "
               "sd_T^2 - MS_I/k) when every model drew with the same seeds (crossed: MS_I the model x seed residual "
               "mean square, the seeds' shared part cancelling from the model means), max(0, sd_T^2 - sd_S^2 x "
               "mean(1/k)) otherwise (nested); training share = var training / (var training + var sampling) "
               "(docs/methods/decoder.md, \"Evaluation-sampling seeds\"); a model is a master seed, the unit of "
               "replication as in the table's cells: a master seed's runs that vary another source's seed and drew "
               "with the same sampling seeds count as their mean per sampling seed (so the sampling sd is that of "
               "the mean of its runs)")


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
        other, base = decoder.runs_by_seed(tested, "path"), decoder.runs_by_seed(baseline, "path")
        seeds = sorted(set(base) & set(other))
        # per master seed the samples of its runs (the unit of replication: its runs averaged, never one kept)
        got = [([g for g in map(samples, other[s]) if g is not None], [g for g in map(samples, base[s])
                                                                       if g is not None]) for s in seeds]
        got = [(a, b) for a, b in got if a and b]
        tasks = sorted({t for a, b in got for t in set.intersection(*(set(x) for x in (*a, *b)))})
        for task in tasks:
            both = [([x[task] for x in a if task in x], [y[task] for y in b if task in y]) for a, b in got]
            both = [(a, b) for a, b in both if a and b]
            if not both:
                continue
            first = both[0][0][0]

            def on_first(runs: list[TaskSamples], first: TaskSamples = first) -> list[TaskSamples]:
                return [x for x in runs if x.docs_hash == first.docs_hash and np.array_equal(x.doc_id, first.doc_id)]

            same = [(on_first(a), on_first(b)) for a, b in both]
            same = [(a, b) for a, b in same if a and b]
            if len(same) < 2:
                continue
            for metric in sorted(set(first.metrics)):
                if not all(metric in x.metrics for a, b in same for x in (*a, *b)):
                    continue
                # a sampled task: each document's value averaged over the run's sampling seeds; a master seed's
                # runs averaged per document
                a = [np.stack([x.per_document(metric) for x in runs]) for runs, _ in same]
                b = [np.stack([y.per_document(metric) for y in runs]) for _, runs in same]
                per_seed = [float(ua.mean() - ub.mean()) for ua, ub in zip(a, b, strict=True)]
                mb = few_seeds.guarded(example_stats.multi_bootstrap_means(a, b), per_seed)
                found.append(([label, init, f"{task}: {metric}", str(len(same)), str(a[0].shape[1]),
                               f"{mb['diff']:+.3f}", f"[{mb['ci_low']:+.3f}, {mb['ci_high']:+.3f}]",
                               decoder._p(mb["p"])], mb["p"]))
    rows = [[*row, decoder._p(h)] for (row, _), h in zip(found, stats.holm([p for _, p in found]), strict=True)]
    notes = []
    if rows:
        notes.append(f"lm-eval over documents: the multi-bootstrap (Sellam et al. 2022) of mean(A-B), "
                     f"{example_stats.RESAMPLES:,} resamples of the master seeds both ran (at least 2, on the same "
                     "documents; a seed's runs that vary another source's seed averaged within it, the unit of "
                     "replication) and of the documents together (seeded); at few seeds the interval is the hull of it and the "
                     "t-interval of the per-seed differences, p the larger of the two; Holm over this table's rows")
    notes += [f"note: lm-eval samples left out: {p}" for p in problems]
    return rows, notes
