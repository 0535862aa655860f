"""Packs: the tests that run a job, a command or processes (its fast tests: tests/unit/sweep/test_packs.py)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import PACK_BASE as BASE
from helpers import records, run_cli_preloaded, save_diverged_model


def test_a_sweep_launches_packs_a_member_fails_alone_and_a_rerun_packs_the_rest(tmp_path: Path) -> None:
    out, cache = tmp_path / "results", tmp_path / "cache"
    # two saved students of the teacher's shape, one of them diverged (an inf in its embeddings' LayerNorm)
    good = save_diverged_model(tmp_path / "good", cache, None)
    bad = save_diverged_model(tmp_path / "bad", cache, "bert.embeddings.LayerNorm.bias")
    grid = [*BASE, "objective=hid_seq,att_kl,vanilla_kd", "student=pretrained", f"student.name_or_path={good},{bad}",
            f"results_dir={out}", f"cache_dir={cache}", "-m"]
    dry = run_cli_preloaded([*grid, "+dry_run=true"], cwd=tmp_path)
    assert "packs (pack=auto): 6 jobs in 1 process(es), 1 pack(s) of 6 jobs" in dry.stdout, dry.stdout[-2000:]
    first = run_cli_preloaded(grid, cwd=tmp_path)
    assert first.returncode == 1  # the diverged student's members fail (non-finite loss) ...
    assert "6 jobs in 1 process(es): 1 pack(s) trained in lockstep" in first.stdout, first.stdout[-2000:]
    assert "3 of 6 jobs failed" in first.stderr and "non-finite loss" in first.stderr, first.stderr[-2000:]
    recs = records(out)
    assert sorted((r["config"]["student"]["name_or_path"], r["status"]) for r in recs) == \
        sorted([(str(good), "completed")] * 3 + [(str(bad), "failed")] * 3)  # ... alone: the others completed
    assert len(list((tmp_path / "multirun").rglob("packs/pack-*.json"))) == 1

    # a completed member's record removed: the re-run packs only the jobs still missing (it and the failed ones)
    victim = next(p for p in out.rglob("result.json") if json.loads(p.read_text())["status"] == "completed")
    victim.unlink()
    again = run_cli_preloaded(grid, cwd=tmp_path)
    assert "6 jobs in the grid, 2 already completed, 4 to run" in again.stdout
    assert "4 jobs in 1 process(es): 1 pack(s) trained in lockstep" in again.stdout, again.stdout[-2000:]
    assert sorted(r["status"] for r in records(out)) == ["completed"] * 3 + ["failed"] * 3
