"""Experiment tracking with wandb: one run per job, grouped by sweep. Never fails a job.

Every call into wandb is wrapped: an error becomes a warning and tracking switches itself off. Runs are created
with `reinit="create_new"` and logged through their own object, so the members of a pack (one process, one run
each, sweep/packs.py) log side by side.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

from distill_sweep.config.schema import LoggerSettings
from distill_sweep.training.distributed import is_main

log = logging.getLogger(__name__)


class Tracker:
    def __init__(self, logger: LoggerSettings, config: dict[str, Any], job_dir: Path, *, group: str | None,
                 name: str, tags: list[str], resume_id: str | None = None) -> None:
        """`config`: the job's config as its record holds it (what the run shows as its config)."""
        self.run: Any = None
        mode = str(logger.mode)
        if mode == "disabled" or logger.name == "none" or not is_main():  # one run per job: rank 0's
            return
        try:
            os.environ.setdefault("WANDB_SILENT", "true")
            import wandb

            run_dir = Path(logger.dir).expanduser() if logger.dir else job_dir
            run_dir.mkdir(parents=True, exist_ok=True)
            self.run = wandb.init(
                project=str(logger.project), entity=logger.entity, mode=mode, dir=str(run_dir),
                group=group, name=name, tags=tags, id=resume_id, resume="allow" if resume_id else None,
                config=config, reinit="create_new",
            )
        except Exception as err:  # tracking must never stop training
            self._disable("init", err)

    @property
    def run_id(self) -> str | None:
        return getattr(self.run, "id", None)

    @property
    def run_dir(self) -> str | None:
        return getattr(self.run, "dir", None)

    def log(self, data: dict[str, Any], step: int | None = None) -> None:
        if self.run is None:
            return
        try:
            self.run.log(data, step=step)
        except Exception as err:
            self._disable("log", err)

    def summary(self, data: dict[str, Any]) -> None:
        if self.run is None:
            return
        try:
            self.run.summary.update(data)
        except Exception as err:
            self._disable("summary", err)

    def finish(self, exit_code: int = 0) -> None:
        if self.run is None:
            return
        try:
            self.run.finish(exit_code=exit_code)
        except Exception as err:
            self._disable("finish", err)
        self.run = None

    def _disable(self, where: str, err: Exception) -> None:
        warnings.warn(f"wandb {where} failed, tracking disabled for this job: {type(err).__name__}: {err}",
                      stacklevel=3)
        self.run = None


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
