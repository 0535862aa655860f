"""While a job runs its record is typed (`distill_sweep.records.record.Record`, filled field by field), not a dict:
a scan of the package, like test_layers.py's, fails if a string-keyed record access comes back."""

from __future__ import annotations

import re

from helpers import ROOT

# a string-keyed read or write of a record (`record["best"]`, `ctx.record['teacher']`)
RECORD_KEY = re.compile(r"""\brecord\[["']""")
# a tolerant read of a record's key (`record.get("resumed", 0)`)
RECORD_GET = re.compile(r"\brecord\.get\(")
# the folders that read result.json files as they are on disk, whatever they hold (the records layer, the report,
# `status`, the sweeper's look at a directory): no running record reaches them
READ_AS_WRITTEN = {"records", "report", "status", "sweep"}


def _untyped_accesses() -> list[str]:
    found = []
    for path in sorted((ROOT / "distill_sweep").rglob("*.py")):
        top = path.relative_to(ROOT / "distill_sweep").parts[0].removesuffix(".py")
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if (top != "records" and RECORD_KEY.search(line)) or (top not in READ_AS_WRITTEN and RECORD_GET.search(line)):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    return found


def test_no_module_reads_or_writes_the_record_by_key() -> None:
    assert _untyped_accesses() == []


def test_the_scan_sees_a_keyed_access() -> None:
    assert RECORD_KEY.search('        ctx.record["teacher"].update(info)')
    assert RECORD_KEY.search("    best = record['best']")
    assert RECORD_GET.search('        record["resumed"] = record.get("resumed", 0) + 1')
    assert not RECORD_KEY.search("    record.teacher.dev = dev")
    assert not RECORD_GET.search("        text = record.getMessage()")  # a logging record
