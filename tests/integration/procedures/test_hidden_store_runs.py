"""procedure.teacher_logits=hidden in a causal_lm job (its fast tests: tests/unit/teachers/test_hidden_store.py): a job
reading the teacher's stored hidden states trains as the live teacher's job does (every loss and dev metric within
1e-5; under bf16 within bf16's precision), beside a top-k store of the same teacher in one cache, and a pack of
hidden members reads each batch once."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import DECODER_PACK_BASE, compose_cfg
from helpers import LOGITS_FAST as FAST
from omegaconf import OmegaConf

from distill_sweep.cli.run_job import run_job, run_pack
from distill_sweep.job.identity import identify
from distill_sweep.sweep.packs import write_pack_file
from distill_sweep.teachers.hidden_store import READS
from distill_sweep.teachers.output_plan import store_request


def _numbers(record: dict) -> list[float]:
    """Every loss and dev metric of the record's epochs, in order."""
    out: list[float] = []
    for epoch in record["epochs"]:
        out += [epoch["train_loss"], *(v for k, v in sorted(epoch.items()) if k.startswith("loss_")),
                *(v for _, v in sorted(epoch["dev"].items()))]
    return out


def test_a_hidden_store_job_equals_the_live_teachers_beside_a_top_k_store(tmp_path: Path, shared_cache: Path):
    where = [f"results_dir={tmp_path}/r", f"cache_dir={shared_cache}", "objective=gjsd", "procedure.ce_weight=0.5"]
    live = run_job(compose_cfg([*FAST, *where, "procedure.teacher_logits=full"]))
    hidden = run_job(compose_cfg([*FAST, *where, "procedure.teacher_logits=hidden"]))
    top = run_job(compose_cfg([*FAST, *where, "procedure.teacher_top_k=4"]))
    assert live["status"] == hidden["status"] == top["status"] == "completed"
    assert hidden["teacher"]["dev"] == live["teacher"]["dev"]
    assert len(_numbers(hidden)) == len(_numbers(live)) >= 6
    assert _numbers(hidden) == pytest.approx(_numbers(live), abs=1e-5, rel=1e-5)
    assert _numbers(top) != pytest.approx(_numbers(live), abs=1e-5, rel=1e-5)  # a biased estimator: the test sees it
    info = hidden["teacher_outputs"]
    assert info["mode"] == "store" and info["teacher_logits"] == info["store_mode"] == "hidden"
    states = np.load(Path(info["path"]) / "hidden.npy", mmap_mode="r")
    n, width, h = states.shape
    assert info["bytes_per_token"] == 4 * h and states.dtype == np.float32  # fp32 run: 4H bytes a position
    # per trained token: the file over the positions trained on, which the top-k store of the same rows divides by
    # too: each store's bytes per trained token over its bytes per stored position is the same (stored / trained)
    sparse = top["teacher_outputs"]
    assert sparse["bytes_per_token"] == 4 * 4  # float16 + uint16, k = 4
    assert info["bytes_per_trained_token"] / info["bytes_per_token"] == pytest.approx(
        sparse["bytes_per_trained_token"] / sparse["bytes_per_token"], rel=1e-2)
    assert info["bytes_per_trained_token"] > info["bytes_per_token"]
    assert Path(top["teacher_outputs"]["path"]).parent == Path(info["path"]).parent  # two stores side by side
    assert live["teacher_outputs"]["mode"] == "live"


def test_a_pack_of_hidden_members_reads_each_batch_once_and_equals_the_live_jobs(tmp_path: Path,
                                                                                  shared_cache: Path) -> None:
    members = [["objective=fkl"], ["objective=rkl", "procedure.ce_weight=0.5"]]
    common = [*DECODER_PACK_BASE, f"cache_dir={shared_cache}"]
    for m in members:  # the live teacher's jobs, alone
        run_job(compose_cfg([*common, f"results_dir={tmp_path}/live", *m]))
    live = {r["causal_lm"]["settings"]["ce_weight"]: r for r in _records(tmp_path / "live")}
    cfgs = [compose_cfg([*common, f"results_dir={tmp_path}/packed", "procedure.teacher_logits=hidden", *m])
            for m in members]
    before = dict(READS)
    run_pack(OmegaConf.create({"pack_file": str(write_pack_file(tmp_path / "packs", [identify(c) for c in cfgs]))}))
    packed = {r["causal_lm"]["settings"]["ce_weight"]: r for r in _records(tmp_path / "packed")}
    assert sorted(packed) == sorted(live) == [0.0, 0.5]
    for ce, record in packed.items():
        assert record["status"] == "completed" and record["teacher_outputs"]["store_mode"] == "hidden"
        assert _numbers(record) == pytest.approx(_numbers(live[ce]), abs=1e-5, rel=1e-5)
    path = packed[0.0]["teacher_outputs"]["path"]
    steps = packed[0.0]["causal_lm"]["steps"]
    assert READS[path] - before.get(path, 0) == steps  # one read per batch for both members


def _records(results: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in results.rglob("result.json")]


def test_the_sweepers_store_request_names_the_hidden_store(tmp_path: Path) -> None:
    ident = identify(compose_cfg([*FAST, f"results_dir={tmp_path}", "objective=fkl", "procedure.teacher_logits=hidden"]))
    request = store_request(ident)
    assert request is not None and request.tag == "hidden"


def test_a_bf16_hidden_store_job_equals_the_live_bf16_job_to_bf16s_precision(tmp_path: Path,
                                                                             shared_cache: Path) -> None:
    """Under precision=bf16 the store keeps the states in bf16 (2H bytes a position) that the live teacher's forward
    makes under the same autocast, and the head reads them in the same chunks: every loss and dev metric within about
    two bf16 roundings (its epsilon is 2^-8 = 0.0039, relative) of the live job's (on a CPU they came out equal bit
    for bit: the same ops in the same order; the tolerance is for kernels that reorder a sum). Two steps."""
    where = [f"results_dir={tmp_path}/r", f"cache_dir={shared_cache}", "objective=gjsd", "procedure.ce_weight=0.5",
             "precision=bf16", "guards.allow_weak_teacher=true", "max_steps_per_epoch=2"]
    live = run_job(compose_cfg([*FAST, *where, "procedure.teacher_logits=full"]))
    hidden = run_job(compose_cfg([*FAST, *where, "procedure.teacher_logits=hidden"]))
    assert live["status"] == hidden["status"] == "completed"
    info = hidden["teacher_outputs"]
    assert info["store_mode"] == "hidden" and info["dtype"] == "bfloat16"
    assert info["bytes_per_token"] == 2 * np.load(Path(info["path"]) / "hidden.npy", mmap_mode="r").shape[-1]
    assert len(_numbers(hidden)) == len(_numbers(live)) >= 6
    assert _numbers(hidden) == pytest.approx(_numbers(live), rel=1e-2, abs=1e-3)
