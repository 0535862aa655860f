"""logger=mlflow and logger=trackio on a small grid, read back with each library's own API: one run per job (per
pack member), params the record's config, metrics the record's epochs, tags the seeds, pack and config hash; a
sweep killed with SIGKILL mid-training and run again continues each job's run, logging no step twice. The export
of the same results holds the same jobs and numbers."""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from distill_sweep.records.flat import as_text, flatten
from tests.helpers import FAST, records, run_cli_preloaded

STEPS = 256 // 32  # a stage's steps: FAST's 256 training examples in batches of 32
KILL_AT = 5  # the sweep is killed after this training step (its last checkpoint: step 4)
# one pack of two members (they share the data-order seed): vanilla_kd trains a prediction stage, att_mse an
# intermediate stage, then a prediction stage
GRID = [*FAST, "objective=vanilla_kd,att_mse", "log_every=1", "checkpoint.every_steps=2", "-m"]
# `python -m killed ARGS`: the tool's command, killed with SIGKILL once a student of RESULTS reaches step KILL_AT
KILLED = """
import os, runpy, signal
from distill_sweep.training.stages import StageDriver

on_step = StageDriver._on_step

def killed(self, stage, n_steps, optimizer, scheduler, progress, loss):
    on_step(self, stage, n_steps, optimizer, scheduler, progress, loss)
    student = str(self.ckpt_path).startswith(os.environ["RESULTS"])  # (not the teacher's fine-tuning)
    if student and self.pos["global_step"] + progress.steps >= int(os.environ["KILL_AT"]):
        os.kill(os.getpid(), signal.SIGKILL)

StageDriver._on_step = killed
runpy.run_module("distill_sweep", run_name="__main__", alter_sys=True)
"""


def _killed_and_resumed(root: Path, cache: Path, logger: str) -> Path:
    """The grid under `root`/results, killed mid-training and run again; returns the results directory."""
    results = root / "results"
    (root / "killed.py").write_text(KILLED)
    args = [*GRID, f"logger={logger}", f"results_dir={results}", f"cache_dir={cache}"]
    with pytest.MonkeyPatch.context() as env:
        for name in ("MLFLOW_TRACKING_URI", "TRACKIO_DIR"):  # the default stores, in the results directory
            env.delenv(name, raising=False)
        first = run_cli_preloaded(args, cwd=root, module="killed", env={"RESULTS": str(results),
                                                                       "KILL_AT": str(KILL_AT)})
        assert first.returncode == -9, first.stderr[-2000:]
        assert [r["status"] for r in records(results)] == ["running", "running"]
        again = run_cli_preloaded(args, cwd=root)
        assert again.returncode == 0, again.stderr[-2000:]
    return results


