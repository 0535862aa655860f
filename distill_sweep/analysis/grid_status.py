"""A grid's status: which of the jobs a sweep expects have a completed, a failed or no record. Pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from distill_sweep.analysis.frames import norm_spec
from distill_sweep.analysis.paper import norm_task


def job_key(task: Any, objective: Any, init_spec: Any, seed: Any) -> tuple[str, str, str, int]:
    """Normalised (task, objective, init spec, seed): how records and expected grid cells are matched."""
    return norm_task(task), str(objective), norm_spec(init_spec), int(seed)


def grid_status(
    records_df: pd.DataFrame, expected: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Split the expected jobs into (completed, failed, missing). A job with any completed record is
    completed; otherwise its newest record decides (failed -> failed); running or absent jobs are missing.
    A job that carries `hashes` (its result directories' names: the config hash's first 10 characters, and
    the first schema's for the same job) is matched on them, so jobs that differ only in teacher, student or
    layer map stay apart; otherwise on (task, objective, init_spec, seed). Entries are the caller's dicts."""
    latest: dict[Any, str] = {}
    if not records_df.empty:
        ordered = records_df.sort_values("started_at", na_position="first", key=lambda s: s.astype(str))
        for row in ordered.itertuples(index=False):
            for key in (job_key(row.task, row.objective, row.init_spec, row.seed), ("hash", str(row.config_hash)[:10])):
                if latest.get(key) != "completed":
                    latest[key] = str(row.status)
    completed, failed, missing = [], [], []
    for job in expected:
        statuses = {latest.get(key) for key in expected_keys(job)}
        if "completed" in statuses:
            completed.append(job)
        elif "failed" in statuses:
            failed.append(job)
        else:
            missing.append(job)
    return completed, failed, missing


def expected_keys(job: dict[str, Any]) -> list[Any]:
    """How an expected job is found among the records (see `grid_status`)."""
    if job.get("hashes"):
        return [("hash", h) for h in job["hashes"]]
    return [job_key(job["task"], job["objective"], job["init_spec"], job["seed"])]
