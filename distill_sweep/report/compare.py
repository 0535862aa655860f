"""Two results directories side by side: the same jobs' scores in each, and whether they differ.

    python -m distill_sweep.report.compare A B [--match hash|job] [--out DIR]

`--match hash` (the default) pairs the records of one config hash: the same job run twice (another machine, another
version of the code, a GPU against a CPU), so a difference is the run's, not the method's. `--match job` pairs the
jobs of one task, procedure, objective, init, student, teacher, seed and seed of every source (`seeds.*`): a grid
run twice with a setting changed (A with one learning rate, B with another). Each pair compares the record's
primary dev metric at its best epoch (the record's `best`). Per task: the pairs, how many are identical to the bit,
the mean difference B - A with its 95% t-interval and the paired t-test over the pairs, and the largest
difference; then every record that is in no pair, with the reason: a job found in one directory only, a record
without a config hash (under `--match hash`), several records of one job in a directory (which of them to pair is
not guessed), a record that is not completed, one that cannot be read. Writes `compare.csv` (one row per pair),
`compare_unpaired.csv` (one row per record in no pair, with the reason) and `compare.md` to DIR (default: the
current directory).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from scipy import stats as sps
from tabulate import tabulate

from distill_sweep.analysis.frames import norm_spec
from distill_sweep.config.seeds import SOURCES
from distill_sweep.errors import DiskWriteError
from distill_sweep.records.disk import atomic_file, problem
from distill_sweep.records.labels import record_label, recorded_seeds
from distill_sweep.records.record import RECORD, Record, RecordError, incomplete_reason, load_json

JOB_KEYS = ("task", "procedure", "objective", "init", "student", "teacher", "seed", "seeds")
# a unit of replication: a job's master seed; its runs that vary another source's seed (`seeds`) are averaged
UNIT_KEYS = tuple(k for k in JOB_KEYS if k != "seeds")
COLUMNS = [*JOB_KEYS, "hash", "metric", "score", "label", "path"]
UNPAIRED_COLUMNS = ["side", "label", "hash", "path", "why", "detail"]
LISTED = 20  # records named per kind in compare.md (compare_unpaired.csv has every one)
UNREADABLE = "cannot be read"


def seeds_key(seed: int, block: dict | None) -> str:
    """Every seed source of a record as one value (`init=1 data_order=2 dropout=1 sampling=1`), `separate` added
    where the init or dropout seed was set on its own (two torch streams: another job than the master seed's
    alone, config/seeds.py), so runs of one master seed that vary another source never pair with each other."""
    seeds = recorded_seeds(seed, block)
    text = " ".join(f"{s}={getattr(seeds, s)}" for s in SOURCES)
    return text + (" separate" if seeds.separate_streams else "")


@dataclass
class Side:
    """One directory's completed records (`jobs`, one row each) and every record left out, with why (`left_out`:
    UNPAIRED_COLUMNS rows)."""

    jobs: pd.DataFrame
    left_out: list[dict[str, str]] = field(default_factory=list)


def read_side(results_dir: Path, side: str) -> Side:
    """Every record under `results_dir`, read by the report's rule (`Record.from_dict`, `incomplete_reason`):
    the completed ones as jobs, the rest left out with the reason (tuning trials too: they score a holdout)."""
    rows, left = [], []
    for path in sorted(results_dir.rglob(RECORD)):
        where = str(path.parent)
        try:
            raw = load_json(path)
            rec = Record.from_dict(raw)
        except RecordError as exc:
            left.append({"side": side, "label": "", "hash": "", "path": where, "why": UNREADABLE, "detail": str(exc)})
            continue
        label = record_label(raw)
        entry = {"side": side, "label": label, "hash": rec.config_hash, "path": where, "detail": ""}
        if rec.tune_trial is not None:
            left.append({**entry, "why": "tuning trials (they score a holdout of the training split)"})
        elif rec.status != "completed":
            left.append({**entry, "why": "not completed", "detail": f"status {rec.status}"})
        elif (why := incomplete_reason(raw)) is not None:
            left.append({**entry, "why": "status completed but incomplete (the sweeper runs them again)",
                         "detail": why})
        else:
            primary = str(rec.primary_metric)
            rows.append({"task": rec.task, "procedure": rec.procedure, "objective": rec.objective,
                         "init": norm_spec(rec.init.spec), "student": rec.student.name, "teacher": rec.teacher.name,
                         "seed": rec.seed, "seeds": seeds_key(rec.seed, rec.seeds), "hash": rec.config_hash,
                         "metric": primary, "score": float(rec.best["dev"][primary]),  # (complete: a number)
                         "label": label, "path": where})
    return Side(pd.DataFrame(rows, columns=COLUMNS), left)


@dataclass
class Pairing:
    """The pairs, the jobs of each side without a partner, and every other record in no pair (with why)."""

    pairs: pd.DataFrame
    only_a: pd.DataFrame
    only_b: pd.DataFrame
    unpaired: list[dict[str, str]]


def pair(a: Side, b: Side, match: str) -> Pairing:
    """Pair A's jobs with B's by config hash or by job (JOB_KEYS). A record that cannot be paired for sure is in
    no pair, and said: no config hash to pair by, or several records of one key in its directory."""
    keys = ["hash"] if match == "hash" else list(JOB_KEYS)
    what = "config hash" if match == "hash" else "job"
    unpaired = [*a.left_out, *b.left_out]
    usable = []
    for side, jobs in (("A", a.jobs), ("B", b.jobs)):
        if match == "hash":
            bare = jobs["hash"].astype(str) == ""
            unpaired += [_entry(side, r, "no config_hash to pair by (--match job pairs them by job)")
                         for r in jobs[bare].to_dict("records")]
            jobs = jobs[~bare]
        many = jobs.duplicated(keys, keep=False)
        for r in jobs[many].to_dict("records"):
            count = int((jobs[keys] == pd.Series({k: r[k] for k in keys})).all(axis=1).sum())
            hint = " (where they differ in config hash, --match hash pairs them)" if match == "job" else ""
            unpaired.append(_entry(side, r, f"several records of one {what}: which to pair is not guessed{hint}",
                                   f"{count} of this {what} in {side}"))
        usable.append(jobs[~many])
    a1, b1 = usable
    both = a1.merge(b1, on=keys, suffixes=("_a", "_b"))
    for key in (*JOB_KEYS, "hash", "label"):  # one column per job key, whichever side it came from
        if f"{key}_a" in both:
            both[key] = both[f"{key}_a"]
    both["diff"] = both["score_b"] - both["score_a"]
    paired = both.set_index(keys).index
    only_a = a1[~a1.set_index(keys).index.isin(paired)]
    only_b = b1[~b1.set_index(keys).index.isin(paired)]
    unpaired += [_entry("A", r, ONLY) for r in only_a.to_dict("records")]
    unpaired += [_entry("B", r, ONLY) for r in only_b.to_dict("records")]
    return Pairing(both, only_a, only_b, unpaired)


ONLY = "found in this directory only"


def _entry(side: str, row: dict, why: str, detail: str = "") -> dict[str, str]:
    return {"side": side, "label": str(row["label"]), "hash": str(row["hash"]), "path": str(row["path"]), "why": why,
            "detail": detail}


def summary(pairs: pd.DataFrame) -> list[list[str]]:
    """Per task: pairs, identical pairs, mean difference B - A (in points) with its 95% t-interval, the paired
    t-test's p, and the largest |difference|."""
    rows = []
    for task, part in pairs.groupby("task", sort=True):
        # the t-test's units are master seeds: a crossed grid's runs of one master seed are averaged first
        # (analysis/replication.py); the identical count and the largest difference stay per run
        runs = part["diff"].to_numpy(dtype=float)
        unit = [part[k].astype(str) for k in UNIT_KEYS]  # as text: an init spec may be a list
        d = part["diff"].groupby(unit, sort=False).mean().to_numpy(dtype=float)
        n, same = len(d), int((runs == 0).sum())
        mean = float(d.mean())
        if n >= 2 and d.std(ddof=1) > 0:
            half = float(sps.t.ppf(0.975, n - 1) * d.std(ddof=1) / math.sqrt(n))
            interval, p = f"[{100 * (mean - half):+.2f}, {100 * (mean + half):+.2f}]", sps.ttest_1samp(d, 0.0).pvalue
            p_text = f"{p:.3g}"
        else:  # one pair, or every pair the same difference: no interval, no test
            interval, p_text = "-", "-"
        count = str(n) if len(runs) == n else f"{len(runs)} ({n} master seeds)"
        rows.append([str(task), str(part["metric_a"].iloc[0]), count, str(same), f"{100 * mean:+.2f}", interval,
                     p_text, f"{100 * float(abs(runs).max()):.2f}"])
    return rows


