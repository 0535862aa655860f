"""The decoder table: students of decoder LMs (procedure causal_lm), objective x init x data source, per teacher
and data.

A cell is mean±std over seeds (n) of the final epoch's dev value: perplexity (lower is better), next-token
accuracy, for classification-style instruction data the next-token choice accuracy and, for instruction data, the
greedy responses' exact match and ROUGE-L F1 (where the records have them). The data source is where the
student's training responses came from, read from the record's config: `fixed` (the data's own),
`on_policy=x` (the student's samples for a fraction x of the batches, procedure.on_policy), `seq_kd` (the
teacher's generations, procedure.seq_kd) or both; records without those keys are `fixed`. Paired t-tests
compare each objective with plain forward KL (fkl) under the same init and data source, and each data source
with `fixed` under the same objective and init, paired by seed, on perplexity, with Holm's correction over the
table's tests, the 1 - alpha t-interval of the mean difference and Cohen's d_z (stats.py, as for the encoder
tables). The teacher's own dev values head each table.

The same pairs are compared over the dev sequences too (`comparisons`), from the per-sequence summaries the
records keep beside result.json (records/predictions.py): the multi-bootstrap over seeds x sequences and, at one
seed, the paired bootstrap over the sequences (analysis/example_stats.py). Records without them (written before
they were kept) leave their pair to the t-test, said in one line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from distill_sweep.analysis import collapse, example_stats, few_seeds, prediction_checks, stats
from distill_sweep.data.generation_metrics import EXACT_MATCH, ROUGE_L
from distill_sweep.records.predictions import PREDICTIONS, PredictionsError, SequenceSummary, read_predictions
from distill_sweep.records.record import RecordError, load_record

PROCEDURE = "causal_lm"
collapse_mark = "‡"  # a cell with a collapsed run (as the encoder tables' footnotes)
BASELINE = "fkl"  # the objective every other is tested against
FIXED = "fixed"  # the data source every other is tested against: the data's own responses
METRICS = (("perplexity", "perplexity"), ("token_accuracy", "token acc"), ("choice_accuracy", "choice acc"),
           (EXACT_MATCH, "exact match"), (ROUGE_L, "ROUGE-L"))
INIT_ORDER = ("bottom", "skip", "mixed", "prune", "random", "custom", "fresh")
GENERATION_LABELS = {"exact match", "ROUGE-L"}  # METRICS' labels of the greedy responses' scores
GENERATION_NOTE = ("exact match and ROUGE-L: greedy responses to the dev prompts against the references (normalised: "
                   "stripped, whitespace collapsed; ROUGE-L F1 over whitespace tokens)")
SOURCES_NOTE = ("data: the training responses, fixed (the data's), on_policy=x (the student's samples for a share x "
                "of the batches), seq_kd (the teacher's generations)")


def data_source(procedure: dict[str, Any]) -> str:
    """Where a job's training responses came from, from its procedure config: fixed, on_policy=x, seq_kd, or
    seq_kd+on_policy=x (records written before procedure.on_policy / seq_kd existed are fixed)."""
    on_policy, seq_kd = float(procedure.get("on_policy") or 0.0), bool(procedure.get("seq_kd") or False)
    parts = (["seq_kd"] if seq_kd else []) + ([f"on_policy={on_policy:g}"] if on_policy > 0 else [])
    return "+".join(parts) or FIXED


def _source_order(source: str) -> tuple[bool, float, str]:
    """fixed first, then by seq_kd and the on-policy fraction."""
    fraction = float(source.rsplit("=", 1)[1]) if "on_policy=" in source else 0.0
    return (source.startswith("seq_kd"), fraction, source)


def _inits(part: pd.DataFrame) -> list[str]:
    return sorted(part["init"].unique(), key=lambda x: (INIT_ORDER.index(x) if x in INIT_ORDER else 99, x))


def _sources(part: pd.DataFrame) -> list[str]:
    return sorted(part["data"].unique(), key=_source_order)


def _with_source(part: pd.DataFrame) -> pd.DataFrame:
    return part if "data" in part.columns else part.assign(data=FIXED)


def pairs(part: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame, pd.DataFrame]]:
    """One setting's paired comparisons, each (label, init, the tested runs, the baseline runs): every objective
    vs fkl under the same init and data source, then every data source vs fixed under the same objective and
    init (the data source is named in the label where the setting has more than one)."""
    part = _with_source(part)
    sources, out = _sources(part), []
    axis = sources != [FIXED]
    for init in _inits(part):
        for source in sources:
            cell = part[(part["init"] == init) & (part["data"] == source)]
            base = cell[cell["objective"] == BASELINE]
            for objective in sorted(set(cell["objective"]) - {BASELINE}):
                out.append((f"{objective} vs {BASELINE}" + (f" ({source})" if axis else ""), init,
                            cell[cell["objective"] == objective], base))
    for init in _inits(part):
        for objective in sorted(part["objective"].unique(), key=lambda o: (o != BASELINE, o)):
            cell = part[(part["init"] == init) & (part["objective"] == objective)]
            base = cell[cell["data"] == FIXED]
            for source in [s for s in sources if s != FIXED]:
                out.append((f"{source} vs {FIXED} ({objective})", init, cell[cell["data"] == source], base))
    return out


def is_own(records: pd.DataFrame) -> pd.Series:
    """Which records this table holds (the generic tables leave them out)."""
    if records.empty:
        return pd.Series(False, index=records.index, dtype=bool)
    return records["procedure"] == PROCEDURE


def runs(records: pd.DataFrame) -> pd.DataFrame:
    """One row per completed causal_lm job: its setting, objective, init, seed, final dev values and teacher's."""
    out = []
    for r in records[(records["procedure"] == PROCEDURE) & (records["status"] == "completed")].to_dict("records"):
        rec = json.loads(Path(r["path"]).read_text())
        dev = (rec.get("final") or {}).get("dev") or {}
        teacher = rec.get("teacher") or {}
        layers = ",".join(str(x) for x in (rec.get("init") or {}).get("layers") or [])
        init = str(r["init_name"] or r["student_name"])
        procedure = (rec.get("config") or {}).get("procedure") or {}
        out.append({"setting": f"{rec.get('task', r['task'])}, teacher {r['teacher_name']} -> {r['student_name']} "
                               f"{r['student_layers']}L", "objective": str(r["objective"]),
                    "init": init, "data": data_source(procedure if isinstance(procedure, dict) else {}),
                    "layers": layers, "seed": int(r["seed"]), "seeds": r.get("seeds"), "path": str(r["path"]),
                    "teacher_dev": teacher.get("dev") or {}, "metric_ids": metric_ids(rec), "data_key": data_key(rec),
                    **{key: dev.get(key) for key, _ in METRICS},
                    **{f"baseline_{key}": (teacher.get("majority_baseline") or {}).get(key) for key in AT_BASELINE},
                    "collapsed": collapsed_reason(dev, teacher.get("majority_baseline") or {})})
    return _one_setting_per_data(pd.DataFrame(out))


