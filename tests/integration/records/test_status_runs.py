"""`python -m distill_sweep.status`: the tests that run a job, a command or processes (its fast tests:
tests/unit/records/test_status.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_a_missing_store_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "distill_sweep.status", str(tmp_path / "none")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip().endswith("is not a directory")
    assert proc.stderr.count("\n") == 1
