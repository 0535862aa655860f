"""Execution invariants generated over every objective (conf/objective) of both families, with the default dropout: a
job trained alone, the same job as a member of one pack holding every objective, and that pack signalled in its first
epoch and re-run from its members' checkpoints give the same record and final weights, bit for bit. An objective a
family does not take is refused in one line before any work (and named here). The 2-rank case: test_fsdp.py."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import DECODER_PACK_BASE, FAST, compose_cfg
from key_kinds import TIMING
from omegaconf import OmegaConf

from distill_sweep.cli.run_job import run_job, run_pack
from distill_sweep.config.space import group_options
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.sweep.packs import write_pack_file
from distill_sweep.training.checkpoint_files import CHECKPOINT
from distill_sweep.training.pack import Lockstep

FAMILIES = {
    # the tiny teacher's default dropout (0.1) is on: the members draw their masks from their own streams
    "encoder": [*FAST, "max_steps_per_epoch=3", "init=3"],
    "decoder": [*(o for o in DECODER_PACK_BASE if o != "pack=auto"), "procedure.epochs=1"],
}
# The objectives a family refuses (one line, before any work), and why: the other family's losses.
REFUSED = {
    "encoder": {"fkl", "rkl", "gjsd", "uld", "fkl_hid_seq"},
    "decoder": {"vanilla_kd", "att_kl", "att_kl_hid_seq", "att_kl_val_kl", "att_mse", "att_mse_hid_seq", "hid_cls",
                "hid_cls_contrast", "hid_seq", "logit_mse", "pkd", "rel_kl", "tinybert", "val_kl", "distilbert"},
}


# Relation heads that divide the tiny teacher's width (64), as the preset for tiny models sets them.
FIT = {"rel_kl": ["objective.terms.rel_kl.relation_heads=16"]}


def _overrides(family: str, objective: str, results: Path, cache: Path) -> list[str]:
    return [*FAMILIES[family], f"objective={objective}", *FIT.get(objective, []), "checkpoint.keep=true",
            f"results_dir={results}", f"cache_dir={cache}"]


def _objectives(family: str) -> tuple[list[str], set[str]]:
    """The objectives this family's job takes, and those it refuses (job.prepare: the config and the models' configs,
    before any data, model or record)."""
    taken, refused = [], set()
    for objective in group_options("objective"):
        if objective == "base":
            continue
        try:
            prepare(compose_cfg(_overrides(family, objective, Path("/tmp/unused"), Path("/tmp/unused"))))
            taken.append(objective)
        except ConfigError as err:
            assert "\n" not in str(err)
            refused.add(objective)
    return taken, refused


def _numbers(record: dict[str, Any]) -> dict[str, Any]:
    """The record's epochs, best and final results, less their timing."""
    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in TIMING}
        return [clean(v) for v in x] if isinstance(x, list) else x
    return clean({k: record[k] for k in ("epochs", "best", "final")})


def _student(record: dict[str, Any]) -> dict[str, torch.Tensor]:
    results = Path(record["config"]["results_dir"])
    (path,) = [p for p in results.rglob(CHECKPOINT) if record["config_hash"][:10] in str(p)]
    return torch.load(path, map_location="cpu", weights_only=True)["student"]


def _records(results: Path) -> dict[str, dict[str, Any]]:
    return {r["config_hash"]: r for r in (json.loads(p.read_text()) for p in results.rglob("result.json"))}


def _same_job(member: dict[str, Any], solo: dict[str, Any]) -> None:
    assert member["status"] == solo["status"] == "completed", member.get("error")
    assert _numbers(member) == _numbers(solo), solo["objective"]
    mine, theirs = _student(member), _student(solo)
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine), solo["objective"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_objective_alone_packed_and_resumed_gives_one_record(family: str, tmp_path: Path, shared_cache: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    objectives, refused = _objectives(family)
    assert refused == REFUSED[family]  # a new objective is taken by a family, or named here with the reason
    alone = {}
    for objective in objectives:
        record = run_job(compose_cfg(_overrides(family, objective, tmp_path / "alone", shared_cache)))
        alone[record["config_hash"]] = record
    cfgs = [compose_cfg(_overrides(family, o, tmp_path / "packed", shared_cache)) for o in objectives]
    pack = OmegaConf.create({"pack_file": str(write_pack_file(tmp_path / "packs", [identify(c) for c in cfgs]))})

    turns, turn = [0], Lockstep.turn

    def signalled_turn(self: Lockstep, i: int) -> bool:
        turns[0] += 1
        if turns[0] == 2 * len(objectives) + 1:  # SLURM's preemption signal, in the first epoch's second step
            signal.raise_signal(signal.SIGUSR2)
            time.sleep(1.0)  # the main thread notes it meanwhile (the members wait for this turn)
        return turn(self, i)

    monkeypatch.setattr(Lockstep, "turn", signalled_turn)
    with pytest.raises(SystemExit, match="stopped by signal"):
        run_pack(pack)
    assert {r["status"] for r in _records(tmp_path / "packed").values()} == {"running"}
    monkeypatch.setattr(Lockstep, "turn", turn)
    run_pack(pack)  # each member from its own checkpoint
    packed = _records(tmp_path / "packed")
    assert packed.keys() == alone.keys()
    for digest, solo in alone.items():
        assert packed[digest]["resumed"] == 1, solo["objective"]
        _same_job(packed[digest], solo)