AT_BASELINE = ("token_accuracy", "choice_accuracy")  # the dev baselines a decoder record holds (unigram_baseline)


def collapsed_reason(dev: dict[str, Any], baseline: dict[str, Any]) -> str:
    """Why a decoder run is collapsed (analysis/collapse.py's rule on its final dev values against the dev split's
    most frequent token / most frequent choice, the record's `teacher.majority_baseline`), "" if it is not."""
    why = []
    for key in AT_BASELINE:
        score, level = dev.get(key), baseline.get(key)
        if isinstance(score, (int, float)) and isinstance(level, (int, float)) and collapse.at_baseline(score, level):
            why.append(f"{key} {score:.3f} at or below the dev split's most frequent "
                       f"{'token' if key == 'token_accuracy' else 'choice'} ({level:.3f})")
    return "; ".join(why)


def _mark(cell: pd.DataFrame, key: str) -> str:
    """The collapse mark on a cell of `key` where one of its runs is at the dev baseline of that metric."""
    if key not in AT_BASELINE or f"baseline_{key}" not in cell.columns:
        return ""
    flagged = [collapse.at_baseline(float(v), float(b)) for v, b in zip(cell[key], cell[f"baseline_{key}"],
                                                                          strict=True)
               if isinstance(v, (int, float)) and isinstance(b, (int, float))]
    return f" {collapse_mark}" if any(flagged) else ""


def collapsed_notes(part: pd.DataFrame) -> list[str]:
    """One line per collapsed run of a setting (its cells carry the mark), and the rule."""
    if "collapsed" not in part.columns:
        return []
    flagged = part[part["collapsed"].fillna("").astype(bool)]
    notes = [f"{collapse_mark} collapsed run: {r['objective']} / {r['init']} / {r.get('data', FIXED)} / seed "
             f"{r['seed']} ({Path(r['path']).parent}): {r['collapsed']}" for r in flagged.to_dict("records")]
    if notes:
        notes.append(f"{collapse_mark} marks a cell that includes a collapsed run (analysis/collapse.py: a final dev "
                     f"value at most {100 * collapse.MARGIN:g} point above the dev split's most frequent token or "
                     "choice); each run's values are in decoder_runs.csv")
    return notes


