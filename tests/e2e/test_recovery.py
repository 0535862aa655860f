"""Recovering instead of repeating a failure: unreadable checkpoints and cached teachers, the teacher lock's
wait notice, and overrides written after `-m`."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest
import torch
from filelock import FileLock
from helpers import FAST, compose_cfg, run_cli_preloaded

from distill_sweep.__main__ import overrides_first
from distill_sweep.job.identity import identify
from distill_sweep.records import locks
from distill_sweep.teachers.cache import cached_teacher, entry_problem
from distill_sweep.training.checkpoint import load_checkpoint, save_checkpoint
from distill_sweep.training.checkpoint_files import previous_path, remove_checkpoint

# ------------------------------------------------------------------------------ overrides after -m


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["a=1", "-m", "b=2"], ["a=1", "b=2", "-m"]),
        (["-m", "a=1", "+b=2"], ["a=1", "+b=2", "-m"]),
        (["a=1", "--multirun", "~c"], ["a=1", "~c", "--multirun"]),
        (["a=1", "-m", "--cfg", "job", "b=2"], ["a=1", "b=2", "-m", "--cfg", "job"]),
        (["a=1", "-m", "-c", "hydra", "b=2"], ["a=1", "b=2", "-m", "-c", "hydra"]),
        (["-m", "--cfg=job", "b=2"], ["b=2", "-m", "--cfg=job"]),
        (["-cn", "other", "-m", "b=2"], ["b=2", "-cn", "other", "-m"]),
        (["--info", "config", "b=2"], ["b=2", "--info", "config"]),
        (["--info", "b=2"], ["b=2", "--info"]),  # not a choice of --info: an override
        (["a=1", "--multi", "b=2"], ["a=1", "b=2", "--multi"]),  # argparse's abbreviation of --multirun
        (["a=1", "--help"], ["a=1", "--help"]),
        (["a=1", "--nosuch", "b=2"], ["a=1", "b=2", "--nosuch"]),  # left for Hydra to refuse
    ],
)
def test_overrides_move_in_front_of_hydra_flags(argv, expected):
    assert overrides_first(argv) == expected


def test_overrides_after_multirun_flag_give_the_dry_run_plan(tmp_path):
    proc = run_cli_preloaded([*FAST, "objective=vanilla_kd", "init=1,3", "results_dir=res", "-m", "+dry_run=true"],
                   cwd=tmp_path, timeout=300, env={"DISTILL_SWEEP_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 jobs in the grid, 0 already completed, 2 to run" in proc.stdout
    assert proc.stdout.count("would run:") == 2
    assert not list(tmp_path.rglob("result.json"))  # planned, not run
    assert not (tmp_path / "cache" / "teachers").exists()


# ------------------------------------------------------------------------------ checkpoints


def _state(step: int) -> dict:
    return {"config_hash": "h", "step": step, "weights": torch.arange(2000, dtype=torch.float32) * step}


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(4096))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _not_a_dict(path: Path) -> None:
    torch.save([1, 2, 3], path)


def _no_hash(path: Path) -> None:
    torch.save({"step": 3}, path)


@pytest.mark.parametrize("damage", [_truncate, _garbage, _empty, _not_a_dict, _no_hash])
def test_unreadable_checkpoint_is_moved_aside_and_the_job_restarts(tmp_path, caplog, damage):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, _state(1))
    damage(path)
    damaged = path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="distill_sweep.training.checkpoint"):
        assert load_checkpoint(path, "h") is None
    assert not path.exists()
    [aside] = tmp_path.glob("checkpoint.pt.corrupt-*")
    assert aside.read_bytes() == damaged  # kept for inspection
    assert any(str(path) in r.getMessage() and str(aside) in r.getMessage() for r in caplog.records)
    assert load_checkpoint(path, "h") is None  # the re-run starts cleanly, no second failure


def test_missing_required_key_is_unreadable(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"config_hash": "h", "epoch": 1})
    assert load_checkpoint(path, "h", required=("epoch",))["epoch"] == 1
    assert load_checkpoint(path, "h", required=("epoch", "model")) is None
    assert list(tmp_path.glob("checkpoint.pt.corrupt-*"))


@pytest.mark.parametrize("damage", [_truncate, _garbage, _empty])
def test_falls_back_to_the_previous_checkpoint(tmp_path, damage):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, _state(1), keep_previous=True)
    assert not previous_path(path).exists()  # nothing to keep on the first save
    save_checkpoint(path, _state(2), keep_previous=True)
    assert torch.load(previous_path(path), weights_only=True)["step"] == 1
    damage(path)
    state = load_checkpoint(path, "h")
    assert state is not None and state["step"] == 1
    assert torch.equal(state["weights"], _state(1)["weights"])
    assert list(tmp_path.glob("checkpoint.pt.corrupt-*"))
    # the next save does not replace the good previous checkpoint with nothing
    save_checkpoint(path, _state(3), keep_previous=True)
    assert load_checkpoint(path, "h")["step"] == 3
    assert torch.load(previous_path(path), weights_only=True)["step"] == 1


def test_both_unreadable_starts_over(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, _state(1), keep_previous=True)
    save_checkpoint(path, _state(2), keep_previous=True)
    _truncate(path)
    _garbage(previous_path(path))
    assert load_checkpoint(path, "h") is None
    assert len(list(tmp_path.glob("*.corrupt-*"))) == 2


def test_readable_checkpoints_are_left_alone(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, _state(2))
    assert load_checkpoint(path, "h")["step"] == 2
    assert load_checkpoint(path, "another config") is None  # not corrupt: stays, the next save replaces it
    assert path.exists() and not list(tmp_path.glob("*.corrupt-*"))
    save_checkpoint(path, _state(3), keep_previous=True)
    remove_checkpoint(path)
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------ teacher cache


def _tiny_model(out_dir: Path) -> None:
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        vocab_size=50)
    BertForSequenceClassification(config).save_pretrained(out_dir)


class _Finetune:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, out_dir: Path) -> dict[str, float]:
        self.calls += 1
        _tiny_model(out_dir)
        return {"accuracy": 0.5 + self.calls / 10}


@pytest.fixture()
def cfg():
    return compose_cfg(FAST)


def cached(cfg, cache_dir, finetune):
    """The job's teacher from the cache (fine-tuned by `finetune` if it is not there)."""
    return cached_teacher(identify(cfg).teacher, "toy", cache_dir, finetune)


