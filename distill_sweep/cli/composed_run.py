"""One job run from the config the command line's check composed: the job's only composition.

`python -m distill_sweep [overrides]` (one job, no Hydra flag) is checked by composing its config and
identifying the job before torch is loaded (__main__.check_overrides). Hydra's `main` would compose the same
config again; instead that config and identity are handed to the job here, and `run_composed` does with them
what Hydra's own run does after composing (its `Hydra.run`): configure logging, call the
callbacks and run the task in `hydra.run.dir` through `hydra.core.utils.run_job` (the output directory, the
`.hydra/` files and the job's log file exactly as `main` makes them). A run with a Hydra flag (-m, --cfg,
--config-dir, ...) goes through Hydra's `main`, which handles those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hydra import initialize_config_dir
from hydra._internal.callbacks import Callbacks
from hydra._internal.utils import run_and_report
from hydra.core.global_hydra import GlobalHydra
from hydra.core.utils import configure_log, run_job
from hydra.types import HydraContext
from omegaconf import DictConfig

from distill_sweep.config.space import CONF_DIR, VERSION_BASE

# Hydra's main names the job after the module of its task function (cli/run_job.py): `hydra.job.name`, which
# names the job's log file (`run_job.log`). The check composes with this name too, so both paths write the same.
JOB_NAME = "run_job"


def run_composed(cfg: DictConfig, task: Callable[[DictConfig], Any]) -> Any:
    """Run `task` on `cfg` (composed with its hydra node and `hydra.mode=RUN`, as __main__'s check does) as Hydra's
    main runs its task function; returns its return value, and reports a failure as Hydra's main does."""
    return run_and_report(lambda: _run(cfg, task))


def _run(cfg: DictConfig, task: Callable[[DictConfig], Any]) -> Any:
    configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)
    callbacks = Callbacks(cfg)
    callbacks.on_run_start(config=cfg, config_name="config")
    with initialize_config_dir(config_dir=CONF_DIR, job_name=JOB_NAME, **VERSION_BASE):
        context = HydraContext(config_loader=GlobalHydra.instance().config_loader(), callbacks=callbacks)
        ret = run_job(hydra_context=context, task_function=task, config=cfg, job_dir_key="hydra.run.dir",
                      job_subdir_key=None, configure_logging=True)
    callbacks.on_run_end(config=cfg, config_name="config", job_return=ret)
    return ret.return_value  # re-raises the task's exception, as Hydra's run does