def data_key(rec: dict[str, Any]) -> str:
    """The content key of the data a decoder job trained and was scored on (`causal_lm.data`: the corpus cache's
    key, else the digest of the splits' token ids, data/decoder.py), "" for records without it. A job on the
    user's own JSONL keeps the demo's `instructions.name` unless told otherwise: its name cannot tell them apart."""
    data = (rec.get("causal_lm") or {}).get("data") or {}
    return str(data.get("cache_key") or data.get("key") or "") if isinstance(data, dict) else ""


def _one_setting_per_data(frame: pd.DataFrame) -> pd.DataFrame:
    """Settings whose runs were on more than one data set (same name, other content) split into one setting per
    data set, named by its content key, so no cell, test or comparison pools two data sets."""
    if frame.empty:
        return frame
    for setting, part in frame.groupby("setting", sort=False):
        if part["data_key"].nunique() > 1:
            keys = part["data_key"].map(lambda k: f", data {k[:10]}" if k else ", data unnamed (an older record)")
            frame.loc[part.index, "setting"] = setting + keys
    return frame


def seed_means(runs: pd.DataFrame, column: str) -> pd.Series:
    """`column`'s mean per master seed, the unit of replication: a seed's runs that vary another source's seed
    (`seeds.data_order=1,2`) are repeated measures of it, averaged first as the encoder tables average theirs
    (analysis/replication.py); one run per seed comes back as it is. Index: the master seeds, sorted."""
    values = pd.to_numeric(runs[column], errors="coerce")
    return values.groupby(runs["seed"].to_numpy()).mean()


def runs_by_seed(runs: pd.DataFrame, column: str) -> dict[int, list[Any]]:
    """`column` of every run of each master seed, the unit of replication (a seed's runs that vary another source's
    seed: analysis/replication.py), in the frame's order: the comparisons over dev examples average a unit's runs
    as `seed_means` does, never keep one of them."""
    out: dict[int, list[Any]] = {}
    for seed, value in zip(runs["seed"], runs[column], strict=True):
        out.setdefault(int(seed), []).append(value)
    return out


def metric_ids(record: dict[str, Any]) -> int | None:
    """n where a record's dev metrics read ids 0..n-1 only (procedure.vocab=shared_prefix), else None."""
    vocabularies = (record.get("causal_lm") or {}).get("vocabularies") or {}
    size = (vocabularies.get("metrics") or {}).get("size") if isinstance(vocabularies, dict) else None
    return int(size) if isinstance(size, int) and not isinstance(size, bool) else None


def _cell(values: pd.Series, ddof: int) -> str:
    v = values.dropna().astype(float)
    if v.empty:
        return "—"
    std = float(v.std(ddof=ddof)) if len(v) > ddof else math.nan
    fmt = "{:.3f}" if v.abs().max() < 10 else "{:.2f}"
    return (fmt.format(v.mean()) + ("" if math.isnan(std) else "±" + fmt.format(std)) + f" ({len(v)})")


