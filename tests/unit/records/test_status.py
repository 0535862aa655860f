"""`python -m distill_sweep.status`: a store's jobs by state, read from records and lock files."""

from __future__ import annotations

import json
from pathlib import Path

from distill_sweep.records.locks import JobLock
from distill_sweep.status import status_text


def _record(root: Path, objective: str, seed: int, status: str, **extra: object) -> Path:
    directory = root / "toy" / objective / "init-1" / f"seed-{seed}" / "0123456789"
    directory.mkdir(parents=True)
    (directory / "result.json").write_text(json.dumps({"status": status, "task": "toy", "objective": objective,
                                                       "seed": seed, "init": {"spec": "1"}, **extra}))
    return directory


def test_each_job_is_completed_running_interrupted_or_failed(tmp_path: Path) -> None:
    _record(tmp_path, "vanilla_kd", 1, "completed")
    running = _record(tmp_path, "att_mse", 1, "running", epochs=[{"stage": "intermediate", "epoch": 2}])
    _record(tmp_path, "att_mse", 2, "running")  # its process was killed: nobody holds the lock
    _record(tmp_path, "hid_seq", 1, "failed", error="NonFiniteLossError: non-finite loss at step 2\ntrace")
    with JobLock(running):  # a process (here: this one, on its own file descriptor) runs it
        text = status_text(tmp_path)
    assert text.splitlines()[0] == f"{tmp_path}: 4 jobs: 1 completed, 1 running, 1 interrupted, 1 failed"
    running_part = text.split("running (a process")[1].split("interrupted (")[0]
    assert "toy/att_mse init-1 seed 1: after intermediate epoch 2" in running_part
    interrupted_part = text.split("interrupted (")[1].split("failed (")[0]
    assert "toy/att_mse init-1 seed 2: before its first epoch" in interrupted_part
    assert "toy/hid_seq init-1 seed 1: NonFiniteLossError: non-finite loss at step 2 (" in text
