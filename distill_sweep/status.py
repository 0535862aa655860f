"""`python -m distill_sweep.status [RESULTS_DIR]`: where a result store's jobs stand, without running anything.

Counts the records by status and lists the jobs that are not done: running (a process holds the job's lock),
interrupted (the record says `running` but no process holds its lock: killed, or its node went away; the same
sweep command resumes it from its checkpoint), failed (with the record's error line) and damaged (a record the
report cannot read, or a lock that cannot be tried: each named with what is wrong). Reads records and lock files
only, so it is safe to run beside a sweep, on a login node.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distill_sweep.records.labels import record_label
from distill_sweep.records.locks import LOCK, held_elsewhere
from distill_sweep.records.record import RECORD, STATUSES, Record, RecordError, incomplete_reason, load_json

ORDER = ("completed", "running", "interrupted", "failed", "damaged")
SECTIONS = {"running": "running (a process holds the job's lock)",
            "interrupted": "interrupted (record 'running', no process holds its lock: the same command resumes it "
                           "from its checkpoint)",
            "failed": "failed (re-running the command runs it again)",
            "damaged": "damaged (left out of the other counts; each line says what is wrong)"}


@dataclass
class Job:
    """One result.json: its state, its record when it reads as one, and why it is damaged when it is."""

    path: Path
    state: str
    record: dict[str, Any] | None = None
    why: str = ""


def read_job(path: Path) -> Job:
    """The job whose record is at `path`, read by the report's rule (records.record.Record.from_dict): a record
    it cannot read, a "completed" one that is not complete (the sweeper runs it again) and a lock that cannot be
    tried are `damaged`, with the reason."""
    try:
        raw = load_json(path)
        Record.from_dict(raw)
    except RecordError as exc:
        return Job(path, "damaged", why=str(exc))
    status = raw.get("status")
    if status not in STATUSES:
        return Job(path, "damaged", raw, f"status {status!r} is not one of {', '.join(STATUSES)}")
    if status == "completed" and (why := incomplete_reason(raw)) is not None:
        return Job(path, "damaged", raw, f"status completed but incomplete ({why}); the sweeper runs it again")
    if status != "running":
        return Job(path, status, raw)
    try:
        held = held_elsewhere(path.parent)
    except OSError as exc:  # e.g. a directory where the lock file should be
        kind = "a directory, not a lock file" if (path.parent / LOCK).is_dir() else exc.strerror or str(exc)
        return Job(path, "damaged", raw, f"record 'running' and its {LOCK} is {kind}: whether a process runs it "
                                         f"cannot be told (remove {path.parent / LOCK} if none does)")
    return Job(path, "running" if held else "interrupted", raw)


def where_it_is(record: dict[str, Any], path: Path, now: float) -> str:
    """The last epoch a running or interrupted job recorded, and how long ago its record was written."""
    epochs = record.get("epochs") if isinstance(record.get("epochs"), list) else []
    last = epochs[-1] if epochs and isinstance(epochs[-1], dict) else None
    at = f"after {last.get('stage')} epoch {last.get('epoch')}" if last else "before its first epoch"
    try:
        written = f"record written {_ago(now - path.stat().st_mtime)} ago"
    except OSError:  # gone since it was read (the job finished and a re-run replaced it)
        written = "record since replaced"
    return f"{at}, {written}"


def _error_line(record: dict[str, Any]) -> str:
    """The first line of a failed record's error, or what stands for it where the record holds none."""
    lines = str(record.get("error") or "").strip().splitlines()
    return lines[0][:200] if lines else "(the record holds no error message)"


def status_text(results_dir: Path) -> str:
    now = time.time()
    found = [read_job(path) for path in sorted(results_dir.rglob(RECORD))]
    if not found:
        return f"{results_dir}: no records"
    counts = Counter(job.state for job in found)
    summary = ", ".join(f"{counts[s]} {s}" for s in ORDER if counts[s])
    lines = [f"{results_dir}: {len(found)} jobs: {summary}"]
    for state, heading in SECTIONS.items():
        jobs = [job for job in found if job.state == state]
        if not jobs:
            continue
        lines.append(f"{heading}:")
        for job in jobs:
            if state == "damaged":
                lines.append(f"  {job.path}: {job.why}")
                continue
            assert job.record is not None  # (read: not damaged)
            detail = _error_line(job.record) if state == "failed" else where_it_is(job.record, job.path, now)
            lines.append(f"  {record_label(job.record)}: {detail} ({job.path.parent})")
    return "\n".join(lines)


def _ago(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.status", description=__doc__.splitlines()[0])
    parser.add_argument("results_dir", nargs="?", default="results", help="the result store (default: results)")
    args = parser.parse_args(argv)
    results = Path(args.results_dir)
    if not results.is_dir():
        parser.exit(2, f"distill_sweep.status: error: {results} is not a directory\n")
    print(status_text(results))


if __name__ == "__main__":
    main(sys.argv[1:])
