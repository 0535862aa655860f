"""distill_sweep.report: the tests that run a job, a command or processes (its fast tests:
tests/unit/report/test_report.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import ROOT, write_record

REPO = ROOT


def test_module_entry_point(tmp_path: Path) -> None:
    """The real `python -m distill_sweep.report` (one subprocess: the rest call main() directly)."""
    write_record(tmp_path, task="toy", seed=0)
    ok = subprocess.run([sys.executable, "-m", "distill_sweep.report", str(tmp_path), "table=1"],
                        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "tables" / "table1.tex").is_file()
    bad = subprocess.run([sys.executable, "-m", "distill_sweep.report", str(tmp_path), "table=9"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
