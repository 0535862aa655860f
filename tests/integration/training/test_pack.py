"""A pack's members trained in lockstep in one process are exactly the jobs they would be alone: the same
per-epoch losses, dev metrics and final weights, bit for bit, with one teacher forward per batch between them;
a member that fails fails alone; a signalled pack checkpoints every member, and a re-run resumes each."""

from __future__ import annotations

import json
import logging
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf

from distill_sweep.cli.run_job import run_job, run_pack
from distill_sweep.errors import NonFiniteLossError
from distill_sweep.job.identity import identify
from distill_sweep.sweep.packs import PackFailed, write_pack_file
from distill_sweep.training.checkpoint_files import CHECKPOINT
from distill_sweep.training.pack import Lockstep
from tests.helpers import FAST, compose_cfg, save_diverged_model

# different objectives, inits and stages: hid_seq reads the hidden states of layers 1-3 (depth 3 of the tiny
# teacher's 6), att_kl the q/k/v of layers 1, 4, 6 (all 6), vanilla_kd only the stored logits
MEMBERS = [["objective=hid_seq", "init=3"], ["objective=att_kl", "init=2"], ["objective=vanilla_kd", "init=1"]]
STEPS = 256 // 32  # steps per epoch: FAST's 256 training examples in batches of 32


def _cfgs(results: Path, cache: Path, extra: dict[int, list[str]] | None = None) -> list[Any]:
    common = [*FAST, "epochs=2", "checkpoint.keep=true", "pack=auto", f"cache_dir={cache}", f"results_dir={results}"]
    return [compose_cfg([*common, *member, *(extra or {}).get(i, [])]) for i, member in enumerate(MEMBERS)]


def _pack(cfgs: list[Any], where: Path) -> Any:
    return OmegaConf.create({"pack_file": str(write_pack_file(where, [identify(cfg) for cfg in cfgs]))})


def _records(results: Path) -> dict[str, dict[str, Any]]:
    return {r["objective"]: r for r in (json.loads(p.read_text()) for p in results.rglob("result.json"))}


def _final_student(record: dict[str, Any]) -> dict[str, torch.Tensor]:
    results = Path(record["config"]["results_dir"])
    (path,) = [p for p in results.rglob(CHECKPOINT) if record["config_hash"][:10] in str(p)]
    return torch.load(path, map_location="cpu", weights_only=True)["student"]


def _assert_same_job(member: dict[str, Any], solo: dict[str, Any]) -> None:
    """The same per-epoch losses and dev metrics (exactly) and the same final weights (torch.equal)."""
    assert member["status"] == "completed" and member["config_hash"] == solo["config_hash"]
    assert len(member["epochs"]) == len(solo["epochs"]) == (2 if solo["objective"] == "vanilla_kd" else 4)
    for a, b in zip(member["epochs"], solo["epochs"], strict=True):
        losses = [k for k in b if k.startswith("loss") or k == "train_loss"]
        assert [a[k] for k in losses] == [b[k] for k in losses], (solo["objective"], a, b)
        assert a["dev"] == b["dev"]
    mine, theirs = _final_student(member), _final_student(solo)
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine), solo["objective"]


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> dict[str, dict[str, Any]]:
    """Each member's job run on its own, in this process."""
    records = [run_job(cfg) for cfg in _cfgs(tmp_path_factory.mktemp("alone"), shared_cache)]
    return {r["objective"]: r for r in records}


def test_each_member_of_a_pack_is_bit_identical_to_its_job_alone(tmp_path: Path, shared_cache: Path, alone, caplog
                                                                  ) -> None:
    with caplog.at_level(logging.INFO, logger="distill_sweep"):
        returns = run_pack(_pack(_cfgs(tmp_path / "packed", shared_cache), tmp_path / "packs"))
    assert returns == [alone[m[0].split("=")[1]]["best"]["dev"]["accuracy"] for m in MEMBERS]
    packed = _records(tmp_path / "packed")
    for objective, solo in alone.items():
        _assert_same_job(packed[objective], solo)
    # one forward per batch of the intermediate stage for hid_seq and att_kl together (alone: one each), plus
    # one at the very first batch, whose forward was run for hid_seq before att_kl had asked for its q/k/v
    forwards = int(re.search(r"the pack's teacher: (\d+) forwards", caplog.text).group(1))
    assert forwards == 2 * STEPS + 1


