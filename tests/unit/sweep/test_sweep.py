"""The result store and the sweeper: config hash, skip completed, re-run missing/failed, dry run, presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import FAST, compose_cfg

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
