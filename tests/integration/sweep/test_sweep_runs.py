"""The result store and the sweeper: the tests that run a job, a command or processes (its fast tests:
tests/unit/sweep/test_sweep.py)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import FAST, records, run_cli_preloaded, save_diverged_model


def test_sweep_skips_completed_reruns_missing_and_failed_and_survives_a_failure(tmp_path: Path) -> None:
    out, cache = tmp_path / "results", tmp_path / "cache"
    # 2 students x 2 seeds: the diverged student (an inf in its weights) makes 2 jobs fail (non-finite loss) while
    # the other 2 complete
    good = save_diverged_model(tmp_path / "good", cache, None)
    bad = save_diverged_model(tmp_path / "bad", cache, "bert.embeddings.LayerNorm.bias")
    grid = [*FAST, "objective=hid_seq", "student=pretrained", f"student.name_or_path={good},{bad}", "seed=1,2",
            f"results_dir={out}", f"cache_dir={cache}", "-m"]
    first = run_cli_preloaded(grid, cwd=tmp_path)
    assert first.returncode == 1  # Hydra's rule: a failed job makes the multirun exit 1 ...
    assert "4 jobs in the grid, 0 already completed, 4 to run" in first.stdout
    # one line per job as it finishes, read from the store (whatever the launcher)
    assert first.stdout.count("] completed: toy/hid_seq init-pretrained seed") == 2 and first.stdout.count("] failed: ") == 2
    recs = records(out)
    assert sorted(r["status"] for r in recs) == ["completed", "completed", "failed", "failed"]  # ... others finish
    failed = [r for r in recs if r["status"] == "failed"]
    assert all("NonFiniteLossError" in r["error"] for r in failed)

    # re-run: completed jobs are skipped, failed ones run again (and fail again)
    again = run_cli_preloaded(grid, cwd=tmp_path)
    assert "4 jobs in the grid, 2 already completed, 2 to run" in again.stdout

    # only the good half: re-running executes 0 jobs; deleting one record re-runs exactly that one
    good = [*FAST, "objective=hid_seq", "student=pretrained", f"student.name_or_path={good}", "seed=1,2",
            f"results_dir={out}", f"cache_dir={cache}", "-m"]
    before = {r["config_hash"]: r["finished_at"] for r in records(out) if r["status"] == "completed"}
    zero = run_cli_preloaded(good, cwd=tmp_path)
    assert zero.returncode == 0 and "2 jobs in the grid, 2 already completed, 0 to run" in zero.stdout
    victim = next(p for p in out.rglob("result.json") if json.loads(p.read_text())["status"] == "completed")
    victim_hash = json.loads(victim.read_text())["config_hash"]
    victim.unlink()
    one = run_cli_preloaded(good, cwd=tmp_path)
    assert one.returncode == 0 and "2 jobs in the grid, 1 already completed, 1 to run" in one.stdout
    after = {r["config_hash"]: r["finished_at"] for r in records(out) if r["status"] == "completed"}
    assert after.keys() == before.keys()
    assert [h for h in before if before[h] != after[h]] == [victim_hash]


def test_dry_run_plans_without_running(tmp_path: Path) -> None:
    out = tmp_path / "results"
    # the Table 3 grid narrowed to one task (the whole grid is 504 jobs: test_paper_presets_expand_...)
    proc = run_cli_preloaded(["experiment=paper_table3", "task=rte", f"results_dir={out}", "+dry_run=true", "-m"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "72 jobs in the grid, 0 already completed, 72 to run" in proc.stdout
    assert proc.stdout.count("would run: ") == 20 and "... and 52 more (+dry_run_list=true" in proc.stdout  # capped
    assert "estimated cost" in proc.stdout
    # Table 3's claim: the interaction this grid detects (tests/unit/analysis/test_interaction_power.py has its number)
    assert "objective x init interaction (Table 3's test) at this grid's n: 4 (task, master seed) units" in proc.stdout
    assert "unknown until runs exist" in proc.stdout
    assert not out.exists()


def test_a_bad_job_in_a_sweep_stops_it_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "results"
    # (a rule transformers' configs decide: the sweeper checks every job before launching any, naming the job)
    proc = run_cli_preloaded([*FAST, "objective=vanilla_kd,att_mse", "student=fresh", f"results_dir={out}",
                    f"cache_dir={tmp_path / 'c'}", "-m"], cwd=tmp_path, env={"PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("distill_sweep: error")]
    assert len(errors) == 1 and errors[0].startswith("distill_sweep: error in job [") and "objective=att_mse" in errors[0]
    assert "compares attention heads one to one" in errors[0]
    assert not out.exists() and not (tmp_path / "c").exists()
