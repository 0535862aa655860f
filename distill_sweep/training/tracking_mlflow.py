"""logger=mlflow: one MLflow run per job (per pack member), a child of its sweep's run, continued when the job
resumes; offline by design.

The store is MLFLOW_TRACKING_URI where it is set, else an SQLite database in `<results_dir>/mlruns/mlflow.db` (MLflow
3 keeps its file store, `./mlruns` of old, in maintenance mode and refuses it unless told otherwise; SQLite is what
it asks for instead). Runs are found by tags, not by anything a checkpoint must carry: a job's run by a digest of its
directory (`run_log.JOB_TAG`), a sweep's by a digest of the sweep's directory (`run_log.SWEEP_TAG`), looked up and
created under a file lock in the results directory, so that the processes of one sweep make one run each. A job's
first attempt (its record's `attempts` is 1) starts a run of its own: a run of its directory from before is one of
a results directory since deleted, in a store kept elsewhere.
A run holds the params (the job's config, flat: `optimizer.lr`), a metric per step (what the stage driver logs),
and tags: the config hash, the job's coordinates, the seed of every source, the pack, the tuning
(records/flat.run_labels).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from filelock import FileLock

from distill_sweep.records.flat import run_labels
from distill_sweep.records.record import Record
from distill_sweep.training.run_log import JOB_TAG, SWEEP_TAG, Logged, key_of, numbers, text_params

ENV = "MLFLOW_TRACKING_URI"
STORE = "mlruns"  # under the results directory: the default store, the artifacts and the lock
BATCH = 100  # MLflow's limit of params (and tags) per log_batch call
CUT = "...[cut]"  # ends a param or tag value cut to MLflow's limit
_CLIENTS: dict[str, Any] = {}  # one client per store and process: the SQLite store migrates its schema once
_GUARD = threading.Lock()  # the members of a pack are threads of one process


def tracking_uri(results_dir: Path) -> str:
    """Where a job of `results_dir` logs: MLFLOW_TRACKING_URI, else the SQLite store in the results directory."""
    return os.environ.get(ENV) or f"sqlite:///{results_dir / STORE / 'mlflow.db'}"


class MlflowRun:
    """A job's MLflow run, created or continued (see the module's docstring)."""

    def __init__(self, *, experiment: str, record: Record, job_dir: Path, results_dir: Path, group: str | None,
                 name: str) -> None:
        self.uri = tracking_uri(results_dir)
        store = results_dir / STORE
        store.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # offline: no usage reports
        from mlflow.entities import Param, RunStatus, RunTag
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_TAG_VAL_LENGTH

        with _GUARD, FileLock(str(store / "store.lock")):
            self.client = _client(self.uri)
            default_store = self.uri.startswith("sqlite:///") and ENV not in os.environ
            experiment_id = _experiment(self.client, experiment, store / "artifacts" if default_store else None)
            job = key_of(job_dir)
            found = self.client.search_runs([experiment_id], filter_string=f"tags.`{JOB_TAG}` = '{job}'",
                                            max_results=1) if record.attempts > 1 else []
            self.parent: str | None = None
            if found:
                run = found[0]
                self.parent = run.data.tags.get("mlflow.parentRunId")
            else:
                tags = {JOB_TAG: job, "distill_sweep.job_dir": str(job_dir)}
                if group is not None:
                    self.parent = _parent(self.client, experiment_id, group)
                    tags["mlflow.parentRunId"] = self.parent
                run = self.client.create_run(experiment_id, run_name=name, tags=tags)
        self.run_id: str = run.info.run_id
        self.run_dir: str | None = self.uri
        self.logged = Logged()
        if found:  # the job's earlier attempt: its steps stand, its params stay (MLflow never changes a param)
            self.client.update_run(self.run_id, status=RunStatus.to_string(RunStatus.RUNNING))
            self.logged = Logged({key: max(m.step for m in self.client.get_metric_history(self.run_id, key))
                                  for key in run.data.metrics})
        params = [Param(k, _cut(v, MAX_PARAM_VAL_LENGTH)) for k, v in text_params(record).items()
                  if k not in run.data.params]
        tags = [RunTag(k, _cut(v, MAX_TAG_VAL_LENGTH)) for k, v in run_labels(record).items()]
        for start in range(0, max(len(params), len(tags)), BATCH):
            self.client.log_batch(self.run_id, params=params[start:start + BATCH], tags=tags[start:start + BATCH])

    def log(self, data: dict[str, Any], step: int | None) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = self.logged.new(numbers(data), step)
        if metrics:
            self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step or 0) for k, v in metrics.items()])

    def summary(self, data: dict[str, Any]) -> None:
        """The job's summary (its best and final primary metric): metrics at its last step."""
        self.log(data, self.logged.step)

    def finish(self, status: str) -> None:
        """`status`: FINISHED, FAILED or KILLED (stopped to be resumed)."""
        self.client.set_terminated(self.run_id, status)
        if self.parent is not None:  # the sweep's run ends with its last job
            self.client.set_terminated(self.parent, "FINISHED")


def _cut(text: str, limit: int) -> str:
    """A param or tag within MLflow's length limit (a longer one would refuse the whole batch): cut, and said so."""
    return text if len(text) <= limit else text[:limit - len(CUT)] + CUT


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    if uri not in _CLIENTS:
        for name in ("mlflow", "alembic"):  # the store's schema set-up is not the job's news
            logging.getLogger(name).setLevel(logging.WARNING)
        _CLIENTS[uri] = MlflowClient(tracking_uri=uri)
    return _CLIENTS[uri]


def _experiment(client: Any, name: str, artifacts: Path | None) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return str(experiment.experiment_id)
    return str(client.create_experiment(name, artifact_location=artifacts.as_uri() if artifacts else None))


def _parent(client: Any, experiment_id: str, group: str) -> str:
    """The sweep's run (made by its first job): it holds no metrics, its children are the sweep's jobs."""
    sweep = key_of(group)
    found = client.search_runs([experiment_id], filter_string=f"tags.`{SWEEP_TAG}` = '{sweep}'", max_results=1)
    if found:
        return str(found[0].info.run_id)
    run = client.create_run(experiment_id, run_name=group,
                            tags={SWEEP_TAG: sweep, "distill_sweep.sweep_dir": group})
    return str(run.info.run_id)
