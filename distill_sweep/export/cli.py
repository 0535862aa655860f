"""`python -m distill_sweep.export RESULTS_DIR [--out DIR_OR_FILE] [--format parquet|csv]`: the command line.

Writes the two tables of `tables.read` (runs and metrics), both or neither (each through a temp file, renamed into
place once both are written). `--out` a directory (default `<results_dir>/export`): `runs.<format>` and
`metrics.<format>` in it; a file named `.parquet` or `.csv`: the runs there and the metrics beside it, as
`<name>_metrics.<format>`. Bad input (a results directory that is not one, or holds no record; a format that is
not one, or not the file's) is one line on stderr and exit code 2, before anything is written. Records left out
are listed on stderr, one line each.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from distill_sweep.errors import DiskWriteError
from distill_sweep.export.tables import read
from distill_sweep.records.disk import atomic_file

PROG = "distill_sweep.export"
FORMATS = ("parquet", "csv")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        print(f"{PROG}: error: {message}", file=sys.stderr)
        sys.exit(2)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=f"python -m {PROG}", description="The records of a results directory as two tidy tables: "
                "runs (one row per job) and metrics (one row per job, epoch and metric).")
    p.add_argument("results_dir", type=Path, help="the result store (the directory of the jobs' result.json)")
    p.add_argument("--out", type=Path, default=None,
                   help="a directory for runs.<format> and metrics.<format> (default: <results_dir>/export), or "
                        "a .parquet or .csv file for the runs (the metrics beside it, <name>_metrics.<format>)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="parquet (default) or csv; a file given to --out says its own")
    return p


def targets(results_dir: Path, out: Path | None, fmt: str | None) -> tuple[Path, Path, str]:
    """The runs and metrics files and the format; ValueError (the one line) when they contradict each other."""
    if out is not None and out.suffix.lower() in (".parquet", ".csv") and not out.is_dir():
        own = out.suffix.lower()[1:]
        if fmt is not None and fmt != own:
            raise ValueError(f"--format {fmt} but --out {out} is a .{own} file")
        return out, out.with_name(f"{out.stem}_metrics{out.suffix}"), own
    fmt = fmt or "parquet"
    directory = out if out is not None else results_dir / "export"
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"--out {directory} is a file, not a directory (name a .parquet or .csv file to write one)")
    return directory / f"runs.{fmt}", directory / f"metrics.{fmt}", fmt


def write(table: pa.Table, f: object, fmt: str) -> None:
    if fmt == "parquet":
        pq.write_table(table, f)
    else:
        pa_csv.write_csv(table, f)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    results_dir: Path = args.results_dir
    if not results_dir.is_dir():
        return _fail(f"{results_dir} is not a directory")
    try:
        runs_path, metrics_path, fmt = targets(results_dir, args.out, args.format)
    except ValueError as err:
        return _fail(str(err))
    if not any(results_dir.glob("**/result.json")):
        return _fail(f"no result.json under {results_dir}: not a results directory")
    export = read(results_dir)
    for line in export.left_out:
        print(f"left out {line}", file=sys.stderr)
    meta = {b"distill_sweep.results_dir": str(results_dir).encode(),
            b"distill_sweep.left_out": "\n".join(export.left_out).encode()}
    try:  # both files or neither
        with atomic_file(runs_path, binary=True) as runs_file, atomic_file(metrics_path, binary=True) as metrics_file:
            write(export.runs.replace_schema_metadata(meta), runs_file, fmt)
            write(export.metrics.replace_schema_metadata(meta), metrics_file, fmt)
    except DiskWriteError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1
    statuses = export.runs.column("status").to_pylist() if export.runs.num_rows else []
    counts = ", ".join(f"{statuses.count(s)} {s}" for s in sorted(set(statuses)))
    print(f"{runs_path}: {export.runs.num_rows} runs ({counts or 'none'})")
    print(f"{metrics_path}: {export.metrics.num_rows} metric values")
    if export.left_out:
        print(f"{len(export.left_out)} left out (listed above on stderr)")
    return 0


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2
