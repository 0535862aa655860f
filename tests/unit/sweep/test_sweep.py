"""The result store and the sweeper: config hash, skip completed, re-run missing/failed, dry run, presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import FAST, compose_cfg, records, run_cli_preloaded, save_diverged_model

from distill_sweep.job.identity import identify
from distill_sweep.records import files
from distill_sweep.sweep.compose import expected_jobs


def test_config_hash_ignores_where_and_how_but_not_what(tmp_path: Path) -> None:
    def digest(*overrides: str) -> str:  # the job's own hash (job.identify), the one records carry
        return identify(compose_cfg([*FAST, *overrides])).digest

    base = digest("results_dir=a", "cache_dir=b")
    assert digest("results_dir=elsewhere", "cache_dir=c", "logger=wandb", "device=cpu", "eval_batch_size=7",
                  "checkpoint.every_steps=5") == base
    for change in ("seed=2", "init=3", "objective=att_kl", "epochs=2", "optimizer.lr=0.5"):
        assert digest("results_dir=a", "cache_dir=b", change) != base, change


def test_atomic_write_leaves_only_the_final_file(tmp_path: Path) -> None:
    path = tmp_path / "d" / "result.json"
    files.write_json_atomic(path, {"status": "running"})
    files.write_json_atomic(path, {"status": "completed"})
    assert json.loads(path.read_text()) == {"status": "completed"}
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]
    (tmp_path / "half.json").write_text('{"status": "compl')
    assert files.read_record(tmp_path / "half.json") is None  # a torn file is never taken as complete


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_paper_presets_expand_to_the_papers_grids() -> None:
    table1 = expected_jobs("paper_table1")
    table3 = expected_jobs("paper_table3")
    assert len(table1) == 7 * 9 * 1 * 4 and len(table3) == 7 * 6 * 3 * 4
    assert {c["init_spec"] for c in table3} == {"1", "2", "3"}
    assert {c["task"] for c in table1} == {"qnli", "sst2", "mnli", "mrpc", "qqp", "rte", "cola"}
    assert {c["seed"] for c in table1} == {1, 2, 3, 4}
    assert len({c["objective"] for c in table1}) == 9
    demo = expected_jobs("demo")
    assert {c["task"] for c in demo} == {"toy"} and len(demo) == len({c["hashes"][0] for c in demo})
    # 4 objectives x 2 inits x 2 seeds distilled, and the no-KD baseline once per init and seed
    assert len(demo) == 16 + 4 and sum(c["procedure"] == "finetune" for c in demo) == 4


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
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


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_dry_run_plans_without_running(tmp_path: Path) -> None:
    out = tmp_path / "results"
    # the Table 3 grid narrowed to one task (the whole grid is 504 jobs: test_paper_presets_expand_...)
    proc = run_cli_preloaded(["experiment=paper_table3", "task=rte", f"results_dir={out}", "+dry_run=true", "-m"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "72 jobs in the grid, 0 already completed, 72 to run" in proc.stdout
    assert proc.stdout.count("would run: ") == 20 and "... and 52 more (+dry_run_list=true" in proc.stdout  # capped
    assert "estimated cost" in proc.stdout
    assert not out.exists()


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
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


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_job_composer_gives_the_configs_hydra_composes() -> None:
    """Planning composes once per set of group choices and applies value overrides itself: same configs."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from distill_sweep.config.space import CONF_DIR, VERSION_BASE
    from distill_sweep.sweep.compose import JobComposer, expand

    jobs = expand(["task=toy,rte", "objective=hid_seq,att_kl", "init=1,[1,2,3]", "seed=1,2", "objective.alpha=0.3",
                   "+dry_run=true", "teacher=tiny", "~teacher.finetune.seed", "teacher.finetune.epochs=2"])
    calls = []

    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        def load(overrides):
            calls.append(list(overrides))
            return compose("config", overrides=list(overrides))

        composer = JobComposer(load)
        for overrides in jobs:
            ours = OmegaConf.to_container(composer(overrides), resolve=False)
            hydra = OmegaConf.to_container(compose("config", overrides=list(overrides)), resolve=False)
            assert ours == hydra, overrides
    assert len(jobs) == 16 and len(calls) == 4  # one composition per (task, objective)


def test_preset_status_tells_jobs_apart_that_differ_only_in_layer_map() -> None:
    """PKD-Skip and PKD-Last share task, objective, init and seed: only their hashes tell them apart."""
    import pandas as pd

    from distill_sweep.analysis import grid_status

    cells = [c for c in expected_jobs("pkd") if c["objective"] == "pkd"]
    assert len(cells) == 2 * 2 and len({c["hashes"][0] for c in cells}) == 4  # map skip,last x 2 seeds
    done = cells[0]
    records = pd.DataFrame([{"task": done["task"], "objective": "pkd", "init_spec": done["init_spec"],
                             "seed": done["seed"], "config_hash": done["hashes"][0] + "abcdef", "status": "completed",
                             "started_at": "2026-11-23T00:00:00"}])
    completed, failed, missing = grid_status.grid_status(records, cells)
    assert completed == [done] and failed == [] and len(missing) == 3  # the other map is NOT counted as done
