"""Jobs that survive: resume == uninterrupted, preemption signal, kill -9 of a sweep, guards, tracking."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import FAST, ROOT, compose_cfg, records, run_cli_preloaded, save_diverged_model

from distill_sweep.cli.run_job import run_job
from distill_sweep.errors import ConfigError
from distill_sweep.job.prepare import prepare
from distill_sweep.training.checkpoint import load_checkpoint
from distill_sweep.training.checkpoint_files import CHECKPOINT
from distill_sweep.training.loop import NonFiniteLossError

RESUMABLE = [*FAST, "objective=att_kl_hid_seq", "epochs=2", "checkpoint.every_steps=2"]


def _comparable(record: dict) -> list:
    return [(e["stage"], e["epoch"], e["step"], e["train_loss"], e["dev"]) for e in record["epochs"]]


def _wait_for(predicate, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, "the job ended before the test could interrupt it"
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _popen(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "distill_sweep", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def test_preempted_job_checkpoints_and_resumes_to_the_uninterrupted_result(tmp_path: Path, shared_cache: Path):
    """SIGUSR2 mid-stage (what SLURM sends before a time limit): checkpoint, stop, re-run, same record."""
    reference = run_job(compose_cfg([*RESUMABLE, f"results_dir={tmp_path / 'ref'}", f"cache_dir={shared_cache}"]))

    out = tmp_path / "interrupted"
    args = [*RESUMABLE, f"results_dir={out}", f"cache_dir={shared_cache}"]
    proc = _popen(args, cwd=tmp_path)
    # wait for the first mid-epoch checkpoint of the student (the teacher is already cached), then signal
    _wait_for(lambda: any(out.rglob(CHECKPOINT)), 300, proc)
    os.kill(proc.pid, signal.SIGUSR2)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0, output[-2000:]
    (ckpt,) = out.rglob(CHECKPOINT)
    state = load_checkpoint(ckpt, reference["config_hash"])
    assert state is not None and (state["position"]["stage"], state["position"]["epoch"]) != (2, 1)
    assert json.loads(next(out.rglob("result.json")).read_text())["status"] == "running"

    resumed = run_cli_preloaded(args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    (record,) = records(out)
    assert record["status"] == "completed" and record["resumed"] == 1
    assert _comparable(record) == _comparable(reference)  # bit-identical on CPU
    assert record["best"] == reference["best"]


def test_sweep_killed_with_sigkill_loses_nothing_on_rerun(tmp_path: Path, shared_cache: Path) -> None:
    out = tmp_path / "results"
    grid = [*FAST, "objective=vanilla_kd", "seed=1,2,3", "checkpoint.every_steps=2", f"results_dir={out}",
            f"cache_dir={shared_cache}", "-m"]
    proc = _popen(grid, cwd=tmp_path)

    def first_done() -> bool:
        return any(r["status"] == "completed" for r in records(out))

    _wait_for(first_done, 300, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = {r["config_hash"]: r["finished_at"] for r in records(out) if r["status"] == "completed"}
    assert 1 <= len(done_before) < 3

    rerun = run_cli_preloaded(grid, cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"3 jobs in the grid, {len(done_before)} already completed, {3 - len(done_before)} to run" in rerun.stdout
    recs = records(out)
    assert len(recs) == 3 and all(r["status"] == "completed" for r in recs)
    for digest, finished in done_before.items():  # completed jobs were not run again
        assert next(r for r in recs if r["config_hash"] == digest)["finished_at"] == finished


def test_concurrent_jobs_fine_tune_the_teacher_once(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    procs = [_popen([*FAST, "objective=vanilla_kd", f"seed={seed}", f"results_dir={tmp_path / 'r'}",
                     f"cache_dir={cache}"], cwd=tmp_path) for seed in (1, 2)]
    for proc in procs:
        output, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, output[-2000:]
    sources = sorted(r["teacher"]["source"] for r in records(tmp_path / "r"))
    assert sources == ["cache", "trained"]
    assert len(list((cache / "teachers" / "toy").glob("*/teacher.json"))) == 1


def test_near_chance_teacher_is_refused(tmp_path: Path) -> None:
    overrides = [o for o in FAST if not o.startswith("guards.")]
    cfg = compose_cfg([*overrides, "teacher.finetune.epochs=1", "teacher.finetune.max_steps_per_epoch=1",
                       "teacher.finetune.lr=1e-9", f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"])
    with pytest.raises(ConfigError, match="not clearly better than the majority-class baseline"):
        run_job(cfg)
    # refused on its input (the teacher) before any student training: no failed record is left (run_job._take_back)
    assert records(tmp_path / "r") == []


def test_label_order_mismatch_is_refused(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_cfg([*FAST, "objective=vanilla_kd", f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}"])
    run_job(cfg)  # makes sure the cached teacher exists
    teacher_dir = Path(records(tmp_path / "r")[0]["teacher"]["path"])
    config = json.loads((teacher_dir / "config.json").read_text())
    swapped = tmp_path / "swapped_teacher"
    swapped.mkdir()
    for f in teacher_dir.iterdir():
        (swapped / f.name).write_bytes(f.read_bytes())
    config["id2label"] = {"0": "contradiction", "1": "neutral", "2": "entailment"}
    config["label2id"] = {v: int(k) for k, v in config["id2label"].items()}
    (swapped / "config.json").write_text(json.dumps(config))
    bad = compose_cfg([*FAST, "objective=vanilla_kd", "seed=9", f"teacher.finetuned_path={swapped}",
                       f"results_dir={tmp_path / 'r2'}", f"cache_dir={shared_cache}"])
    with pytest.raises(ConfigError, match="label order mismatch"):
        run_job(bad)


def test_nan_fails_the_job_with_a_clear_record_and_keeps_the_last_good_checkpoint(tmp_path, shared_cache):
    """A teacher whose logits are inf (a diverged model): hid_seq's intermediate stage trains and checkpoints, the
    prediction stage's KD loss is NaN at its first step."""
    diverged = save_diverged_model(tmp_path / "teacher", shared_cache)
    cfg = compose_cfg([*FAST, "objective=hid_seq", f"teacher.finetuned_path={diverged}", "checkpoint.every_steps=1",
                       f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}"])
    with pytest.raises(NonFiniteLossError, match="non-finite"):
        run_job(cfg)
    (record,) = records(tmp_path / "r")
    assert record["status"] == "failed" and record["error"].startswith("NonFiniteLossError: non-finite")
    (ckpt,) = (tmp_path / "r").rglob(CHECKPOINT)
    state = load_checkpoint(ckpt, record["config_hash"])
    assert all(torch.isfinite(v).all() for v in state["student"].values() if v.is_floating_point())


def test_skip_nonfinite_counts_skipped_steps(tmp_path: Path, shared_cache: Path) -> None:
    diverged = save_diverged_model(tmp_path / "teacher", shared_cache)  # inf logits: every KD step is NaN
    cfg = compose_cfg([*FAST, "objective=vanilla_kd", f"teacher.finetuned_path={diverged}", "skip_nonfinite=true",
                       f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}"])
    record = run_job(cfg)
    assert record["status"] == "completed" and record["nonfinite_skipped"] > 0


def test_offline_wandb_run_is_written(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_cfg([*FAST, "objective=vanilla_kd", "logger=wandb", "logger.mode=offline",
                       f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}"])
    job = prepare(cfg)
    os.environ.pop("WANDB_MODE", None)  # conftest disables wandb globally; this test wants the real thing
    try:
        record = run_job(cfg)
    finally:
        os.environ["WANDB_MODE"] = "disabled"
    assert record["wandb"]["id"] and record["wandb"]["mode"] == "offline"
    runs = list(job.out_dir.rglob("offline-run-*"))
    assert runs and list(runs[0].glob("*.wandb"))


def test_progress_lines_in_non_tty_logs(tmp_path: Path, shared_cache: Path) -> None:
    proc = run_cli_preloaded([*FAST, "objective=vanilla_kd", "log_every=2", f"results_dir={tmp_path / 'r'}",
                    f"cache_dir={shared_cache}"], cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    assert "prediction epoch 1 step 2/" in text  # periodic one-line progress instead of a bar
    assert "done toy/vanilla_kd init-1 seed 1: best accuracy" in text  # final one-line summary


def test_killed_teacher_fine_tuning_resumes_to_the_same_teacher(tmp_path: Path) -> None:
    """kill -9 while the teacher fine-tunes: the next run continues from its epoch checkpoint, same teacher."""
    # 4 epochs of 8 steps: the kill lands after the first epoch's checkpoint, with three epochs still to go
    slow_teacher = [*FAST, "objective=vanilla_kd", "teacher.finetune.epochs=4", "epochs=1", "max_steps_per_epoch=1"]
    reference = run_job(compose_cfg([*slow_teacher, f"results_dir={tmp_path / 'ref'}",
                                     f"cache_dir={tmp_path / 'ref_cache'}"]))
    cache = tmp_path / "cache"
    args = [*slow_teacher, f"results_dir={tmp_path / 'r'}", f"cache_dir={cache}"]
    proc = _popen(args, cwd=tmp_path)
    _wait_for(lambda: any(cache.glob("teachers/toy/*.partial/checkpoint.pt")), 300, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    (partial,) = cache.glob("teachers/toy/*.partial")
    assert not list(cache.glob("teachers/toy/*/teacher.json"))  # interrupted before it finished

    rerun = run_cli_preloaded(args, cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "teacher resuming from" in rerun.stdout + rerun.stderr
    (record,) = records(tmp_path / "r")
    assert record["teacher"]["source"] == "trained" and record["teacher"]["dev"] == reference["teacher"]["dev"]
    assert not partial.exists() and not list(cache.rglob(CHECKPOINT))


def test_bf16_on_a_cpu_that_emulates_it_is_said_once_with_the_factor() -> None:
    from distill_sweep.training.loop import BF16_SLOW, bf16_cpu_slowdown, bf16_cpu_warning

    assert bf16_cpu_warning(BF16_SLOW - 0.1) is None  # native bf16 (or close): nothing to say
    line = bf16_cpu_warning(6.04)
    assert line is not None and "6.0x slower than fp32" in line and "precision=fp32" in line and "\n" not in line
    # the measurement is a ratio of two timings of the same matmul: positive and finite on any CPU
    assert 0 < bf16_cpu_slowdown(size=64, repeats=3) < 1000
