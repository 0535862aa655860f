"""The teacher-output store, the truncated teacher and length-grouped batches (teacher work done once per sweep):
the tests that run a job, a command or processes (its fast tests: tests/unit/teachers/test_teacher_outputs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FAST, compose_cfg, records, run_cli_preloaded

from distill_sweep.cli.run_job import run_job


# --------------------------------------------------------------------------------------------- real jobs
def _comparable_epochs(record: dict) -> list[dict]:
    return [{k: v for k, v in e.items() if k.startswith("loss") or k in ("stage", "epoch", "train_loss")}
            for e in record["epochs"]]


# what stage 1 runs of the teacher: att_kl at init 3 maps student layers 1,2,3 to teacher layers 1,2,3, so 3 of
# the 6 layers; hid_cls reads only [CLS] states, which the store holds (embeddings and the skip layers 2,4,6 of
# init 1), so none; vanilla_kd has no stage 1
DEPTH = {"vanilla_kd": None, "att_kl": 3, "hid_cls": 0}


@pytest.mark.parametrize("objective, init", [("vanilla_kd", 1), ("att_kl", 3), ("hid_cls", 1)])
def test_a_job_with_the_store_gives_the_record_it_gives_without(tmp_path: Path, shared_cache: Path, objective: str,
                                                                init: int) -> None:
    common = [*FAST, f"objective={objective}", f"init={init}", "epochs=2", f"cache_dir={shared_cache}"]
    stored = run_job(compose_cfg([*common, f"results_dir={tmp_path / 'store'}"]))
    live = run_job(compose_cfg([*common, "teacher_outputs=live", f"results_dir={tmp_path / 'live'}"]))
    assert stored["teacher_outputs"]["mode"] == "store" and live["teacher_outputs"]["mode"] == "live"
    assert live["teacher_outputs"]["reason"] == "teacher_outputs=live"
    assert stored["teacher_outputs"]["depth"] == DEPTH[objective]
    assert stored["teacher_outputs"]["cls_layers"] == ([0, 2, 4, 6] if objective == "hid_cls" else [])
    assert stored["best"]["dev"] == live["best"]["dev"]
    for a, b in zip(_comparable_epochs(stored), _comparable_epochs(live), strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if key.startswith("loss") or key == "train_loss":
                assert a[key] == pytest.approx(b[key], abs=1e-5), (a, b)
            else:
                assert a[key] == b[key]
    assert all(1.0 <= r <= 1.15 for r in stored["padding"].values()), stored["padding"]


def test_the_store_is_built_once_for_the_jobs_of_a_task(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    built = []
    for objective, seed in (("vanilla_kd", 1), ("att_mse", 2), ("vanilla_kd", 3)):  # one logits store
        cfg = compose_cfg([*FAST, f"objective={objective}", f"seed={seed}", f"results_dir={tmp_path / 'r'}",
                           f"cache_dir={cache}", "teacher.finetune.epochs=1"])
        built.append(run_job(cfg)["teacher_outputs"]["built"])
    assert built == [True, False, False]
    assert len([p for p in (cache / "teacher_outputs" / "toy").iterdir() if p.is_dir()]) == 1


def test_an_objective_without_a_logit_stage_records_why_it_ran_live(tmp_path: Path, shared_cache: Path) -> None:
    cfg = compose_cfg([*FAST, "objective=att_kl", "objective.stages=[intermediate]", "init=3",
                       f"results_dir={tmp_path}", f"cache_dir={shared_cache}"])
    record = run_job(cfg)
    assert record["teacher_outputs"] == {"mode": "live", "depth": 3,
                                         "reason": "no stage of the objective reads the teacher's logits"}


def test_a_sweep_builds_the_store_first_and_the_dry_run_counts_it(tmp_path: Path) -> None:
    grid = [*FAST, "objective=vanilla_kd,att_mse", "init=3", "max_steps_per_epoch=3", "teacher.finetune.epochs=1",
            f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'cache'}", "-m"]
    dry = run_cli_preloaded([*grid, "+dry_run=true"], cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr[-2000:]
    # vanilla_kd: 1 stage of 3 steps x 32; att_mse: intermediate + prediction. With the store only att_mse's
    # intermediate stage runs the teacher (96), plus one build over the 256 rows; without, all 3 stages (288).
    assert "frozen-teacher forwards: 352 sample-passes with the teacher-output store (1 store(s) to build, 256 " \
           "rows), 288 without" in dry.stdout, dry.stdout[-1500:]
    run = run_cli_preloaded(grid, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "building the teacher outputs of 1 task(s) first" in run.stdout
    recs = records(tmp_path / "r")
    assert len(recs) == 2 and all(r["teacher_outputs"]["mode"] == "store" for r in recs)
    assert not any(r["teacher_outputs"]["built"] for r in recs)  # the build job built it
    again = run_cli_preloaded([*grid[:-1], "seed=2", "-m"], cwd=tmp_path)  # the store exists: no build job
    assert again.returncode == 0 and "building the teacher outputs" not in again.stdout
