"""Decoder packs (procedure=causal_lm, pack=auto): the tests that run a job, a command or processes (its fast
tests: tests/unit/procedures/test_decoder_packs.py)."""

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
from helpers import DECODER_PACK_BASE as BASE
from helpers import DECODER_PACK_BATCH as BATCH
from helpers import DECODER_PACK_EPOCHS as EPOCHS
from helpers import DECODER_PACK_LIVE as LIVE
from helpers import DECODER_PACK_SPARSE as SPARSE
from helpers import DECODER_PACK_STEPS as STEPS
from helpers import compose_cfg, run_cli_preloaded
from omegaconf import OmegaConf

from distill_sweep.cli.run_job import run_job, run_pack
from distill_sweep.job.identity import identify
from distill_sweep.procedures import causal_lm
from distill_sweep.sweep.packs import write_pack_file
from distill_sweep.training.checkpoint_files import CHECKPOINT
from distill_sweep.training.pack import Lockstep


def _cfgs(members: list[list[str]], results: Path, cache: Path) -> list[Any]:
    common = [*BASE, "checkpoint.keep=true", f"cache_dir={cache}", f"results_dir={results}"]
    return [compose_cfg([*common, *m]) for m in members]


def _records(results: Path) -> dict[str, dict[str, Any]]:
    return {r["config_hash"]: r for r in (json.loads(p.read_text()) for p in results.rglob("result.json"))}


def _student(record: dict[str, Any]) -> dict[str, torch.Tensor]:
    (path,) = [p for p in Path(record["config"]["results_dir"]).rglob(CHECKPOINT) if record["config_hash"][:10] in str(p)]
    return torch.load(path, map_location="cpu", weights_only=True)["student"]


def _less(record: dict[str, Any], part: str, key: str) -> dict[str, Any]:
    return {**record, part: {k: v for k, v in record[part].items() if k != key}}


def _assert_same_job(member: dict[str, Any], solo: dict[str, Any]) -> None:
    """Every number of the record exactly (per-epoch losses, dev metrics, the on-policy steps and samples, the
    teacher's dev), and the final student weights (torch.equal)."""
    assert member["status"] == solo["status"] == "completed"
    assert member["epochs"] == solo["epochs"] and member["best"] == solo["best"]
    assert member["teacher"] == solo["teacher"]
    mine, theirs = (_less(r["causal_lm"], "teacher", "cache") for r in (member, solo))  # built by the first job
    assert mine == theirs
    mine, theirs = _student(member), _student(solo)
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


def _alone(members: list[list[str]], results: Path, cache: Path) -> dict[str, dict[str, Any]]:
    """Each member's job run on its own (pack=auto is read by the sweeper only: run_job runs one job), by hash."""
    for cfg in _cfgs(members, results, cache):
        run_job(cfg)
    return _records(results)


def _pack(members: list[list[str]], where: Path, cache: Path) -> Any:
    """The pack's process's config: its pack file, the members' results under where/packed."""
    cfgs = _cfgs(members, where / "packed", cache)
    return OmegaConf.create({"pack_file": str(write_pack_file(where / "packs", [identify(c) for c in cfgs]))})


@pytest.mark.parametrize("members", [LIVE, SPARSE], ids=["live", "sparse"])
def test_each_member_of_a_decoder_pack_is_bit_identical_to_its_job_alone(members: list[list[str]], tmp_path: Path,
                                                                         shared_cache: Path, caplog,
                                                                         monkeypatch) -> None:
    alone = _alone(members, tmp_path / "alone", shared_cache)
    pack = _pack(members, tmp_path, shared_cache)
    loads, load = [], causal_lm.trained_teacher
    monkeypatch.setattr(causal_lm, "trained_teacher", lambda *a, **k: loads.append(1) or load(*a, **k))
    with caplog.at_level(logging.INFO, logger="distill_sweep"):
        returns = run_pack(pack)
    assert len(loads) == 1  # one teacher for the pack's members (alone: one each)
    packed = _records(tmp_path / "packed")
    assert packed.keys() == alone.keys() and len(returns) == len(members)
    for digest, solo in alone.items():
        _assert_same_job(packed[digest], solo)
    # in lockstep: every member ends its first epoch before any ends its second (alone, one after the other)
    ends = re.findall(r"distill epoch (\d)/2 loss", caplog.text)
    assert ends == ["1"] * len(members) + ["2"] * len(members), ends
    forwards = int(re.search(r"the pack's teacher: (\d+) forwards", caplog.text).group(1))
    if members is SPARSE:
        assert forwards == 0  # the teacher never runs: both read the stored top-k
        return
    # one forward per data batch for all three, plus one for each of gjsd's on-policy batches (its own samples);
    # alone, each job runs one per batch
    (on_policy,) = [r for r in alone.values() if r["objective"] == "gjsd"]
    sampled = sum(on_policy["causal_lm"]["data_source"]["on_policy_steps"])
    assert 0 < sampled < EPOCHS * STEPS  # the seed gives both kinds of step
    assert forwards == EPOCHS * STEPS + sampled


