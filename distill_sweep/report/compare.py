"""Two results directories side by side: the same jobs' scores in each, and whether they differ.

    python -m distill_sweep.report.compare A B [--match hash|job] [--out DIR]

`--match hash` (the default) pairs the records of one config hash: the same job run twice (another machine, another
version of the code, a GPU against a CPU), so a difference is the run's, not the method's. `--match job` pairs the
jobs of one task, procedure, objective, init, student, teacher and seed: a grid run twice with a setting changed
(A with one learning rate, B with another). Each pair compares the record's primary dev metric at its best epoch
(the record's `best`). Per task: the pairs, how many are identical to the bit, the mean difference B - A with its
95% t-interval and the paired t-test over the pairs, and the largest difference; then the jobs found in one
directory only. Writes `compare.csv` (one row per pair) and `compare.md` to DIR (default: the current directory).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from scipy import stats as sps
from tabulate import tabulate

from distill_sweep.records import files
from distill_sweep.records.record import RECORD, is_complete

JOB_KEYS = ("task", "procedure", "objective", "init", "student", "teacher", "seed")


def _job(record: dict[str, Any]) -> dict[str, Any] | None:
    """A completed record's job and its score (None where it has no primary score)."""
    primary = record.get("primary_metric")
    score = ((record.get("best") or {}).get("dev") or {}).get(primary)
    if not isinstance(score, (int, float)):
        return None
    return {"task": record.get("task"), "procedure": record.get("procedure"), "objective": record.get("objective"),
            "init": (record.get("init") or {}).get("spec"), "student": (record.get("student") or {}).get("name"),
            "teacher": (record.get("teacher") or {}).get("name"), "seed": record.get("seed"),
            "hash": record.get("config_hash"), "metric": primary, "score": float(score)}


def completed_jobs(results_dir: Path) -> pd.DataFrame:
    """Every completed record under `results_dir` (tuning trials left out: they score a holdout), one row each."""
    rows = []
    for path in sorted(results_dir.rglob(RECORD)):
        record = files.read_record(path)
        if record is None or not is_complete(record) or record.get("tune_trial") is not None:
            continue
        job = _job(record)
        if job is not None:
            rows.append({**job, "path": str(path.parent)})
    return pd.DataFrame(rows, columns=[*JOB_KEYS, "hash", "metric", "score", "path"])


def pair(a: pd.DataFrame, b: pd.DataFrame, match: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(the pairs, A's jobs without a pair, B's jobs without one). A key that is not unique in a directory (two
    records of one job) pairs its first record, by path."""
    keys = ["hash"] if match == "hash" else list(JOB_KEYS)
    a1, b1 = (d.sort_values("path").drop_duplicates(keys, keep="first") for d in (a, b))
    both = a1.merge(b1, on=keys, suffixes=("_a", "_b"))
    for key in JOB_KEYS:  # one column per job key, whichever side it came from
        if f"{key}_a" in both:
            both[key] = both[f"{key}_a"]
    both["diff"] = both["score_b"] - both["score_a"]
    only_a = a1[~a1.set_index(keys).index.isin(both.set_index(keys).index)]
    only_b = b1[~b1.set_index(keys).index.isin(both.set_index(keys).index)]
    return both, only_a, only_b


def summary(pairs: pd.DataFrame) -> list[list[str]]:
    """Per task: pairs, identical pairs, mean difference B - A (in points) with its 95% t-interval, the paired
    t-test's p, and the largest |difference|."""
    rows = []
    for task, part in pairs.groupby("task", sort=True):
        d = part["diff"].to_numpy(dtype=float)
        n, same = len(d), int((d == 0).sum())
        mean = float(d.mean())
        if n >= 2 and d.std(ddof=1) > 0:
            half = float(sps.t.ppf(0.975, n - 1) * d.std(ddof=1) / math.sqrt(n))
            interval, p = f"[{100 * (mean - half):+.2f}, {100 * (mean + half):+.2f}]", sps.ttest_1samp(d, 0.0).pvalue
            p_text = f"{p:.3g}"
        else:  # one pair, or every pair the same difference: no interval, no test
            interval, p_text = "-", "-"
        rows.append([str(task), str(part["metric_a"].iloc[0]), str(n), str(same), f"{100 * mean:+.2f}", interval,
                     p_text, f"{100 * float(abs(d).max()):.2f}"])
    return rows


HEADERS = ["task", "metric", "pairs", "identical", "mean B-A (points)", "95% CI", "p (paired t)", "max |B-A|"]


def _job_name(row: pd.Series) -> str:
    return f"{row['task']}/{row['objective']} init={row['init']} seed={row['seed']} ({row['hash'][:10]})"


def render(a: Path, b: Path, match: str, pairs: pd.DataFrame, only_a: pd.DataFrame, only_b: pd.DataFrame) -> str:
    lines = [f"# {a} (A) against {b} (B)", "",
             f"pairs by {'config hash: the same jobs run twice' if match == 'hash' else 'job: ' + ', '.join(JOB_KEYS)};"
             " each record's primary dev metric at its best epoch", ""]
    if pairs.empty:
        lines.append("no job is in both directories")
    else:
        lines += [tabulate(summary(pairs), headers=HEADERS, tablefmt="pipe", disable_numparse=True), "",
                  "the t-test's units are the pairs (jobs); p is not corrected across tasks"]
    for name, only in (("A", only_a), ("B", only_b)):
        if not only.empty:
            listed = [_job_name(r) for _, r in only.head(20).iterrows()]
            more = f" ... and {len(only) - 20} more" if len(only) > 20 else ""
            lines += ["", f"{len(only)} job(s) only in {name}: " + "; ".join(listed) + more]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.report.compare",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path, help="the first results directory (A)")
    parser.add_argument("b", type=Path, help="the second results directory (B)")
    parser.add_argument("--match", choices=("hash", "job"), default="hash",
                        help="pair records by config hash (the same jobs) or by job (task, objective, init, seed...)")
    parser.add_argument("--out", type=Path, default=Path("."), help="where compare.csv and compare.md go")
    args = parser.parse_args(argv)
    for path in (args.a, args.b):
        if not path.is_dir():
            print(f"distill_sweep.report.compare: error: {path} is not a directory", file=sys.stderr)
            return 2
    pairs, only_a, only_b = pair(completed_jobs(args.a), completed_jobs(args.b), args.match)
    text = render(args.a, args.b, args.match, pairs, only_a, only_b)
    args.out.mkdir(parents=True, exist_ok=True)
    columns = [*JOB_KEYS, "metric_a", "score_a", "score_b", "diff", "path_a", "path_b"]
    pairs.reindex(columns=columns).to_csv(args.out / "compare.csv", index=False)
    (args.out / "compare.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