def tables(frame: pd.DataFrame, ddof: int, alpha: float
           ) -> list[tuple[str, list[str], list[list[str]], list[str], list[list[str]], str]]:
    """Per setting: (title, headers, rows, test headers, test rows, teacher line)."""
    out = []
    for setting, part in frame.groupby("setting", sort=True):
        part = _with_source(part)
        metrics = [(k, label) for k, label in METRICS if k in part.columns and part[k].notna().any()]
        sources = _sources(part)
        axis = sources != [FIXED]  # the data-source column, where the setting has more than the fixed data
        headers = ["objective", "init", *(["data"] if axis else []), "layers"] + [label for _, label in metrics]
        rows = []
        for objective in sorted(part["objective"].unique(), key=lambda o: (o != BASELINE, o)):
            for init in _inits(part):
                for source in sources:
                    cell = part[(part["objective"] == objective) & (part["init"] == init) & (part["data"] == source)]
                    if cell.empty:
                        continue
                    layers = "/".join(sorted(set(cell["layers"])))
                    rows.append([objective, init, *([source] if axis else []), layers]
                                + [_cell(seed_means(cell, k), ddof) + _mark(cell, k) for k, _ in metrics])
        tests, pvalues = [], []
        for label, init, tested, baseline in pairs(part):
            other, base = seed_means(tested, "perplexity"), seed_means(baseline, "perplexity")
            seeds = sorted(set(base.dropna().index) & set(other.dropna().index))
            if not seeds:
                continue
            a, b = other.loc[seeds].to_numpy(dtype=float), base.loc[seeds].to_numpy(dtype=float)
            t, p, note = stats.paired_ttest(a, b)
            lo, hi = stats.paired_t_ci(a, b, 1.0 - alpha)
            d = stats.cohens_dz(a, b)
            tests.append([label, init, str(len(seeds)), f"{float(np.mean(a - b)):+.3f}",
                          "—" if math.isnan(lo) else f"[{lo:+.3f}, {hi:+.3f}]", "—" if math.isnan(d) else f"{d:.2f}",
                          "—" if math.isnan(t) else f"{t:.2f}", "—" if math.isnan(p) else f"{p:.3g}", note])
            pvalues.append(p)
        for row, adj in zip(tests, stats.holm(pvalues), strict=True):
            row.insert(8, "—" if math.isnan(adj) else f"{adj:.3g}" + (" *" if adj < alpha else ""))
        test_headers = ["comparison (perplexity)", "init", "pairs", "mean diff", f"{100 * (1 - alpha):g}% CI", "d",
                        "t", "p", "p (Holm)", "note"]
        teacher = part["teacher_dev"].iloc[0]
        line = "teacher dev: " + ", ".join(f"{label} {teacher[k]:.3f}" for k, label in metrics if k in teacher)
        shared = sorted({int(n) for n in part.get("metric_ids", pd.Series(dtype=object)).dropna()})
        if shared:  # procedure.vocab=shared_prefix: the metrics were scored over the shared ids only
            line += (f"; metrics of procedure.vocab=shared_prefix runs over the shared ids only "
                     f"({', '.join(f'0..{n - 1}' for n in shared)})")
        levels = [(label, part[f"baseline_{k}"].dropna()) for k, label in metrics if f"baseline_{k}" in part.columns]
        levels = [(label, v.iloc[0]) for label, v in levels if not v.empty]
        if levels:  # what a student that learned nothing scores: the reference a cell must clear
            line += ("; dev baseline (always the most frequent token / choice): "
                     + ", ".join(f"{label} {v:.3f}" for label, v in levels))
        out.append((f"Decoder distillation: {setting}", headers, rows, test_headers, tests, line))
    return out


EXAMPLE_HEADERS = ["comparison (perplexity)", "init", "seeds", "sequences", "mean diff", "95% CI (multi-bootstrap)",
                   "p (multi-bootstrap)", "p (Holm)"]
# a pair with one matched seed: a test of its two runs over the dev sequences, printed apart from the methods'
TWO_RUNS_HEADERS = ["comparison (perplexity)", "init", "seed", "sequences", "mean diff",
                    "p (paired bootstrap over sequences)", "p (Holm)"]


def _summary(path: str, problems: list[str]) -> tuple[SequenceSummary, str] | None:
    """The final epoch's per-sequence summary beside a record, with its dev hash; None without one, or when it
    cannot stand for its record (a damaged file, another dev set than the record's, numbers that are not the
    record's: analysis/prediction_checks.py; named in `problems`)."""
    try:
        got = read_predictions(Path(path).parent)
    except PredictionsError as exc:
        problems.append(str(exc))
        return None
    if got is None or not got.sequences:
        return None
    if Path(path).is_file():
        try:
            why = prediction_checks.reason(got, load_record(Path(path)))
        except RecordError as exc:
            why = f"its record cannot be read ({exc})"
        if why is not None:
            problems.append(f"{Path(path).parent / PREDICTIONS}: {why}")
            return None
    split = next(iter(got.sequences))
    return got.sequences[split], got.dev_hash.get(split, "")


