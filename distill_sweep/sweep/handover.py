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
from collections.abc import Iterator, Sequence
from typing import Any

from omegaconf import DictConfig

# the batch being launched: each job's config (by its overrides) and its typed job (by its Hydra job number)
_configs: dict[tuple[str, ...], DictConfig] = {}
_jobs: dict[int, Any] = {}


@contextlib.contextmanager
def handed_over(batch: Sequence[Sequence[str]], first_num: int, configs: Sequence[DictConfig],
                jobs: Sequence[Any]) -> Iterator[None]:
    """While the launcher launches `batch` (its jobs numbered from `first_num`), each job's config and typed job
    (a prepared Job; a pack's: the list of its members') are there for it to take; whatever was not taken is
    dropped at the end."""
    _configs.update({tuple(overrides): cfg for overrides, cfg in zip(batch, configs, strict=True)})
    _jobs.update({first_num + i: job for i, job in enumerate(jobs)})
    try:
        yield
    finally:
        _configs.clear()
        _jobs.clear()


def config_of(overrides: Sequence[str]) -> DictConfig | None:
    """The config handed over for the job of these overrides (taken: once), or None."""
    return _configs.pop(tuple(overrides), None)


def job_of(num: int) -> Any | None:
    """The typed job handed over for Hydra's job number `num` (taken: once), or None: the job types its config."""
    return _jobs.pop(num, None)
