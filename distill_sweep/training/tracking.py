"""Experiment tracking: one run per job with wandb, MLflow or Trackio (`logger=`), grouped by sweep. Never fails a job.

Every call into a tracker is wrapped: an error becomes a warning and tracking switches itself off. wandb's runs are
created with `reinit="create_new"` and logged through their own object, MLflow's through a client by run id,
Trackio's through their own object, so the members of a pack (one process, one run each, sweep/packs.py) log side
by side. MLflow's and Trackio's runs are local and found again by the job (tracking_mlflow.py,
tracking_trackio.py): a job killed and run again continues its run.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

from distill_sweep.config.schema import LoggerSettings
from distill_sweep.records.record import Record
from distill_sweep.training.distributed import is_main

log = logging.getLogger(__name__)


class Tracker:
    def __init__(self, logger: LoggerSettings, record: Record, job_dir: Path, *, results_dir: Path,
                 group: str | None, name: str, tags: list[str], resume_id: str | None = None) -> None:
        """`record`: the job's record as it starts (its config is what the run shows as its config or params);
        `group`: the sweep's directory (None: a job on its own); `tags`: wandb's; `resume_id`: the wandb run a
        checkpoint names."""
        self.run: Any = None
        self.name = str(logger.name)
        if str(logger.mode) == "disabled" or logger.name == "none" or not is_main():  # one run per job: rank 0's
            return
        try:
            if logger.name == "mlflow":
                from distill_sweep.training.tracking_mlflow import MlflowRun

                self.run = MlflowRun(experiment=str(logger.project), record=record, job_dir=job_dir,
                                     results_dir=results_dir, group=group, name=name)
            elif logger.name == "trackio":
                from distill_sweep.training.tracking_trackio import TrackioRun

                self.run = TrackioRun(project=str(logger.project), record=record, job_dir=job_dir,
                                      results_dir=results_dir, group=group, name=name)
            else:
                self.run = WandbRun(logger, record.config, job_dir, group=group, name=name, tags=tags,
                                    resume_id=resume_id)
        except Exception as err:  # tracking must never stop training
            self._disable("init", err)

    @property
    def run_id(self) -> str | None:
        return getattr(self.run, "run_id", None)

    @property
    def run_dir(self) -> str | None:
        return getattr(self.run, "run_dir", None)

    def log(self, data: dict[str, Any], step: int | None = None) -> None:
        if self.run is None:
            return
        try:
            self.run.log(data, step)
        except Exception as err:
            self._disable("log", err)

    def summary(self, data: dict[str, Any]) -> None:
        if self.run is None:
            return
        try:
            self.run.summary(data)
        except Exception as err:
            self._disable("summary", err)

    def finish(self, exit_code: int = 0, *, stopped: bool = False) -> None:
        """`stopped`: the job stopped to be resumed (preempted, interrupted), with `exit_code` as wandb takes it."""
        if self.run is None:
            return
        try:
            self.run.finish("KILLED" if stopped else "FINISHED" if exit_code == 0 else "FAILED")
        except Exception as err:
            self._disable("finish", err)
        self.run = None

    def _disable(self, where: str, err: Exception) -> None:
        warnings.warn(f"{self.name} {where} failed, tracking disabled for this job: {type(err).__name__}: {err}",
                      stacklevel=3)
        self.run = None


class WandbRun:
    """A job's wandb run (offline by default; `wandb sync` later)."""

    def __init__(self, logger: LoggerSettings, config: dict[str, Any], job_dir: Path, *, group: str | None,
                 name: str, tags: list[str], resume_id: str | None) -> None:
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        run_dir = Path(logger.dir).expanduser() if logger.dir else job_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=str(logger.project), entity=logger.entity, mode=str(logger.mode), dir=str(run_dir),
            group=group, name=name, tags=tags, id=resume_id, resume="allow" if resume_id else None,
            config=config, reinit="create_new",
        )
        self.run_id: str | None = getattr(self.run, "id", None)
        self.run_dir: str | None = getattr(self.run, "dir", None)

    def log(self, data: dict[str, Any], step: int | None) -> None:
        self.run.log(data, step=step)

    def summary(self, data: dict[str, Any]) -> None:
        self.run.summary.update(data)

    def finish(self, status: str) -> None:
        # a stopped job's run ends as before, exit code 0: wandb resumes it by the id its checkpoint holds
        self.run.finish(exit_code=1 if status == "FAILED" else 0)


def log_report(project: str, group: str, mode: str, run_dir: Path, name: str, files: list[Path]) -> str | None:
    """The report as one wandb run of the sweep's group (job_type "report"): every CSV as a wandb.Table, every
    PNG as an image, the HTML page as wandb.Html. Returns the run's directory; None (with a warning) when
    wandb fails: a report is never lost to tracking."""
    os.environ.setdefault("WANDB_SILENT", "true")
    try:
        import pandas as pd
        import wandb

        run_dir.mkdir(parents=True, exist_ok=True)
        run = wandb.init(project=project, group=group, job_type="report", name=name, mode=mode, dir=str(run_dir),
                         reinit="finish_previous")
        payload: dict[str, Any] = {}
        for path in files:
            key = path.stem
            if path.suffix == ".csv":
                payload[f"tables/{key}"] = wandb.Table(dataframe=pd.read_csv(path).astype(str))
            elif path.suffix == ".png":
                payload[f"plots/{key}"] = wandb.Image(str(path))
            elif path.suffix == ".html":
                payload["report"] = wandb.Html(path.read_text(encoding="utf-8"))
        run.log(payload)
        where = str(Path(run.dir).parent)
        run.finish()
        return where
    except Exception as err:  # tracking must never cost the report
        warnings.warn(f"wandb summary run failed: {type(err).__name__}: {err}", stacklevel=2)
        return None
