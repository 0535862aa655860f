"""PEA-KD: the tests that run a job, a command or processes (its fast tests: tests/unit/procedures/test_peakd.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import PEAKD_SHORT as SHORT
from helpers import compose_cfg, run_cli_preloaded

from distill_sweep.cli.run_job import run_job
from distill_sweep.procedures.ptp import (
    PTP_CLASSES,
)
from distill_sweep.training.checkpoint_files import CHECKPOINT
from distill_sweep.training.stages import StageDriver


def job_cfg(tmp_path: Path, cache: Path, *overrides: str):
    return compose_cfg([*SHORT, *overrides, f"results_dir={tmp_path / 'r'}", f"cache_dir={cache}"])


def test_odd_sps_split_is_one_line_before_any_work(tmp_path: Path) -> None:
    proc = run_cli_preloaded([*SHORT, "student=sps2", "student.shared_layers=4", f"results_dir={tmp_path / 'r'}",
                    f"cache_dir={tmp_path / 'c'}"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["distill_sweep: error: student.shared_layers=4: must be "
                                                "1..student.num_layers=3 (the top s of the student's layers run "
                                                "a second time)"]
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_ptp_then_kd_on_sps2_resumes_mid_ptp_to_the_uninterrupted_record(tmp_path: Path, shared_cache: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """PTP (4 labels from the teacher) -> PKD's combined stage, on an SPS-2 student: scored stages only
    after PTP; interrupted mid-PTP, the re-run resumes (student, PTP head) to the same record."""
    args = ["procedure=ptp", "student=sps2", "objective=pkd", "checkpoint.every_steps=2", "checkpoint.keep=true"]
    reference = run_job(job_cfg(tmp_path / "ref", shared_cache, *args))
    assert [e["stage"] for e in reference["epochs"]] == ["ptp", "combined"]
    assert reference["best"]["stage"] == "combined"
    counts = reference["ptp"]["labels"]
    assert list(counts) == list(PTP_CLASSES) and sum(counts.values()) == reference["data"]["train_size"]
    assert reference["ptp"]["thresholds"] == {"correct": 0.9, "wrong": 0.65}
    assert reference["student"]["num_layers"] == 6 and reference["student"]["settings"]["swap_qk"] is True
    (ckpt,) = (tmp_path / "ref").rglob(CHECKPOINT)
    state = torch.load(ckpt, weights_only=True)
    assert state["ptp_head"]["weight"].shape == (4, 64)
    student = state["student"]
    assert (student["bert.encoder.layer.3.attention.self.query.weight"].data_ptr()
            == student["bert.encoder.layer.0.attention.self.key.weight"].data_ptr())

    original = StageDriver._on_step
    stopped = []

    def stop_mid_ptp(self, stage, n_steps, optimizer, scheduler, progress, loss):
        original(self, stage, n_steps, optimizer, scheduler, progress, loss)  # checkpoints every 2 steps
        if stage.name == "ptp" and progress.steps == 3 and not stopped:
            stopped.append(progress.steps)
            raise RuntimeError("stopped mid-PTP")

    monkeypatch.setattr(StageDriver, "_on_step", stop_mid_ptp)
    cfg = job_cfg(tmp_path / "cut", shared_cache, *args)
    with pytest.raises(RuntimeError, match="stopped mid-PTP"):
        run_job(cfg)
    resumed = run_job(cfg)
    assert stopped == [3] and resumed["resumed"] == 1
    comparable = [(e["stage"], e["step"], e["train_loss"], e["dev"]) for e in resumed["epochs"]]
    assert comparable == [(e["stage"], e["step"], e["train_loss"], e["dev"]) for e in reference["epochs"]]
    assert resumed["ptp"] == reference["ptp"]


def test_sps_students_with_an_attention_term_run_on_the_toy_task(tmp_path: Path, shared_cache: Path) -> None:
    """student=sps / sps2 by name; att_kl reads q/k/v at the shared positions (captured per application)."""
    for name in ("sps", "sps2"):
        record = run_job(job_cfg(tmp_path, shared_cache, f"student={name}", "objective=att_kl"))
        student = record["student"]
        assert record["status"] == "completed" and student["num_layers"] == 6
        assert student["settings"] == {"name": "sps", "num_layers": 3, "shared_layers": 3, "swap_qk": name == "sps2"}
        assert student["layer_map"] == [[i, i] for i in range(1, 7)]  # map=skip over 6 positions of a 6-layer teacher
        assert record["init"]["layers"] == [1, 2, 3, 4, 5, 6]  # one per position; layers 1..3 are copied
        assert record["epochs"][0]["loss_att_kl"] > 0
