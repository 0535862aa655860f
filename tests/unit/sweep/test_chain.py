"""The fine-tune grid after a distillation (finetune_grid, student=distilled) and the report's Tables 2 and 4."""

from __future__ import annotations

import pytest

from distill_sweep.config.schema import FinetuneGridSettings
from distill_sweep.errors import ConfigError
from distill_sweep.sweep import chain


def test_fine_tune_jobs_take_the_run_settings_not_the_distillations_parts() -> None:
    distill = ["experiment=paper_table2", "objective=att_mse", "procedure.max_steps=6", "student.num_layers=3",
               "corpus=toy", "corpus.num_documents=50", "init=random", "seed=3", "epochs=1", "teacher=tiny_mlm",
               "teacher.config.num_hidden_layers=4", "task.max_train_samples=100", "results_dir=/r", "threads=1",
               "max_steps_per_epoch=5", "finetune_grid.epochs=2", "+dry_run=true"]
    assert chain.passed_on(distill) == ["teacher.config.num_hidden_layers=4", "task.max_train_samples=100",
                                        "results_dir=/r", "threads=1", "max_steps_per_epoch=5", "+dry_run=true"]
    grid = FinetuneGridSettings(tasks=["rte", "mrpc"], lrs=[1e-5, 3e-5], batch_sizes=[16, 32], seeds=[1, 2],
                                      epochs=10, overrides=["threads=2", "precision=bf16"])
    jobs = chain.finetune_overrides(distill, "tiny_mlm", "ab" * 32, grid)
    assert len(jobs) == 2 * 2 * 2 * 2
    first = jobs[0]
    assert "threads=1" not in first and first.count("threads=2") == 1  # the grid's overrides win, once each
    assert {"teacher=tiny_mlm", "procedure=finetune", "student=distilled", f"student.source={'ab' * 32}",
            "task=rte", "optimizer.lr=1e-05", "optimizer.batch_size=16", "seed=1", "epochs=10"} <= set(first)
    points = {(j[j.index("task=rte") if "task=rte" in j else 0], tuple(o for o in j if o.startswith(
        ("task=", "optimizer.", "seed=")))) for j in jobs}
    assert len(points) == 16  # every point once


@pytest.mark.parametrize("params", [
    {"objective": "vanilla_kd,hid_cls", "seed": "1,2,3"},
    {"++procedure": "{on_policy:0.0,seq_kd:false},{on_policy:0.5,seq_kd:true}", "task.name": "it's \\ odd\\'\\"},
])
def test_the_sweeps_sweeper_params_reach_the_fine_tune_jobs_unchanged(params: dict) -> None:
    # Hydra 1.4 refuses a swept job whose hydra.sweeper differs from the primary config's
    from hydra.core.override_parser.overrides_parser import OverridesParser

    (kept,) = chain.sweeper_kept(params)
    assert kept.startswith("hydra.sweeper.params=")
    assert OverridesParser.create().parse_overrides([kept])[0].value() == params
    grid = FinetuneGridSettings(tasks=["toy"], lrs=[1e-3], batch_sizes=[32])
    (job,) = chain.finetune_overrides(["objective=att_mse"], "tiny", "ab" * 32, grid, [kept])
    assert job[-1] == kept
    assert chain.sweeper_kept(None) == [] and chain.sweeper_kept({}) == []


@pytest.mark.parametrize("bad, message", [
    ({"tasks": []}, "finetune_grid.tasks is empty"),
    ({"tasks": ["nosuch"]}, "unknown task 'nosuch'"),
    ({"lrs": [0.0]}, "learning rates must be > 0"),
    ({"batch_sizes": [0]}, r"finetune_grid.batch_sizes=\[0\]: batch sizes must be >= 1"),
    ({"overrides": ["nonsense"]}, "not Hydra overrides"),
    ({"overrides": ["logger=nosuch"]}, "finetune_grid.overrides: unknown logger 'nosuch'"),
])
def test_bad_grids_are_refused(bad: dict, message: str) -> None:
    from distill_sweep.config.parse import parse

    good = {"tasks": ["toy"], "lrs": [1e-3], "batch_sizes": [32]}
    with pytest.raises(ConfigError, match=message):
        parse(FinetuneGridSettings, {**good, **bad}, "finetune_grid")


def test_fine_tune_jobs_after_a_data_parallel_distillation_run_as_one_process(capsys: pytest.CaptureFixture) -> None:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher

    from distill_sweep.sweep.launch import one_process_per_job

    launcher = SlurmLauncher(nodes=2, tasks_per_node=4, gpus_per_node=4, cpus_per_task=8, timeout_min=60)
    with one_process_per_job(launcher):
        inside = dict(launcher.params)
    assert (inside["nodes"], inside["tasks_per_node"], inside["gpus_per_node"]) == (1, 1, 1)
    assert inside["cpus_per_task"] == 8 and inside["timeout_min"] == 60  # the rest as set
    assert (launcher.params["nodes"], launcher.params["tasks_per_node"], launcher.params["gpus_per_node"]) == (2, 4, 4)
    assert "hydra.launcher.nodes=1" in capsys.readouterr().out
