"""The HTML report: the tests that run a job, a command or processes (its fast tests:
tests/unit/report/test_report_html.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write_demo_like as _demo_like

from distill_sweep.report.cli import main


def test_wandb_summary_run_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    _demo_like(tmp_path)
    assert main([str(tmp_path), "paper=false", "table=1", "wandb=true", "wandb_group=demo-sweep"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("wandb summary run (offline): "))
    run_dir = Path(line.split(": ", 1)[1])
    assert run_dir.is_dir() and run_dir.name.startswith("offline-run-")
    assert (run_dir / f"run-{run_dir.name.rsplit('-', 1)[1]}.wandb").is_file()  # the run's log, to `wandb sync`
    media = {p.name.split("_")[0] for p in run_dir.glob("files/media/**/*") if p.is_file()}
    assert {"table1", "curves", "report"} <= media  # a table, a plot and the page


def test_bench_report_writes_its_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from distill_sweep.bench import report

    assert report.synthetic_store(tmp_path / "s", 23) == 23  # stops at the count asked for
    assert len(list((tmp_path / "s").rglob("result.json"))) == 23
    out = tmp_path / "report.json"
    assert report.main(["--jobs", "40", "--repeats", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    rows = next(b["table"]["rows"] for b in data["blocks"] if "table" in b)
    assert rows[0][0].startswith("the report command") and float(rows[0][1]) > 0
    assert "synthetic 40-job store" in capsys.readouterr().out