def test_a_signalled_decoder_pack_checkpoints_every_member_and_a_rerun_resumes_each(tmp_path: Path,
                                                                                   shared_cache: Path,
                                                                                   monkeypatch) -> None:
    """SLURM's signal in the pack's second step: every member checkpoints in its first epoch; the re-run resumes
    each, the on-policy member drawing its samples again from its seeds, and ends with the jobs' records alone."""
    alone = _alone(LIVE, tmp_path / "alone", shared_cache)
    turns, turn = [0], Lockstep.turn

    def signalled_turn(self: Lockstep, i: int) -> bool:
        turns[0] += 1
        if turns[0] == len(LIVE) + 1:  # in the second step
            signal.raise_signal(signal.SIGUSR2)
            time.sleep(1.0)  # the main thread notes it meanwhile (the members wait for this turn)
        return turn(self, i)

    monkeypatch.setattr(Lockstep, "turn", signalled_turn)
    pack = _pack(LIVE, tmp_path, shared_cache)
    with pytest.raises(SystemExit, match="stopped by signal"):
        run_pack(pack)
    stopped = _records(tmp_path / "packed")
    assert stopped.keys() == alone.keys()
    for digest, record in stopped.items():
        assert record["status"] == "running" and record["requeued"] == 1, record["objective"]
        (ckpt,) = [p for p in (tmp_path / "packed").rglob(CHECKPOINT) if digest[:10] in str(p)]
        position = torch.load(ckpt, map_location="cpu", weights_only=True)["position"]
        assert position["epoch"] == 1 and 0 < position["step"] < STEPS
    monkeypatch.setattr(Lockstep, "turn", turn)
    run_pack(pack)
    packed = _records(tmp_path / "packed")
    for digest, solo in alone.items():
        assert packed[digest]["resumed"] == 1
        _assert_same_job(packed[digest], solo)


def test_the_dry_run_shows_the_decoder_pack(tmp_path: Path) -> None:
    proc = run_cli_preloaded(["-m", "+dry_run=true", *BASE, "objective=fkl,rkl,gjsd", f"results_dir={tmp_path / 'r'}",
                    f"cache_dir={tmp_path / 'c'}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    passes = EPOCHS * STEPS * BATCH
    assert (f"packs (pack=auto): 3 jobs in 1 process(es), 1 pack(s) of 3 jobs; frozen-teacher forwards with the "
            f"teacher-output store: {passes:.3g} sample-passes in packs, {3 * passes:.3g} one process per job"
            in proc.stdout), proc.stdout[-3000:]
    assert not (tmp_path / "r").exists()


# what differs between two runs of one job whatever the packing: clocks, memory, paths, the tracker's run, the
# config's `pack` itself (not hashed: the same config hash) and the record's (which pack it shared a process with)
RUN_ONLY = {"wall_time_s", "samples_per_s", "peak_memory_mb", "peak_memory_kind", "started_at", "finished_at",
            "pack", "wandb", "config", "attempts", "versions", "git_commit", "cost"}  # cost: its measured seconds


def test_a_decoder_sweep_with_pack_auto_writes_the_records_of_pack_off(tmp_path: Path) -> None:
    """The sweeper's way: the grid (fkl, gjsd) x (on_policy 0, 0.8) is one pack of four with pack=auto; every
    record, less its clocks and paths, and every dev_predictions.npz and student_samples.json equal pack=off's."""
    cache = tmp_path / "cache"
    grid = [*BASE, "objective=fkl,gjsd", "procedure.on_policy=0,0.8", f"cache_dir={cache}", "-m"]
    auto = run_cli_preloaded([*grid, f"results_dir={tmp_path / 'auto'}"], cwd=tmp_path)
    assert auto.returncode == 0, auto.stderr[-3000:]
    assert "4 jobs in 1 process(es): 1 pack(s) trained in lockstep" in auto.stdout, auto.stdout[-2000:]
    off = run_cli_preloaded([*grid, "pack=off", f"results_dir={tmp_path / 'off'}"], cwd=tmp_path)
    assert off.returncode == 0, off.stderr[-3000:]
    assert "pack(s) trained in lockstep" not in off.stdout
    packed, alone = _records(tmp_path / "auto"), _records(tmp_path / "off")
    assert packed.keys() == alone.keys() and len(packed) == 4
    for digest, solo in alone.items():
        mine = _less(packed[digest], "causal_lm", "teacher")
        theirs = _less(solo, "causal_lm", "teacher")
        assert {k: v for k, v in mine.items() if k not in RUN_ONLY} == \
            {k: v for k, v in theirs.items() if k not in RUN_ONLY}, digest
        # a member's FLOPs are counted as if it trained alone (the shared teacher forward credited to each)
        assert mine["cost"]["flops"] == pytest.approx(theirs["cost"]["flops"], rel=1e-12), digest
        (a,), (b,) = ([p.parent for p in (tmp_path / side).rglob("result.json") if digest[:10] in str(p)]
                      for side in ("auto", "off"))
        files = sorted(p.name for p in b.iterdir() if p.suffix in (".npz", ".json") and p.name != "result.json")
        assert "dev_predictions.npz" in files
        assert sorted(p.name for p in a.iterdir() if p.suffix in (".npz", ".json") and p.name != "result.json") == files
        assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files), digest