@pytest.fixture(scope="module")
def mlflow_grid(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> Path:
    return _killed_and_resumed(tmp_path_factory.mktemp("mlflow"), shared_cache, "mlflow")


@pytest.fixture(scope="module")
def trackio_grid(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> Path:
    return _killed_and_resumed(tmp_path_factory.mktemp("trackio"), shared_cache, "trackio")


def _completed(results: Path) -> dict[str, dict[str, Any]]:
    done = {r["config_hash"]: r for r in records(results)}
    assert len(done) == 2 and all(r["status"] == "completed" for r in done.values())
    assert all(r["resumed"] == 1 and r["attempts"] == 2 for r in done.values())  # both were killed and resumed
    return done


def _epoch_values(record: dict[str, Any]) -> dict[tuple[str, int], float]:
    """What the record's epochs say the tracker logged: (metric, step) -> value."""
    out = {}
    for epoch in record["epochs"]:
        out[(f"{epoch['stage']}/train_loss", epoch["step"])] = epoch["train_loss"]
        out.update({(f"dev/{m}", epoch["step"]): v for m, v in epoch["dev"].items()})
    return out


def _stages(record: dict[str, Any]) -> list[str]:
    return [e["stage"] for e in record["epochs"]]


def test_mlflow_holds_one_child_run_per_job_with_the_records_params_and_metrics(mlflow_grid: Path) -> None:
    from mlflow.tracking import MlflowClient

    done = _completed(mlflow_grid)
    client = MlflowClient(tracking_uri=f"sqlite:///{mlflow_grid / 'mlruns' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("distill_sweep")
    runs = client.search_runs([experiment.experiment_id])
    children = {r.data.tags["config_hash"]: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    # one run per job though each ran twice, both children of the sweep that started them (the second sweep found
    # its jobs' runs and made no run of its own)
    assert len(runs) == 3 and children.keys() == done.keys() and len(parents) == 1
    assert {r.data.tags["mlflow.parentRunId"] for r in children.values()} == {parents[0].info.run_id}
    packs = {r["pack"] for r in done.values()}
    assert len(packs) == 1 and packs != {None}  # one pack of both
    for digest, record in done.items():
        run = children[digest]
        assert run.info.status == "FINISHED"
        assert run.data.params == {k: as_text(v) for k, v in flatten(record["config"]).items()}
        assert run.data.params["optimizer.batch_size"] == "32" and run.data.params["optimizer.lr"] == "null"
        tags = run.data.tags
        assert tags["pack"] == record["pack"] and tags["objective"] == record["objective"]
        assert {s: tags[f"seeds.{s}"] for s in ("init", "data_order", "dropout", "sampling")} == \
            {s: str(record["seeds"][s]) for s in ("init", "data_order", "dropout", "sampling")}
        history = {key: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)]
                   for key in run.data.metrics}
        for key, points in history.items():  # no step logged twice, though the killed attempt logged step 5
            steps = [step for step, _ in points]
            assert len(steps) == len(set(steps)), (key, steps)
        logged = {(key, step): value for key, points in history.items() for step, value in points}
        for (key, step), value in _epoch_values(record).items():
            assert logged[(key, step)] == value, (key, step)
        total = STEPS * len(_stages(record))
        for stage in set(_stages(record)):  # every step's loss once (log_every=1), before and after the kill
            assert sum(1 for key, _ in logged if key == f"{stage}/loss") == STEPS
        primary = record["primary_metric"]
        assert logged[(f"best/{primary}", total)] == record["best"]["dev"][primary]
        assert logged[(f"final/{primary}", total)] == record["final"]["dev"][primary]
        assert logged[("system/peak_memory_mb", total)] == record["peak_memory_mb"]
        assert logged[("system/wall_time_s", total)] == record["wall_time_s"]
        assert tags["git_commit"] == record["git_commit"] and tags["versions.torch"] == record["versions"]["torch"]


def test_trackio_holds_one_run_per_job_with_the_records_params_and_metrics(trackio_grid: Path) -> None:
    store = trackio_grid / "trackio"
    assert (store / "distill_sweep.db").is_file()
    done = _completed(trackio_grid)
    if "trackio" in sys.modules:  # it reads its directory once per process, at import
        pytest.fail("trackio was imported in this process before: read it back in a process of its own")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TRACKIO_DIR", str(store))
        import trackio
        from trackio.sqlite_storage import SQLiteStorage

        runs = list(trackio.Api().runs("distill_sweep"))
        by_hash = {run.config["tags.config_hash"]: run for run in runs}
        assert len(runs) == 2 and by_hash.keys() == done.keys()  # one run per job, though each ran twice
        for digest, record in done.items():
            run = by_hash[digest]
            config = {k: v for k, v in run.config.items() if not k.startswith(("_", "tags."))}
            assert config == flatten(record["config"])
            assert run.config["tags.pack"] == record["pack"] and run.config["_Group"]
            assert run.config["tags.seeds.data_order"] == str(record["seeds"]["data_order"])
            logged: dict[tuple[str, int], float] = {}
            counts: collections.Counter[tuple[str, int]] = collections.Counter()
            for row in SQLiteStorage.get_logs("distill_sweep", run.name):
                for key in row.keys() - {"step", "timestamp"}:
                    logged[(key, row["step"])] = row[key]
                    counts[(key, row["step"])] += 1
            assert max(counts.values()) == 1  # no step logged twice
            for (key, step), value in _epoch_values(record).items():
                assert logged[(key, step)] == value, (key, step)
            for stage in set(_stages(record)):
                assert sum(1 for key, _ in logged if key == f"{stage}/loss") == STEPS


def test_the_export_of_the_grid_holds_its_jobs_and_epochs(mlflow_grid: Path, tmp_path: Path) -> None:
    import pandas as pd

    done = _completed(mlflow_grid)
    proc = run_cli_preloaded([str(mlflow_grid), "--out", str(tmp_path)], cwd=tmp_path, module="distill_sweep.export")
    assert proc.returncode == 0, proc.stderr
    runs = pd.read_parquet(tmp_path / "runs.parquet").set_index("config_hash")
    metrics = pd.read_parquet(tmp_path / "metrics.parquet")
    assert set(runs.index) == done.keys() and set(runs["status"]) == {"completed"}
    for digest, record in done.items():
        row = runs.loc[digest]
        assert row["pack"] == record["pack"] and row["config.objective.name"] == record["objective"]
        assert row["best.dev.accuracy"] == record["best"]["dev"]["accuracy"]
        assert row["peak_memory_mb"] == pytest.approx(record["peak_memory_mb"])
        mine = metrics[metrics["config_hash"] == digest]
        dev = mine[mine["metric"] == "dev.accuracy"]
        assert list(dev["value"]) == [e["dev"]["accuracy"] for e in record["epochs"]]
        assert list(dev["step"]) == [e["step"] for e in record["epochs"]]
    assert json.loads(runs.iloc[0]["init.layers"]) == done[runs.index[0]]["init"]["layers"]  # a list: its JSON
