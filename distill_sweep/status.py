"""`python -m distill_sweep.status [RESULTS_DIR]`: where a result store's jobs stand, without running anything.

Counts the records by status and lists the jobs that are not done: running (a process holds the job's lock),
interrupted (the record says `running` but no process holds its lock: killed, or its node went away; the same
sweep command resumes it from its checkpoint) and failed (with the record's error line). Reads records and lock
files only, so it is safe to run beside a sweep, on a login node.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from distill_sweep.records.files import read_record
from distill_sweep.records.locks import held_elsewhere
from distill_sweep.records.record import RECORD


def job_state(record: dict[str, Any], directory: Path) -> str:
    """completed, failed, running (its lock is held) or interrupted (a `running` record nobody holds)."""
    status = str(record.get("status"))
    if status == "running":
        return "running" if held_elsewhere(directory) else "interrupted"
    return status


def describe(record: dict[str, Any]) -> str:
    init = record.get("init") if isinstance(record.get("init"), dict) else {}
    return (f"{record.get('task')}/{record.get('objective') or record.get('procedure')} "
            f"init-{init.get('spec', '?')} seed {record.get('seed')}")


def where_it_is(record: dict[str, Any], path: Path, now: float) -> str:
    """The last epoch a running or interrupted job recorded, and how long ago its record was written."""
    epochs = record.get("epochs") if isinstance(record.get("epochs"), list) else []
    last = epochs[-1] if epochs and isinstance(epochs[-1], dict) else None
    at = f"after {last.get('stage')} epoch {last.get('epoch')}" if last else "before its first epoch"
    return f"{at}, record written {_ago(now - path.stat().st_mtime)} ago"


def status_text(results_dir: Path) -> str:
    now = time.time()
    found = []
    for path in sorted(results_dir.rglob(RECORD)):
        record = read_record(path)
        if isinstance(record, dict):
            found.append((job_state(record, path.parent), record, path))
    if not found:
        return f"{results_dir}: no records"
    counts = Counter(state for state, _, _ in found)
    order = ("completed", "running", "interrupted", "failed")
    summary = ", ".join(f"{counts[s]} {s}" for s in (*order, *sorted(set(counts) - set(order))) if counts[s])
    lines = [f"{results_dir}: {len(found)} jobs: {summary}"]
    sections = {"running": "running (a process holds the job's lock)",
                "interrupted": "interrupted (record 'running', no process holds its lock: the same command resumes "
                               "it from its checkpoint)",
                "failed": "failed (re-running the command runs it again)"}
    for state, heading in sections.items():
        jobs = [(record, path) for s, record, path in found if s == state]
        if not jobs:
            continue
        lines.append(f"{heading}:")
        for record, path in jobs:
            detail = str(record.get("error") or "").splitlines()[0][:200] if state == "failed" else \
                where_it_is(record, path, now)
            lines.append(f"  {describe(record)}: {detail} ({path.parent})")
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
