"""What a tracker's run of a job holds besides its steps, for every tracker alike: its params (the job's config,
flat), its labels (records/flat.py), its key in a store shared by many jobs, and what a resumed run logged before.

A job killed or preempted and run again continues the run its earlier attempt started (one run per job), from its
checkpoint; the earlier attempt may have logged steps past that checkpoint. Those are not logged twice: a value is
logged only at a step past the last one its metric has in the run (wandb's rule for a resumed run). The earlier
attempt's values stand; on CPU the rerun computes the same ones bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distill_sweep.records.flat import as_text, flatten
from distill_sweep.records.hashing import digest
from distill_sweep.records.record import Record

SWEEP_TAG = "distill_sweep.sweep"  # the run of a sweep: a digest of the sweep's directory
JOB_TAG = "distill_sweep.job"  # the run of a job: a digest of the job's directory (one run per job)


def params_of(record: Record) -> dict[str, Any]:
    """The job's config as a run's params: every key of the record's config, flat (`optimizer.lr`)."""
    return flatten(record.config)


def text_params(record: Record) -> dict[str, str]:
    """`params_of` as text (MLflow's params are strings): strings as they are, the rest as JSON."""
    return {k: as_text(v) for k, v in params_of(record).items()}


def key_of(directory: Path | str) -> str:
    """A job's or a sweep's key in a store that many results directories may share: its directory (as the job
    states it: a job's is absolute, a sweep's as Hydra names it), digested."""
    return digest(str(directory))[:16]


def numbers(data: Mapping[str, Any]) -> dict[str, float]:
    """The values of `data` a tracker logs as metrics: the numbers (a bool or a string is no metric)."""
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


class Logged:
    """The last step each metric of a run has: `new` keeps only what is past it (see the module's docstring)."""

    def __init__(self, last: Mapping[str, int] | None = None) -> None:
        self.last: dict[str, int] = dict(last or {})

    def new(self, data: Mapping[str, float], step: int | None) -> dict[str, float]:
        if step is None:
            return dict(data)
        kept = {k: v for k, v in data.items() if step > self.last.get(k, -math.inf)}
        self.last.update({k: step for k in kept})
        return kept

    @property
    def step(self) -> int:
        """The last step logged (0 before any)."""
        return max(self.last.values(), default=0)
