"""PKD (Sun et al. 2019) and TinyBERT's task-specific distillation (Jiao et al. 2020): the tests that run a job, a
command or processes (its fast tests: tests/unit/objectives/test_pkd_tinybert.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import PKD_SHORT as SHORT
from helpers import compose_cfg, save_toy_student

from distill_sweep.cli.run_job import run_job


# ------------------------------------------------------------------------------------------ the systems run
def test_pkd_job_runs_one_combined_stage(tmp_path: Path, shared_cache: Path) -> None:
    record = run_job(compose_cfg([*SHORT, "objective=pkd", "map=last", "init=bottom", f"results_dir={tmp_path}",
                                  f"cache_dir={shared_cache}"]))
    assert record["status"] == "completed" and record["objective"] == "pkd"
    assert record["init"]["layers"] == [1, 2, 3]  # the bottom layers
    assert record["student"]["layer_map"] == [[1, 4], [2, 5], [3, 6]]  # PKD-Last uses the first two pairs
    (epoch,) = record["epochs"]
    assert epoch["stage"] == "combined" and {"loss_kd", "loss_pkd_cls"} <= set(epoch)
    assert 0 < epoch["loss_pkd_cls"] <= 4 / 64  # normalised: (2 - 2 cos) / width per pair, at most 4 / 64
    assert record["config"]["objective"]["terms"]["pkd_cls"] == {"weight": 500.0, "normalize": True}


def test_tinybert_job_from_a_general_student_constant_stage_one_projection(tmp_path: Path, shared_cache: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from distill_sweep.training.stages import StageDriver

    seen: list[list[tuple[str, str]]] = []  # per driver run: the teacher's fine-tuning runs one too
    original = StageDriver.run

    def run(self: StageDriver, stages: list) -> None:
        seen.append([(s.name, s.schedule) for s in stages])
        original(self, stages)

    monkeypatch.setattr(StageDriver, "run", run)
    # A stand-in for a general TinyBERT: any saved model of the toy vocabulary (student=pretrained).
    general = save_toy_student(tmp_path / "general_student", shared_cache, layers=3, ffn=128)
    record = run_job(compose_cfg([*SHORT, "objective=tinybert", "student=pretrained",
                                  f"student.name_or_path={general}", "map=uniform", "checkpoint.keep=true",
                                  f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}"]))
    assert record["status"] == "completed" and record["student"]["name"] == "pretrained"
    assert seen[-1] == [("intermediate", "constant"), ("prediction", "linear")]
    assert [e["stage"] for e in record["epochs"]] == ["intermediate", "prediction"]
    assert record["student"]["layer_map"] == [[1, 2], [2, 4], [3, 6]]  # uniform: i * 6 / 3
    assert record["config"]["objective"]["schedules"] == {"intermediate": "constant"}
    state = torch.load(next((tmp_path / "r").rglob("checkpoint.pt")), weights_only=True)
    projections = [k for k in state["objective"] if "proj" in k]
    assert projections == ["terms.hid_seq.proj.maps.0.weight"]  # one W_h for the embeddings and all 3 layers
    assert tuple(state["objective"][projections[0]].shape) == (64, 32)