def test_a_member_with_a_non_finite_loss_fails_alone(tmp_path: Path, shared_cache: Path, alone) -> None:
    # hid_seq's student has diverged (an inf in its embeddings' LayerNorm): its loss is NaN at its first step
    diverged = save_diverged_model(tmp_path / "diverged", shared_cache, "bert.embeddings.LayerNorm.bias")
    cfgs = _cfgs(tmp_path / "packed", shared_cache,
                 {0: ["init=1", "student=pretrained", f"student.name_or_path={diverged}"]})
    with pytest.raises(PackFailed) as failed:
        run_pack(_pack(cfgs, tmp_path / "packs"))
    (error,) = failed.value.errors
    assert isinstance(error, NonFiniteLossError) and failed.value.returns[0] is error
    packed = _records(tmp_path / "packed")
    assert packed["hid_seq"]["status"] == "failed"
    assert packed["hid_seq"]["error"].startswith("NonFiniteLossError: non-finite")
    for objective in ("att_kl", "vanilla_kd"):  # went on, as they would have alone
        _assert_same_job(packed[objective], alone[objective])


def test_a_signalled_pack_checkpoints_every_member_and_a_rerun_resumes_each(tmp_path: Path, shared_cache: Path,
                                                                            alone, monkeypatch) -> None:
    turns = [0]
    turn = Lockstep.turn

    def signalled_turn(self: Lockstep, i: int) -> bool:
        turns[0] += 1
        if turns[0] == 4:  # SLURM's preemption signal, in the second step
            signal.raise_signal(signal.SIGUSR2)
            time.sleep(1.0)  # the main thread notes it meanwhile (the members wait for this turn)
        return turn(self, i)

    monkeypatch.setattr(Lockstep, "turn", signalled_turn)
    pack = _pack(_cfgs(tmp_path / "packed", shared_cache), tmp_path / "packs")
    with pytest.raises(SystemExit, match="stopped by signal"):
        run_pack(pack)
    stopped = _records(tmp_path / "packed")
    assert stopped.keys() == alone.keys()
    for objective, record in stopped.items():  # every member stopped in its first epoch, checkpointed there
        assert record["status"] == "running" and record["requeued"] == 1, objective
        (ckpt,) = [p for p in (tmp_path / "packed").rglob(CHECKPOINT) if record["config_hash"][:10] in str(p)]
        position = torch.load(ckpt, map_location="cpu", weights_only=True)["position"]
        assert position["stage"] == 0 and position["epoch"] == 1 and 0 < position["step"] < STEPS
    monkeypatch.setattr(Lockstep, "turn", turn)
    run_pack(pack)  # the re-run: each member from its own checkpoint
    packed = _records(tmp_path / "packed")
    for objective, solo in alone.items():
        assert packed[objective]["resumed"] == 1
        _assert_same_job(packed[objective], solo)


def test_each_member_of_a_pack_logs_its_own_wandb_run(tmp_path: Path, shared_cache: Path, monkeypatch,
                                                      recwarn: pytest.WarningsRecorder) -> None:
    monkeypatch.delenv("WANDB_MODE", raising=False)  # conftest disables wandb; this test wants the real thing
    wandb = ["logger=wandb", "logger.mode=offline", "epochs=1"]
    cfgs = _cfgs(tmp_path / "packed", shared_cache, {i: wandb for i in range(len(MEMBERS))})
    run_pack(_pack(cfgs, tmp_path / "packs"))
    assert not [w for w in recwarn if "wandb" in str(w.message)]  # no run finished under another's feet
    packed = _records(tmp_path / "packed")
    ids = {r["wandb"]["id"] for r in packed.values()}
    assert None not in ids and len(ids) == len(MEMBERS)
    for objective, record in packed.items():
        (job_dir,) = [p.parent for p in (tmp_path / "packed").rglob("result.json")
                      if record["config_hash"][:10] in str(p)]
        (run_file,) = job_dir.rglob(f"run-{record['wandb']['id']}.wandb")  # its own offline run, in its directory
        data = run_file.read_bytes()
        assert f"-{objective}-".encode() in data  # the run's name: task-objective-init-seed
        assert b"dev/accuracy" in data  # and its metrics