def teacher_dir(cfg, cache_dir):
    return identify(cfg).teacher.directory(cache_dir, "toy")


def test_intact_cached_teacher_is_reused(tmp_path, cfg):
    finetune = _Finetune()
    path, source, dev = cached(cfg, tmp_path, finetune)
    assert (source, finetune.calls, entry_problem(path)) == ("trained", 1, None)
    again = cached(cfg, tmp_path, finetune)
    assert again == (path, "cache", dev) and finetune.calls == 1


def test_truncated_cached_teacher_is_rebuilt_and_kept_aside(tmp_path, cfg, caplog):
    finetune = _Finetune()
    path, _, _ = cached(cfg, tmp_path, finetune)
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size - 1000])
    assert "model.safetensors" in entry_problem(path)
    with caplog.at_level(logging.WARNING, logger="distill_sweep.teachers.cache"):
        again, source, dev = cached(cfg, tmp_path, finetune)
    assert (again, source, finetune.calls, dev) == (path, "trained", 2, {"accuracy": 0.7})
    assert entry_problem(path) is None
    from transformers import AutoModelForSequenceClassification

    AutoModelForSequenceClassification.from_pretrained(path)  # the rebuilt entry loads
    [aside] = path.parent.glob(f"{path.name}.corrupt-*")
    assert (aside / "teacher.json").exists() and "model.safetensors" in entry_problem(aside)
    assert any(str(aside) in r.getMessage() for r in caplog.records)


def test_teacher_json_without_dev_metrics_is_rebuilt(tmp_path, cfg):
    finetune = _Finetune()
    path, _, _ = cached(cfg, tmp_path, finetune)
    (path / "teacher.json").write_text('{"key": {}}')
    assert cached(cfg, tmp_path, finetune)[1:] == ("trained", {"accuracy": 0.7})
    assert list(path.parent.glob(f"{path.name}.corrupt-*"))


def test_unparseable_config_json_is_a_broken_entry(tmp_path):
    _tiny_model(tmp_path)
    assert entry_problem(tmp_path) is None
    (tmp_path / "config.json").write_text('{"model_type": "be')
    assert "config.json" in entry_problem(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").unlink()
    assert "no model weights" in entry_problem(tmp_path)


def test_a_job_waiting_for_the_teacher_lock_says_so(tmp_path, cfg, caplog, monkeypatch):
    monkeypatch.setattr(locks, "LOCK_NOTICE_AFTER_S", 0.2)
    lock_path = str(teacher_dir(cfg, tmp_path)) + ".lock"
    Path(lock_path).parent.mkdir(parents=True)
    held, release = threading.Event(), threading.Event()

    def other_job() -> None:
        with FileLock(lock_path):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=other_job)
    thread.start()
    assert held.wait(10)
    threading.Timer(1.0, release.set).start()
    start = time.monotonic()
    with caplog.at_level(logging.INFO, logger="distill_sweep"):
        _, source, _ = cached(cfg, tmp_path, _Finetune())
    thread.join()
    assert source == "trained" and time.monotonic() - start >= 0.9  # it did wait for the other job
    waits = [r.getMessage() for r in caplog.records if "waiting for the lock" in r.getMessage()]
    assert waits == [f"waiting for the lock {lock_path} (another job is fine-tuning this teacher)"]


def test_no_wait_notice_when_the_lock_is_free(tmp_path, cfg, caplog):
    with caplog.at_level(logging.INFO, logger="distill_sweep"):
        cached(cfg, tmp_path, _Finetune())
    assert not any("waiting" in r.getMessage() for r in caplog.records)


def test_unset_pilot_keys_leave_the_teacher_key_unchanged(tmp_path, cfg):
    # Teachers cached before task.max_*_samples existed must keep their directory (no re-fine-tuning).
    before = compose_cfg(FAST)
    for key in ("max_train_samples", "max_dev_samples", "subset_seed"):
        before.task.pop(key)
    assert teacher_dir(before, tmp_path) == teacher_dir(cfg, tmp_path)
    pilot = compose_cfg([*FAST, "task.max_train_samples=100"])
    other_seed = compose_cfg([*FAST, "task.max_train_samples=100", "task.subset_seed=1"])
    assert len({teacher_dir(c, tmp_path) for c in (cfg, pilot, other_seed)}) == 3
