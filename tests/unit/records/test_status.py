"""`python -m distill_sweep.status`: a store's jobs by state, read from records and lock files; a damaged record or
lock is counted as damaged and named with what is wrong, never left out and never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import write_record

from distill_sweep.records.locks import LOCK, JobLock
from distill_sweep.status import main, status_text


def _record(root: Path, objective: str, seed: int, status: str, **extra: object) -> Path:
    directory = root / "toy" / objective / "init-1" / f"seed-{seed}" / "0123456789"
    directory.mkdir(parents=True)
    (directory / "result.json").write_text(json.dumps({"status": status, "task": "toy", "objective": objective,
                                                       "seed": seed, "init": {"spec": "1"}, **extra}))
    return directory


def test_each_job_is_completed_running_interrupted_or_failed(tmp_path: Path) -> None:
    write_record(tmp_path, objective="vanilla_kd", seed=1)
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


# Each damage, and what the line naming it says. Each was counted completed, or left out of the count, or crashed.
DAMAGED = {
    "torn": ('{"status": "completed", "task": "to', "unreadable (JSONDecodeError"),
    "binary": (b"\x80\x81\xff", "unreadable (UnicodeDecodeError"),
    "a list": ("[1, 2]", "not a JSON object"),
    "seed a word": ({"seed": "one"}, "seed 'one' is not an integer"),
    "wall time a word": ({"wall_time_s": "slow"}, "wall_time_s 'slow' is not a number"),
    "seed overflowing": ({"seeds": {"init": 10**30, "own": ["init"]}}, "seeds.init 1000000000000000000000000000000"),
    "completed, no scores": ({"best": None}, "status completed but incomplete (no best.dev)"),
    "unknown status": ({"status": "done"}, "status 'done' is not one of running, completed, failed"),
}


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_a_damaged_record_is_counted_damaged_and_named(tmp_path: Path, damage: str) -> None:
    """7 good records and 1 damaged: "8 jobs: 7 completed, 1 damaged", the damaged one named with the reason (it
    was "7 jobs: 7 completed" for a torn file, and "8 jobs: 8 completed" for one the report leaves out)."""
    paths = [write_record(tmp_path, objective="vanilla_kd", seed=seed) for seed in range(8)]
    content, why = DAMAGED[damage]
    victim = paths[3]
    if isinstance(content, bytes):
        victim.write_bytes(content)
    elif isinstance(content, dict):
        victim.write_text(json.dumps({**json.loads(victim.read_text()), **content}))
    else:
        victim.write_text(content)
    lines = status_text(tmp_path).splitlines()
    assert lines[0] == f"{tmp_path}: 8 jobs: 7 completed, 1 damaged"
    assert lines[1].startswith("damaged (")
    assert lines[2].startswith(f"  {victim}: ") and why in lines[2] and len(lines) == 3


def test_a_failed_record_without_an_error_and_a_lock_that_is_a_directory(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Both were tracebacks (IndexError on an empty `error`, IsADirectoryError trying the lock); a record that is a
    directory was left out of the count."""
    _record(tmp_path, "att_kl", 1, "failed", error="")
    _record(tmp_path, "att_kl", 2, "failed", error=None)
    locked = _record(tmp_path, "att_mse", 1, "running")
    (locked / LOCK).mkdir()
    folder = tmp_path / "toy" / "att_mse" / "init-1" / "seed-2" / "0123456789" / "result.json"
    folder.mkdir(parents=True)  # was left out of the count
    main([str(tmp_path)])
    text = capsys.readouterr().out
    assert text.splitlines()[0] == f"{tmp_path}: 4 jobs: 2 failed, 2 damaged"
    assert f"  {folder}: unreadable (IsADirectoryError" in text
    assert text.count(": (the record holds no error message) (") == 2
    assert f"  {locked / 'result.json'}: record 'running' and its {LOCK} is a directory, not a lock file" in text


def test_labels_name_every_seed_source_and_one_name_for_no_kd(tmp_path: Path) -> None:
    """Two failed jobs that differ only in seeds.data_order printed one label; a no-KD job was `toy/none`."""
    seeds = {"init": 1, "data_order": 2, "dropout": 1, "sampling": 1, "own": ["data_order"]}
    _record(tmp_path, "vanilla_kd", 1, "failed", error="E", seeds=seeds)
    (tmp_path / "b").mkdir()
    _record(tmp_path / "b", "vanilla_kd", 1, "failed", error="E")
    _record(tmp_path / "c", "none", 1, "failed", error="E", procedure="finetune")
    text = status_text(tmp_path)
    assert "toy/vanilla_kd init-1 seed 1 (seeds.data_order=2): E (" in text
    assert "toy/vanilla_kd init-1 seed 1: E (" in text
    assert "toy/no KD (fine-tuning) init-1 seed 1: E (" in text