HEADERS = ["task", "metric", "pairs", "identical", "mean B-A (points)", "95% CI", "p (paired t)", "max |B-A|"]


def _named(entry: dict[str, str]) -> str:
    """A record in a list: its job label and hash (or its directory, where it could not be read) and the detail."""
    name = f"{entry['label']} ({entry['hash'][:10] or 'no config_hash'})" if entry["label"] else entry["path"]
    return name + (f" [{entry['detail']}]" if entry["detail"] else "")


def render(a: Path, b: Path, match: str, pairing: Pairing) -> str:
    how = ("config hash: the same jobs run twice" if match == "hash"
           else "job: " + ", ".join(JOB_KEYS[:-1]) + " and the seed of every source (seeds.*)")
    lines = [f"# {a} (A) against {b} (B)", "", f"pairs by {how}; each record's primary dev metric at its best epoch",
             ""]
    if pairing.pairs.empty:
        lines.append("no job is in both directories")
    else:
        lines += [tabulate(summary(pairing.pairs), headers=HEADERS, tablefmt="pipe", disable_numparse=True), "",
                  "the t-test's units are master seeds (a job's runs that vary another source's seed averaged "
                  "first); p is not corrected across tasks"]
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for entry in pairing.unpaired:  # one line per side and reason, every record counted
        groups.setdefault((entry["side"], entry["why"]), []).append(entry)
    for (side, why), entries in sorted(groups.items(), key=lambda g: (g[0][1] != ONLY, g[0])):
        head = f"{len(entries)} job(s) only in {side}" if why == ONLY else \
            f"{len(entries)} record(s) of {side} in no pair, {why}"
        more = f" ... and {len(entries) - LISTED} more (compare_unpaired.csv)" if len(entries) > LISTED else ""
        lines += ["", f"{head}: " + "; ".join(_named(e) for e in entries[:LISTED]) + more]
    return "\n".join(lines) + "\n"


