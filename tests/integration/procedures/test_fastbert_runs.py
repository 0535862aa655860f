"""FastBERT: the tests that run a job, a command or processes (its fast tests:
tests/unit/procedures/test_fastbert.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import FAST, compose_cfg

from distill_sweep.cli.run_job import run_job


def test_fastbert_s_own_choices_run_and_leave_earlier_hashes_alone(tmp_path: Path, shared_cache: Path) -> None:
    from distill_sweep.job.identity import identify

    base = [*FAST, "procedure=fastbert", "procedure.speeds=[0.0,1.0]", "max_steps_per_epoch=2", "epochs=1",
            f"results_dir={tmp_path}", f"cache_dir={shared_cache}"]
    record = run_job(compose_cfg([*base, "procedure.teacher_head=fastbert", "procedure.dropout=true"]))
    assert record["status"] == "completed"
    assert [e["stage"] for e in record["epochs"]] == ["teacher_head", "self_distill"]
    assert record["config"]["procedure"]["teacher_head"] == "fastbert" and record["config"]["procedure"]["dropout"]
    curve = record["early_exit"]  # the last exit is the fitted head's: its cost is a branch's
    assert curve[0]["mean_exit_layer"] == 6.0 and curve[0]["full_flops"] == curve[0]["mean_flops"]

    def digest(*overrides: str) -> str:
        return identify(compose_cfg([*base, *overrides])).digest

    # at their defaults the keys are not hashed (tests/unit/records/test_earlier_records.py: a FastBERT job keeps its hash)
    unset = digest("~procedure.teacher_head", "~procedure.dropout")
    assert digest() == unset and len({unset, digest("procedure.teacher_head=fastbert"),
                                      digest("procedure.dropout=true")}) == 3


def test_fastbert_procedure_records_the_speed_curve(tmp_path: Path, shared_cache: Path) -> None:
    record = run_job(compose_cfg([*FAST, "procedure=fastbert", "procedure.speeds=[0.0,0.5,1.0]",
                                  "max_steps_per_epoch=3", f"results_dir={tmp_path}", f"cache_dir={shared_cache}"]))
    assert record["status"] == "completed" and record["procedure"] == "fastbert"
    assert [e["stage"] for e in record["epochs"]] == ["self_distill"] and record["best"]["stage"] == "self_distill"
    curve = record["early_exit"]
    assert [row["speed"] for row in curve] == [0.0, 0.5, 1.0]
    assert curve[0]["mean_exit_layer"] == 6.0 and curve[0]["speedup"] == pytest.approx(1.0)
    assert curve[-1]["mean_exit_layer"] == 1.0 and curve[-1]["speedup"] > 1.0  # speed 1: every sample at layer 1
    assert record["teacher"]["dev"] == pytest.approx(curve[0]["dev"])  # speed 0 = the fine-tuned teacher
    from helpers import run_cli_preloaded

    report = run_cli_preloaded([str(tmp_path)], cwd=tmp_path, module="distill_sweep.report")
    assert report.returncode == 0, report.stderr[-2000:]
    section = report.stdout.split("== Early exit: speed vs accuracy (FastBERT) ==")[1]
    rows = [re.split(r"\s{2,}", line) for line in section.splitlines() if line.startswith("toy ")]
    assert [row[2] for row in rows] == ["0", "0.5", "1"]  # task, row, speed, metric, exit layer, speed-up
    assert rows[0][4:] == ["6.00", "1.00x"] and rows[-1][4] == "1.00"
    assert (tmp_path / "tables" / "early_exit.png").exists() and (tmp_path / "tables" / "early_exit.csv").exists()
