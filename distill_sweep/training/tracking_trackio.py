"""logger=trackio: one Trackio run per job (per pack member), grouped by sweep, continued when the job resumes;
local and offline (Trackio's SQLite database, one per project).

Trackio reads its directory once, when it is first imported: TRACKIO_DIR where it is set, else this module points
it at `<results_dir>/trackio` for that import. A process whose Trackio was imported for another directory refuses
a job of this one (a warning, no tracking) rather than log it elsewhere. A job's run is named after the job and a
digest of its directory, and found again by that name when the job runs again (`resume="allow"`). Its config holds
the params (the job's config, flat: `optimizer.lr`) and the labels MLflow's tags hold, as `tags.<name>`
(records/flat.run_labels).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from pathlib import Path
from typing import Any

from distill_sweep.records.flat import run_labels
from distill_sweep.records.record import Record
from distill_sweep.training.run_log import Logged, key_of, numbers, params_of

ENV = "TRACKIO_DIR"
STORE = "trackio"  # under the results directory: the default directory
_IMPORT = threading.Lock()


def trackio_dir(results_dir: Path) -> Path:
    """Where a job of `results_dir` logs: TRACKIO_DIR, else `<results_dir>/trackio`."""
    return Path(os.environ.get(ENV) or results_dir / STORE)


def run_name(name: str, job_dir: Path) -> str:
    """The job's run: its readable name and its directory's key (two results directories may hold the job)."""
    return f"{name}-{key_of(job_dir)[:8]}"


class TrackioRun:
    """A job's Trackio run, created or continued (see the module's docstring)."""

    def __init__(self, *, project: str, record: Record, job_dir: Path, results_dir: Path, group: str | None,
                 name: str) -> None:
        trackio = _trackio(trackio_dir(results_dir))
        from trackio.sqlite_storage import SQLiteStorage

        self.project, self.name = project, run_name(name, job_dir)
        again = record.attempts > 1  # a first attempt starts a run of its own (tracking_mlflow.py says why)
        last: dict[str, int] = {}
        for row in SQLiteStorage.get_logs(project, self.name) if again else []:  # an earlier attempt's steps
            for key in row.keys() - {"step", "timestamp"}:
                last[key] = max(last.get(key, row["step"]), row["step"])
        self.logged = Logged(last)
        config = {**params_of(record), **{f"tags.{k}": v for k, v in run_labels(record).items()}}
        with contextlib.redirect_stdout(io.StringIO()):  # its banner and dashboard hints, at every run
            self.run = trackio.init(project=project, name=self.name, group=group, config=config,
                                    resume="allow" if again else "never", auto_log_cpu=False, auto_log_gpu=False,
                                    embed=False)
        self.run_id: str | None = self.name
        self.run_dir: str | None = str(trackio.utils.TRACKIO_DIR)

    def log(self, data: dict[str, Any], step: int | None) -> None:
        metrics = self.logged.new(numbers(data), step)
        if metrics:
            self.run.log(metrics, step=step)
            self._flush()

    def _flush(self) -> None:
        """Written now: Trackio's own thread writes every half second, and what it still held when the job was
        killed would be lost for good where it came before the checkpoint the job resumes from. (Its private
        flush, under its own lock; a Trackio without them is left to its thread.)"""
        flush, lock = getattr(self.run, "_flush_queues_inline", None), getattr(self.run, "_client_lock", None)
        if flush is not None and lock is not None:
            with lock:
                flush()

    def summary(self, data: dict[str, Any]) -> None:
        """The job's summary (its best and final primary metric): logged at its last step."""
        self.log(data, self.logged.step)

    def finish(self, status: str) -> None:
        del status  # a Trackio run has no status
        with contextlib.redirect_stdout(io.StringIO()):
            self.run.finish()


def _trackio(directory: Path) -> Any:
    """Trackio, imported to write to `directory`; RuntimeError when this process imported it for another one."""
    with _IMPORT:
        if "trackio" not in sys.modules:
            before = os.environ.get(ENV)
            os.environ[ENV] = str(directory)  # read once, by its import; not handed on to processes started later
            try:
                import trackio
            finally:
                if before is None:
                    del os.environ[ENV]
        import trackio
    if Path(trackio.utils.TRACKIO_DIR) != directory:
        raise RuntimeError(f"Trackio was imported in this process for {trackio.utils.TRACKIO_DIR}, not {directory} "
                           f"(one directory per process: set {ENV})")
    return trackio