def _out_problem(out: Path) -> str | None:
    """Why DIR cannot take the files (checked before any record is read), or None."""
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file, not a directory: name a directory (it is created if absent)"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"--out {out}: cannot create it: {problem(err)}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.report.compare",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path, help="the first results directory (A)")
    parser.add_argument("b", type=Path, help="the second results directory (B)")
    parser.add_argument("--match", choices=("hash", "job"), default="hash",
                        help="pair records by config hash (the same jobs) or by job (task, objective, init, seed, "
                             "seeds...)")
    parser.add_argument("--out", type=Path, default=Path("."), help="where compare.csv and compare.md go")
    args = parser.parse_args(argv)
    for path in (args.a, args.b):
        if not path.is_dir():
            print(f"distill_sweep.report.compare: error: {path} is not a directory", file=sys.stderr)
            return 2
    if (why := _out_problem(args.out)) is not None:
        print(f"distill_sweep.report.compare: error: {why}", file=sys.stderr)
        return 2
    pairing = pair(read_side(args.a, "A"), read_side(args.b, "B"), args.match)
    text = render(args.a, args.b, args.match, pairing)
    columns = [*JOB_KEYS, "metric_a", "score_a", "score_b", "diff", "path_a", "path_b"]
    try:
        for name, frame in (("compare.csv", pairing.pairs.reindex(columns=columns)),
                            ("compare_unpaired.csv", pd.DataFrame(pairing.unpaired, columns=UNPAIRED_COLUMNS))):
            with atomic_file(args.out / name) as f:
                frame.to_csv(f, index=False)
        with atomic_file(args.out / "compare.md") as f:
            f.write(text)
    except DiskWriteError as err:  # (names the file and what is kept)
        print(f"distill_sweep.report.compare: error: {err}", file=sys.stderr)
        return 1
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