def comparisons(part: pd.DataFrame) -> tuple[list[list[str]], list[list[str]], list[str]]:
    """Rows (EXAMPLE_HEADERS), tests of two runs (TWO_RUNS_HEADERS) and notes for one setting's pairs (`pairs`:
    each objective vs fkl, each data source vs fixed) over seeds x dev sequences, on perplexity: the
    multi-bootstrap of the mean difference over the seeds both ran (at least 2; with the small-sample guard of
    analysis/few_seeds.py), Holm over the table; a pair with one seed gets the paired bootstrap over the sequences
    of its two runs instead, apart (a test of two runs, not of the methods). Runs on other dev sequences than most
    of the setting's are left out and counted."""
    found: list[tuple[list[str], float]] = []
    two_runs: list[tuple[list[str], float]] = []
    problems: list[str] = []
    without, changed = 0, 0
    cache: dict[str, tuple[SequenceSummary, str] | None] = {}  # a baseline's runs serve every pair of their cell

    def summary(path: str) -> tuple[SequenceSummary, str] | None:
        if path not in cache:
            cache[path] = _summary(path, problems)
        return cache[path]

    for path in part["path"]:
        summary(str(path))
    dev = prediction_checks.majority_dev(got[1] for got in cache.values() if got is not None)
    for label, init, tested, baseline in pairs(part):
        other, base = runs_by_seed(tested, "path"), runs_by_seed(baseline, "path")
        seeds = sorted(set(base) & set(other))
        if not seeds:
            continue
        got = [(s, [g for g in map(summary, other[s]) if g is not None], [g for g in map(summary, base[s])
                                                                           if g is not None]) for s in seeds]
        usable = [(s, a, b) for s, a, b in got if a and b]
        if not usable:
            without += 1
            continue
        # per master seed its runs on the setting's dev sequences: a unit's score is the mean of its runs'
        same = [(s, [q for q, h in a if h == dev], [q for q, h in b if h == dev]) for s, a, b in usable]
        same = [(s, a, b) for s, a, b in same if a and b]
        changed += len(usable) - len(same)
        if not same:
            continue
        a = [np.stack([np.column_stack([q.nll, q.targets, q.correct]) for q in runs]) for _, runs, _ in same]
        b = [np.stack([np.column_stack([q.nll, q.targets, q.correct]) for q in runs]) for _, _, runs in same]
        n_sequences = str(a[0].shape[1])
        if len(same) == 1:  # two runs: says whether these two runs differ on these sequences, not the methods
            one = example_stats.multi_bootstrap_sequences(a, b, "perplexity")
            two_runs.append(([label, init, str(same[0][0]), n_sequences, f"{one['diff']:+.3f}", _p(one["p"])],
                             one["p"]))
            continue
        per_seed = [float(np.mean([_perplexity(r) for r in ua]) - np.mean([_perplexity(r) for r in ub]))
                    for ua, ub in zip(a, b, strict=True)]
        mb = few_seeds.guarded(example_stats.multi_bootstrap_sequences(a, b, "perplexity"), per_seed)
        left_out = sorted(set(seeds) - {s for s, _, _ in same})  # no usable predictions, or another dev set
        matched = f"{len(same)}" + (f" (of {len(seeds)}; seed {', '.join(map(str, left_out))} left out)"
                                     if left_out else "")
        found.append(([label, init, matched,
                       n_sequences, f"{mb['diff']:+.3f}", f"[{mb['ci_low']:+.3f}, {mb['ci_high']:+.3f}]",
                       _p(mb["p"])], mb["p"]))
    rows = [[*row, _p(h)] for (row, _), h in zip(found, stats.holm([p for _, p in found]), strict=True)]
    runs = [[*row, _p(h)] for (row, _), h in zip(two_runs, stats.holm([p for _, p in two_runs]), strict=True)]
    notes = []
    if rows:
        notes.append(f"over dev sequences: the multi-bootstrap (Sellam et al. 2022) of mean(A-B) in perplexity, "
                     f"{example_stats.RESAMPLES:,} resamples of the master seeds both ran (at least 2; a seed's "
                     "runs that vary another source's seed are averaged within it, the unit of replication) and of the "
                     "dev sequences together (seeded), a resample's perplexity exp(its summed target NLL / its "
                     "targets); "
                     "at few seeds the interval is the hull of it and the t-interval of the per-seed differences, "
                     "p the larger of the two (analysis/few_seeds.py); Holm over this table's rows; the final "
                     "epoch's per-sequence sums")
    if without:
        notes.append(f"note: {without} pair(s) without per-sequence dev summaries in their records (written before "
                     "records kept them): the t-test above only")
    if changed:
        notes.append(f"note: {changed} seed pair(s) left out: scored on other dev sequences than most of this "
                     f"setting's runs ({prediction_checks.short(dev)})")
    notes += [f"note: summaries left out: {p}" for p in problems]
    return rows, runs, notes


def _perplexity(seqs: np.ndarray) -> float:
    """One run's dev perplexity from its per-sequence (nll sum, targets, ...) rows: exp(summed NLL / targets)."""
    return float(np.exp(seqs[:, 0].sum() / max(1.0, seqs[:, 1].sum())))


def _p(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.3g}"


def setting_parts(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """The frame's settings in the order `tables` gives them."""
    return [part for _, part in frame.groupby("setting", sort=True)]
