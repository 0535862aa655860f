"""causal_lm jobs on the data-source axis, run from the command line: an on-policy job killed with SIGKILL resumes to
the uninterrupted job's losses, metrics and samples exactly; on_policy > 0 with no step chosen trains as the fixed
data does; seq_kd's stored generations are built once, reused, read by a top-k store, and rebuilt when damaged."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import compose_cfg, records

from distill_sweep.cli.run_job import run_job
from distill_sweep.procedures.causal_lm_settings import CausalLMSettings
from distill_sweep.training.checkpoint import load_checkpoint
from distill_sweep.training.checkpoint_files import CHECKPOINT

BASE = ["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama", "procedure.teacher_steps=60",
        "student.num_layers=2", "procedure.data=instructions", "objective=fkl"]
# 2 epochs of 12 steps, about half of them on the student's samples, a checkpoint every 2 steps
ON_POLICY = [*BASE, "procedure.on_policy=0.5", "procedure.epochs=2", "max_steps_per_epoch=12",
             "checkpoint.every_steps=2", "procedure.generation.max_new_tokens=6"]


def comparable(record: dict) -> list:
    return [(e["stage"], e["epoch"], e["step"], e["train_loss"], e.get("loss_fkl"), e["dev"]) for e in record["epochs"]]


def test_a_killed_on_policy_job_resumes_to_the_uninterrupted_jobs_losses_metrics_and_samples(tmp_path: Path,
                                                                                             shared_cache: Path):
    reference = run_job(compose_cfg([*ON_POLICY, f"results_dir={tmp_path / 'ref'}", f"cache_dir={shared_cache}"]))
    steps = reference["causal_lm"]["data_source"]["on_policy_steps"]
    assert all(0 < n < 12 for n in steps), steps  # each epoch mixes sampled and fixed batches

    out = tmp_path / "killed"
    args = [*ON_POLICY, f"results_dir={out}", f"cache_dir={shared_cache}"]
    proc = subprocess.Popen([sys.executable, "-m", "distill_sweep", *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while not any(out.rglob(CHECKPOINT)):  # the student's first mid-epoch checkpoint (the teacher is cached)
        assert proc.poll() is None, "the job ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    (ckpt,) = out.rglob(CHECKPOINT)
    state = load_checkpoint(ckpt, reference["config_hash"])
    assert state is not None and state["position"]["stage"] == 0  # killed inside the distill stage
    assert json.loads(next(out.rglob("result.json")).read_text())["status"] == "running"

    run_job(compose_cfg(args))  # resumes from the checkpoint the killed process left
    (record,) = records(out)
    assert record["status"] == "completed" and record["resumed"] == 1
    assert comparable(record) == comparable(reference)  # bit-identical on CPU
    assert record["best"] == reference["best"]
    assert record["causal_lm"]["data_source"] == reference["causal_lm"]["data_source"]
    samples = record["causal_lm"]["data_source"]["samples"]
    assert [s["epoch"] for s in samples] == [1, 1, 1, 2, 2, 2] and all(s["prompt"] and s["tokens"] for s in samples)


def test_on_policy_with_no_step_chosen_trains_as_the_fixed_data(tmp_path: Path, shared_cache: Path):
    fraction = next(f for f in (0.01, 0.02, 0.03, 0.05)
                    if CausalLMSettings(name="causal_lm", on_policy=f).on_policy_steps(1, 1, 4) == [0])
    fixed_args = [*BASE, "procedure.epochs=1", "max_steps_per_epoch=4", f"cache_dir={shared_cache}"]
    fixed = run_job(compose_cfg([*fixed_args, f"results_dir={tmp_path / 'fixed'}"]))
    rare = run_job(compose_cfg([*fixed_args, f"procedure.on_policy={fraction}", f"results_dir={tmp_path / 'rare'}"]))
    assert "data_source" not in fixed["causal_lm"]
    assert rare["causal_lm"]["data_source"]["on_policy_steps"] == [0]
    assert rare["config_hash"] != fixed["config_hash"]
    assert comparable(rare) == comparable(fixed)  # nothing drawn, nothing changed: the same numbers to the bit


def test_seq_kd_generations_built_once_reused_read_by_a_topk_store_and_rebuilt_when_damaged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture):
    common = [*BASE, "procedure.seq_kd=true", "procedure.epochs=1", "max_steps_per_epoch=3",
              "procedure.generation.max_new_tokens=4", f"cache_dir={tmp_path / 'c'}", f"results_dir={tmp_path / 'r'}"]
    first = run_job(compose_cfg([*common, "seed=1"]))
    topk = run_job(compose_cfg([*common, "seed=2", "procedure.teacher_top_k=4"]))
    made, reused = first["causal_lm"]["teacher"]["seq_kd"], topk["causal_lm"]["teacher"]["seq_kd"]
    assert first["status"] == topk["status"] == "completed"
    assert made["built"] and not reused["built"] and made["key"] == reused["key"]
    assert made["rows"] == 536 and made["max_new_tokens"] == 4
    # the second job's top-k store holds the teacher's entries over the generated sequences
    assert topk["teacher_outputs"]["mode"] == "store" and topk["teacher_outputs"]["built"]
    assert topk["causal_lm"]["data"]["responses"] == "teacher_greedy"

    ids = Path(made["path"]) / "ids.npy"
    ids.write_bytes(ids.read_bytes()[: len(ids.read_bytes()) // 2])  # truncated
    with caplog.at_level(logging.WARNING, logger="distill_sweep"):
        again = run_job(compose_cfg([*common, "seed=3"]))
    assert again["status"] == "completed"
    assert "ids.npy is not the file that was written (checksum differs)" in caplog.text
    rebuilt = again["causal_lm"]["teacher"]["seq_kd"]
    assert rebuilt["built"] and rebuilt["key"] == made["key"]
