"""Records, checkpoints and shared-store keys written by the code before the typed-settings redesign are still
found, resumed and named the same (tests/fixtures/v2/README.md says how they were written): the tests that run a
job, a command or processes (its fast tests: tests/unit/records/test_earlier_records.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers import V2_BASE as BASE
from helpers import V2_FIXTURES as FIXTURES
from helpers import compose_cfg, run_cli_preloaded

from distill_sweep.cli.run_job import run_job
from distill_sweep.job.identity import find_completed, identify


def test_earlier_records_are_found_completed_by_the_sweeper(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "store", store)
    before = {p: p.read_text() for p in store.rglob("result.json")}
    where = [f"results_dir={store}", f"cache_dir={tmp_path / 'cache'}"]
    # the two task jobs as one sweep (finetune ignores the objective: one job each)
    proc = run_cli_preloaded([*BASE, "objective=hid_seq", "init=1", "procedure=task_specific,finetune", *where, "-m",
                    "+dry_run=true"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 jobs in the grid, 2 already completed, 0 to run" in proc.stdout, proc.stdout
    # the corpus job, through the function the sweeper asks
    agnostic = identify(compose_cfg([*BASE, "procedure=task_agnostic", "teacher=tiny_mlm", "objective=att_mse",
                                     "optimizer.batch_size=null", *where]))
    assert find_completed(agnostic)["config_hash"] == agnostic.digest
    assert {p: p.read_text() for p in store.rglob("result.json")} == before


def test_an_earlier_unfinished_job_resumes_from_its_checkpoint(tmp_path: Path, shared_cache: Path) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "ckpt", ckpt)
    path = next(ckpt.rglob("result.json"))
    old = json.loads(path.read_text())
    path.write_text(json.dumps({**old, "status": "running"}))  # as a job killed after its last checkpoint
    record = run_job(compose_cfg([*BASE, "objective=hid_seq", "init=2", "checkpoint.keep=true",
                                  f"results_dir={ckpt}", f"cache_dir={shared_cache}"]))
    assert record["status"] == "completed" and record["resumed"] == 1
    assert record["config_hash"] == old["config_hash"] and path.exists()  # the same job, in the same place
    assert record["epochs"] == old["epochs"]  # nothing retrained: the checkpoint held the finished stages
