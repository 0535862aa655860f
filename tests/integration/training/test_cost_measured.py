"""A job's measured cost (training/cost.py) changes nothing it trains: the same job with the FLOP count and the CPU
clock turned off gives the same record numbers and final weights, bit for bit (an encoder with dropout on: the count
draws no random number; a decoder). A pack of two members shares its CPU-seconds between them by their FLOPs, each counted as alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import DECODER_PACK_BASE, FAST, compose_cfg
from key_kinds import TIMING
from omegaconf import OmegaConf

from distill_sweep.cli.run_job import run_job, run_pack
from distill_sweep.job.identity import identify
from distill_sweep.sweep.packs import write_pack_file
from distill_sweep.training.checkpoint_files import CHECKPOINT
from distill_sweep.training.stages import StageDriver

BASE = [*FAST, "max_steps_per_epoch=3", "init=3", "checkpoint.keep=true"]


def _cfg(results: Path, cache: Path, objective: str = "att_kl") -> Any:
    return compose_cfg([*BASE, f"objective={objective}", f"results_dir={results}", f"cache_dir={cache}"])


def _numbers(record: dict[str, Any]) -> dict[str, Any]:
    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in TIMING}
        return [clean(v) for v in x] if isinstance(x, list) else x
    return clean({k: record[k] for k in ("epochs", "best", "final")})


def _student(results: Path) -> dict[str, torch.Tensor]:
    (path,) = results.rglob(CHECKPOINT)
    return torch.load(path, map_location="cpu", weights_only=True)["student"]


# a decoder's SiLU-gated MLP rounds its backward differently when FlopCounterMode decomposes it, and its chunked
# loss calls torch.autograd.grad: the counter must run each operation as it is (training/cost.py's _counter)
DECODER = [*(o for o in DECODER_PACK_BASE if o != "pack=auto"), "procedure.epochs=1", "objective=fkl_hid_seq",
           "checkpoint.keep=true"]


def test_a_decoders_measured_cost_changes_no_trained_number(tmp_path: Path, shared_cache: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def cfg(results: Path) -> Any:
        return compose_cfg([*DECODER, f"results_dir={results}", f"cache_dir={shared_cache}"])

    measured = run_job(cfg(tmp_path / "measured"))
    assert measured["cost"]["flops"] > 0
    monkeypatch.setattr(StageDriver, "measure_cost", lambda self: None)
    plain = run_job(cfg(tmp_path / "plain"))
    assert _numbers(plain) == _numbers(measured)
    mine, theirs = _student(tmp_path / "measured"), _student(tmp_path / "plain")
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_measured_cost_changes_no_trained_number(tmp_path: Path, shared_cache: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    measured = run_job(_cfg(tmp_path / "measured", shared_cache))
    cost = measured["cost"]
    # att_kl: an intermediate and a prediction stage, each of epochs=1 x max_steps_per_epoch=3 steps
    assert cost["steps"] == 2 * 3 and cost["cpu_seconds"] > 0 and cost["gpu_seconds"] is None
    per_step = cost["flops_per_step"]
    assert set(per_step) == {"intermediate", "prediction"} and all(f > 0 for f in per_step.values())
    assert cost["flops"] == pytest.approx(3 * per_step["intermediate"] + 3 * per_step["prediction"], rel=1e-12)
    monkeypatch.setattr(StageDriver, "measure_cost", lambda self: None)  # no counter, no clock
    plain = run_job(_cfg(tmp_path / "plain", shared_cache))
    assert "cost" not in plain
    assert plain["config_hash"] == measured["config_hash"]  # (the cost is not hashed)
    assert _numbers(plain) == _numbers(measured)
    mine, theirs = _student(tmp_path / "measured"), _student(tmp_path / "plain")
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_a_packs_cpu_seconds_are_split_by_flops(tmp_path: Path, shared_cache: Path) -> None:
    alone = {}
    for objective in ("vanilla_kd", "att_kl"):
        record = run_job(_cfg(tmp_path / "alone", shared_cache, objective))
        alone[record["config_hash"]] = record["cost"]
    cfgs = [_cfg(tmp_path / "packed", shared_cache, o) for o in ("vanilla_kd", "att_kl")]
    pack_file = write_pack_file(tmp_path / "packs", [identify(c) for c in cfgs])
    run_pack(OmegaConf.create({"pack_file": str(pack_file)}))
    packed = {r["config_hash"]: r["cost"] for r in (json.loads(p.read_text())
                                                    for p in (tmp_path / "packed").rglob("result.json"))}
    assert packed.keys() == alone.keys()
    total = sum(c["cpu_seconds_own"] for c in packed.values())
    flops = {k: c["flops"] for k, c in packed.items()}
    for key, cost in packed.items():
        # each member's FLOPs as alone (the shared teacher forward credited to the member it served)
        assert cost["flops"] == pytest.approx(alone[key]["flops"], rel=1e-9)
        assert cost["share"]["pack_cpu_seconds"] == pytest.approx(total)
        assert cost["cpu_seconds"] == pytest.approx(total * flops[key] / sum(flops.values()), rel=1e-9)
    assert sum(c["cpu_seconds"] for c in packed.values()) == pytest.approx(total)
