"""Launching: the teacher-output stores to build before the grid, one process per job under launchers that
start several, and the in-process launcher that runs the jobs from the sweeper's configs (sweep/handover.py)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from distill_sweep.records import files
from distill_sweep.sweep import handover
from distill_sweep.teachers.output_plan import StoreRequest, store_request


def store_builds(jobs: Sequence[Any], overrides: Sequence[Sequence[str]], cache_dir: Path | None = None
                 ) -> list[list[str]]:
    """The sweeper's build jobs: for each teacher-output store (an encoder's logits, a decoder's top-k logits)
    that two or more of `jobs` (identities, with their `overrides`) will read and that is not built yet, the
    first such job's overrides run with `prepare_only`: one job trains or fine-tunes the teacher and builds the
    store while the others are not yet holding a GPU each, waiting on its lock."""
    groups: dict[StoreRequest, list[list[str]]] = {}
    for ident, ov in zip(jobs, overrides, strict=True):
        request = store_request(ident)
        if request is None or request.prepared(Path(cache_dir or files.absolute(ident.settings.run.cache_dir))):
            continue
        groups.setdefault(request, []).append(list(ov))
    return [[*members[0], "+prepare_only=true"] for members in groups.values() if len(members) > 1]


# SLURM launcher keys that start several processes per job: a data-parallel distillation sets them, and the
# fine-tune jobs that follow it run in one process each (their procedure refuses several)
PER_JOB_PROCESSES = ("nodes", "tasks_per_node", "gpus_per_node", "gpus_per_task")


def processes_per_job(launcher: Any) -> int:
    """How many processes a launcher starts for each job: nodes x tasks_per_node (submitit), else 1."""
    params = getattr(launcher, "params", None)
    if not isinstance(params, dict):
        return 1
    return int(params.get("nodes") or 1) * int(params.get("tasks_per_node") or 1)


@contextlib.contextmanager
def one_process_per_job(launcher: Any) -> Iterator[None]:
    """While the block runs, a submitit launcher's jobs get one node, one task and at most one GPU."""
    params = getattr(launcher, "params", None)
    if not isinstance(params, dict):  # the local launchers start one process per job anyway
        yield
        return
    saved = {k: params[k] for k in PER_JOB_PROCESSES if k in params}
    changed = {k: 1 for k, v in saved.items() if isinstance(v, int) and v > 1}
    if changed:
        print("distill_sweep: the fine-tune jobs run as one process each ("
              + ", ".join(f"hydra.launcher.{k}=1" for k in changed) + ")", flush=True)
    params.update(changed)
    try:
        yield
    finally:
        params.update(saved)


class _HandedOverConfigs:
    """Hydra's config loader, except that a job's config the sweeper handed over is not composed again."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        cfg = handover.config_of(sweep_overrides)
        return cfg if cfg is not None else self.loader.load_sweep_config(master_config, sweep_overrides)

    def __getattr__(self, name: str) -> Any:  # everything else is the loader's own
        return getattr(self.loader, name)


class InProcessLauncherImpl(BasicLauncher):
    """Hydra's basic launcher (the sweep's jobs one after the other, in this process), reading each job's config
    from the sweeper where it handed one over (hydra/launcher=local; plugins/distill_sweep_launcher.py)."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        # the context as given but for its loader (Hydra 1.4's has more fields than 1.3's)
        context = dataclasses.replace(hydra_context, config_loader=_HandedOverConfigs(hydra_context.config_loader))
        super().setup(hydra_context=context, task_function=task_function, config=config)
