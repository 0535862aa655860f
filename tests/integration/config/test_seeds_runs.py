"""`seeds: the tests that run a job, a command or processes (its fast tests: tests/unit/config/test_seeds.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from helpers import CAUSAL_BASE as CAUSAL
from helpers import FAST, compose_cfg

from distill_sweep.cli.run_job import run_job
from distill_sweep.training.context import RunContext

# ------------------------------------------------------------------------------- what each source changes
ORIGINAL_DRIVER = RunContext.driver


class Stop(Exception):
    """Ends a job at its first driver: what it would train from has been captured."""


def _start(cache: Path, results: Path, *overrides: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The start of a tiny toy job's training: the student's (and projections') weights, the torch generator's
    state the first step draws its dropout masks from, the first epoch's batches; and the record as written."""
    seen: dict[str, Any] = {}

    def driver(self: RunContext, **kw: Any) -> Any:
        if kw["role"] != "student":  # the teacher's fine-tuning
            return ORIGINAL_DRIVER(self, **kw)
        seen["weights"] = {f"{name}.{k}": v.detach().clone() for name, module in kw["state"].items()
                           for k, v in module.state_dict().items()}
        seen["rng"] = torch.get_rng_state()
        out = ORIGINAL_DRIVER(self, **kw)
        stage = SimpleNamespace(name="prediction", batch_size=32)
        seen["batches"] = [b["input_ids"].clone() for b in out.loader(stage, 1)]
        seen["record"] = self.record.to_dict()
        raise Stop

    monkeypatch.setattr(RunContext, "driver", driver)
    cfg = compose_cfg([*FAST, "objective=hid_cls", f"cache_dir={cache}", f"results_dir={results}", *overrides])
    with pytest.raises(Stop):
        run_job(cfg)
    return seen


def _masks(rng: torch.Tensor) -> torch.Tensor:
    """The dropout masks of a fixed batch drawn from the generator state `rng` (what the first step draws)."""
    before = torch.get_rng_state()
    torch.set_rng_state(rng)
    masks = torch.nn.functional.dropout(torch.ones(8, 64), p=0.1, training=True)
    torch.set_rng_state(before)
    return masks


def _same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _same_batches(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b))


def test_each_sub_seed_changes_its_own_source_and_leaves_the_others_bit_identical(
        tmp_path: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch):
    def start(*overrides: str) -> dict[str, Any]:
        return _start(shared_cache, tmp_path / "r", *overrides, monkeypatch=monkeypatch)

    base = start("seed=1")
    order = start("seed=1", "seeds.data_order=2")  # the example: the master seed, another batch order
    assert _same_weights(base["weights"], order["weights"])
    assert torch.equal(_masks(base["rng"]), _masks(order["rng"]))
    assert not _same_batches(base["batches"], order["batches"])
    assert order["record"]["seeds"] == {"init": 1, "data_order": 2, "dropout": 1, "sampling": 1, "own": ["data_order"]}
    assert base["record"]["seeds"]["own"] == []

    master = start("seed=2", "seeds.data_order=1")  # seed=1,2,3 seeds.data_order=1: init and dropout vary only
    assert _same_batches(base["batches"], master["batches"])
    assert not _same_weights(base["weights"], master["weights"])
    assert not torch.equal(_masks(base["rng"]), _masks(master["rng"]))

    init_a, init_b = start("seeds.init=5"), start("seeds.init=6")
    assert not _same_weights(init_a["weights"], init_b["weights"])
    assert torch.equal(_masks(init_a["rng"]), _masks(init_b["rng"]))
    assert _same_batches(init_a["batches"], init_b["batches"])

    dropout = start("seeds.init=5", "seeds.dropout=9")
    assert _same_weights(init_a["weights"], dropout["weights"])
    assert not torch.equal(_masks(init_a["rng"]), _masks(dropout["rng"]))
    assert _same_batches(init_a["batches"], dropout["batches"])


def test_the_sampling_seed_drives_the_on_policy_stream_and_nothing_else(
        tmp_path: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch):
    from distill_sweep.procedures.causal_lm import CausalContext

    original = CausalContext.driver

    def start(*overrides: str) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        def driver(self: CausalContext, **kw: Any) -> Any:
            if kw["role"] != "student":
                return original(self, **kw)
            seen["weights"] = {f"{name}.{k}": v.detach().clone() for name, module in kw["state"].items()
                               for k, v in module.state_dict().items()}
            seen["rng"] = torch.get_rng_state()
            out = original(self, **kw)
            stage = SimpleNamespace(name="distill", batch_size=self.job.procedure_settings.batch_size)
            seen["batches"] = [b["input_ids"].clone() for b in out.loader(stage, 1)]
            seen["policy_seed"], seen["record"] = self.policy.seed, self.record.to_dict()
            raise Stop

        monkeypatch.setattr(CausalContext, "driver", driver)
        cfg = compose_cfg([*CAUSAL, "procedure.data=instructions", "procedure.teacher_steps=60", "procedure.epochs=1",
                           "max_steps_per_epoch=4", "objective=fkl", "procedure.on_policy=0.5",
                           f"cache_dir={shared_cache}", f"results_dir={tmp_path}", *overrides])
        with pytest.raises(Stop):
            run_job(cfg)
        return seen

    a, b = start("seeds.sampling=5"), start("seeds.sampling=6")
    assert (a["policy_seed"], b["policy_seed"]) == (5, 6)
    assert a["record"]["seeds"]["sampling"] == 5 and a["record"]["seeds"]["own"] == ["sampling"]
    assert _same_weights(a["weights"], b["weights"])
    assert torch.equal(_masks(a["rng"]), _masks(b["rng"]))
    assert a["batches"] and _same_batches(a["batches"], b["batches"])
