"""The sweeper's composed and typed jobs, handed to the jobs it launches in its own process.

The sweeper composes each job's config (once per set of group choices, sweep/compose.py) and types it
(job.identify, job.prepare.complete) to plan the grid. Hydra's basic launcher would compose each job again
(`load_sweep_config`) and the job would type its config again. Under the in-process launcher
(hydra/launcher=local, the default: sweep/launch.py's `InProcessLauncherImpl`) the sweeper hands over, for each
job of a batch it launches, the config Hydra's launcher would compose (`JobComposer.launch_config`) and the typed
job; the launcher runs the job from that config, and the job (cli/run_job.py) runs the typed job it finds under its
job number. A launcher that runs jobs elsewhere (local_parallel, slurm) composes and types each job there, once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig


@dataclass
class _Batch:
    """The batch being launched: its jobs' overrides, how to make a job's config, each typed job by job number."""

    overrides: set[tuple[str, ...]] = field(default_factory=set)
    make_config: Callable[[Sequence[str]], DictConfig] | None = None
    jobs: dict[int, Any] = field(default_factory=dict)


_now = _Batch()  # none outside handed_over


@contextlib.contextmanager
def handed_over(batch: Sequence[Sequence[str]], first_num: int, make_config: Callable[[Sequence[str]], DictConfig],
                jobs: Sequence[Any]) -> Iterator[None]:
    """While the launcher launches `batch` (its jobs numbered from `first_num`), each job's config (made by
    `make_config` when the launcher asks for it: one job's at a time) and its typed job (a prepared Job; a pack's:
    the list of its members') are there for it to take; whatever was not taken is dropped at the end."""
    global _now
    _now = _Batch({tuple(overrides) for overrides in batch}, make_config,
                  {first_num + i: job for i, job in enumerate(jobs) if job is not None})
    try:
        yield
    finally:
        _now = _Batch()


def config_of(overrides: Sequence[str]) -> DictConfig | None:
    """The config of the job of these overrides, if it is one of the batch being launched (made once), or None."""
    key = tuple(overrides)
    if key not in _now.overrides or _now.make_config is None:
        return None
    _now.overrides.discard(key)
    return _now.make_config(overrides)


def job_of(num: int) -> Any | None:
    """The typed job handed over for Hydra's job number `num` (taken: once), or None: the job types its config."""
    return _now.jobs.pop(num, None)
