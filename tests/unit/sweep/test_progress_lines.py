"""The sweep's line per finished job (sweeper.FinishedJobs): every seed source in the label, and the one no-KD name.
Two jobs that differ only in seeds.data_order printed the same `completed: toy/vanilla_kd init-1 seed 1`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import FAST, compose_cfg, write_record

from distill_sweep.job.identity import identify
from distill_sweep.records.record import RECORD
from distill_sweep.sweep.sweeper import FinishedJobs


def test_each_finished_job_has_a_label_of_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = [*FAST, f"results_dir={tmp_path}"]
    jobs = [identify(compose_cfg([*base, *extra])) for extra in
            ([], ["seeds.data_order=2"], ["procedure=finetune"])]
    done = write_record(tmp_path / "made")  # a complete record, put where each job's record goes
    for ident in jobs:
        ident.out_dir.mkdir(parents=True)
        shutil.copy(done, ident.out_dir / RECORD)
    FinishedJobs(jobs)._poll()
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["distill_sweep: [1/3] completed: toy/vanilla_kd init-1 seed 1",
                     "distill_sweep: [2/3] completed: toy/vanilla_kd init-1 seed 1 (seeds.data_order=2)",
                     "distill_sweep: [3/3] completed: toy/no KD (fine-tuning) init-1 seed 1"]
