"""Sweep expansion and the skip-completed sweeper.

`python -m distill_sweep ... -m` uses `SkipCompletedSweeper` (conf: hydra/sweeper=skip_completed): it
expands the grid like Hydra's basic sweeper, composes every job's config, validates them all before
launching anything (one bad job = one clear line, nothing submitted), drops jobs whose completed
record already exists, and launches the rest. With `+dry_run=true` it prints the plan and launches nothing.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from distill_sweep import results
from distill_sweep.errors import ConfigError

log = logging.getLogger("distill_sweep")


def job_identity(cfg: DictConfig) -> dict[str, Any]:
    """Who a job is and where its record lives, without loading anything (works offline)."""
    from distill_sweep.models import init_dirname, init_spec
    from distill_sweep.train import _abs

    digest = results.config_hash(cfg)
    directory = results.job_dir(_abs(cfg.results_dir), cfg, init_dirname(cfg.init), digest)
    return {"task": str(cfg.task.name), "objective": str(cfg.objective.name), "init_spec": init_spec(cfg.init),
            "seed": int(cfg.seed), "config_hash": digest, "dir": directory}


def expand(params: Sequence[str]) -> list[list[str]]:
    """Hydra override strings (with sweeps like `seed=1,2`) -> one override list per job."""
    overrides = OverridesParser.create().parse_overrides(list(params))
    return BasicSweeper.split_arguments(overrides, None)[0]


def expected_jobs(preset: str, extra_overrides: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The (task, objective, init_spec, seed) cells of an experiment preset's grid, for the report."""
    from hydra import compose, initialize_config_dir

    from distill_sweep.models import init_spec
    from distill_sweep.train import CONF_DIR

    known = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("*.yaml"))
    if preset not in known:
        raise ConfigError(f"unknown experiment preset {preset!r} (known: {', '.join(known)})")
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        base = [f"experiment={preset}", *extra_overrides]
        cfg = compose("config", overrides=base, return_hydra_config=True)
        params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.params or {}).items()]
        cells = []
        for job in expand(params):
            values = dict(o.split("=", 1) for o in job)
            cells.append({
                "task": values.get("task", str(cfg.task.name)),
                "objective": values.get("objective", str(cfg.objective.name)),
                "init_spec": init_spec(values.get("init", cfg.init)),
                "seed": int(values.get("seed", cfg.seed)),
            })
    return cells


def estimate_cost(jobs: list[DictConfig], done_records: list[dict[str, Any]]) -> str:
    """Training work in sample-passes, and hours at the throughput of records already completed."""
    passes = 0.0
    for cfg in jobs:
        size = cfg.task.get("train_size") or cfg.task.recipe.get("num_train") or 0
        epochs = int(cfg.epochs or cfg.task.recipe.epochs)
        passes += float(size) * epochs * len(cfg.objective.stages)
    line = f"estimated cost: {passes:.3g} training sample-passes"
    speeds = [r["samples_per_s"] for r in done_records if r.get("samples_per_s")]
    if speeds:
        speed = sorted(speeds)[len(speeds) // 2]
        line += f", ~{passes / speed / 3600:.2f} job-hours at the median {speed:.0f} samples/s of completed jobs"
    else:
        line += " (no completed record yet to convert it to hours)"
    return line


class SkipCompletedSweeperImpl(BasicSweeper):
    """Hydra's basic sweeper + up-front validation, skip-completed, and dry run."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)

    def sweep(self, arguments: list[str]) -> Any:
        from distill_sweep.train import prepare

        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        all_jobs = self.split_arguments(parser.parse_overrides(self._parse_config() + arguments), None)[0]
        dry_run = bool(OmegaConf.select(self.config, "dry_run", default=False))
        loader = self.hydra_context.config_loader

        todo, skipped, configs = [], [], []
        for overrides in all_jobs:
            cfg = loader.load_sweep_config(self.config, list(overrides))
            ident = job_identity(cfg)
            if not dry_run:
                try:
                    prepare(cfg)
                except ConfigError as err:
                    print(f"distill_sweep: error in job [{' '.join(overrides)}]: {err}", file=sys.stderr)
                    sys.exit(2)
            record = results.completed_record(ident["dir"])
            if record is not None:
                skipped.append(record)
            else:
                todo.append(overrides)
                configs.append(cfg)

        print(f"distill_sweep: {len(all_jobs)} jobs in the grid, {len(skipped)} already completed, "
              f"{len(todo)} to run", flush=True)
        if dry_run:
            for overrides in todo:
                print("  would run: " + " ".join(overrides))
            print(estimate_cost(configs, skipped))
            return []
        if not todo:
            return []

        self.overrides = list(self.split_overrides_to_chunks(todo, self.max_batch_size))
        self.batch_index = 0
        returns = []
        initial_job_idx = 0
        while not self.is_done():
            batch = self.get_job_batch()
            job_returns = self.launcher.launch(batch, initial_job_idx=initial_job_idx)
            # Unlike Hydra's basic sweeper, a failed job does not stop the following batches: its record
            # says "failed"; the sweep exits 1 at the end if any job failed.
            returns.append(job_returns)
            initial_job_idx += len(batch)
        failed = [r for batch in returns for r in batch if r.status.name == "FAILED"]
        if failed:
            print(f"distill_sweep: {len(failed)} of {len(todo)} jobs failed (see their result.json)", file=sys.stderr)
            _ = failed[0].return_value  # re-raises the first failure: Hydra reports it and exits 1
        return returns
