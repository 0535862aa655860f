"""student=bilstm (Tang et al. 2019): the tests that run a job, a command or processes (its fast tests:
tests/unit/students/test_bilstm.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from helpers import FAST, compose_cfg, run_cli_preloaded
from omegaconf import OmegaConf

from distill_sweep.training.checkpoint_files import CHECKPOINT
from distill_sweep.training.loop import predict

pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------------------------------- jobs
def test_toy_job_end_to_end_and_its_checkpointed_student(tmp_path: Path, shared_cache: Path) -> None:
    from distill_sweep.cli.run_job import new_record, run_job
    from distill_sweep.job.prepare import prepare
    from distill_sweep.procedures.common import build_student
    from distill_sweep.training.context import RunContext

    overrides = [*FAST, "student=bilstm", "objective=logit_mse", f"results_dir={tmp_path / 'r'}",
                 f"cache_dir={shared_cache}", "checkpoint.keep=true"]
    record = run_job(compose_cfg(overrides))
    assert record["status"] == "completed" and record["student"]["name"] == "bilstm"
    assert record["config"]["objective"]["kd_loss"] == "mse" and record["objective"] == "logit_mse"
    assert [e["stage"] for e in record["epochs"]] == ["prediction"]
    assert record["student_vocab"]["size"] > 2 and record["student"]["num_heads"] == 0
    assert math.isfinite(record["epochs"][0]["train_loss"])
    # the kept checkpoint's student, loaded into a fresh one, scores what the record says
    cfg = compose_cfg(overrides)
    job = prepare(cfg)
    ckpt = torch.load(job.out_dir / CHECKPOINT, map_location="cpu", weights_only=False)
    ctx = RunContext.open(job, new_record(job, OmegaConf.to_container(cfg, resolve=True)))
    student = build_student(ctx, None)
    student.load_state_dict(ckpt["student"])
    logits, labels = predict(student, ctx.dev_loaders["validation"], ctx.device, ctx.precision)
    accuracy = float((logits.argmax(-1) == labels).mean())
    assert accuracy == pytest.approx(record["final"]["dev"]["accuracy"], abs=1e-9)
    # the no-KD baseline with this student (procedure=finetune) runs too, on the same shared vocabulary
    base = run_job(compose_cfg([*overrides[:-1], "procedure=finetune"]))
    assert base["status"] == "completed" and base["student_vocab"] == record["student_vocab"]
    # a word-piece student's KD job reads the teacher-output store the BiLSTM job used: the word ids are not the
    # teacher's input, so they do not key the store
    truncated = run_job(compose_cfg([*FAST, "objective=vanilla_kd", f"results_dir={tmp_path / 'r'}",
                                     f"cache_dir={shared_cache}"]))
    stored, again = record["teacher_outputs"], truncated["teacher_outputs"]
    assert stored["mode"] == again["mode"] == "store"
    assert (again["key"], again["path"], again["built"]) == (stored["key"], stored["path"], False)


def test_intermediate_objective_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = run_cli_preloaded([*FAST, "student=bilstm", "objective=att_kl", f"results_dir={tmp_path / 'r'}",
                    f"cache_dir={tmp_path / 'c'}"], cwd=tmp_path, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert "objective=att_kl" in lines[0] and "student=bilstm" in lines[0]
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()
