"""What distill_sweep relies on from Hydra's internals, pinned in one place: the tests that run a job, a command or
processes (its fast tests: tests/unit/sweep/test_hydra_api.py)."""

from __future__ import annotations

from pathlib import Path

from helpers import run_cli


def test_the_installed_hydra_says_nothing_about_version_base(tmp_path: Path) -> None:
    """The command line's one-line refusal is the only line on stderr under the installed Hydra (1.3 or 1.4)."""
    proc = run_cli(["epochs=abc", f"results_dir={tmp_path / 'r'}"], cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "distill_sweep: error: epochs='abc': expected an integer or null"], proc.stderr
