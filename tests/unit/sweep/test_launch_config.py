"""The config the in-process launcher runs a sweep's job from is the one Hydra's launcher composes for it.

`JobComposer.launch_config` makes a job's config from its group set's composition (sweep/compose.py) instead of
composing the job again; each test compares it with Hydra's own `load_sweep_config(master, overrides)`, which is
what Hydra's basic launcher calls for every job.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

import distill_sweep.cli.run_job  # noqa: F401 - the config's resolvers (pkg_model_dir, config_groups)
from distill_sweep.config.space import CONF_DIR, VERSION_BASE
from distill_sweep.sweep.compose import sweep_composer

JOBS = [
    ["seed=1"],
    ["seed=2", "objective=att_kl", "task=toy", "+pack_file='/a dir/pack-1.json'"],  # a pack's job (a quoted path)
    ["~task.subset_seed", "objective=vanilla_kd", "optimizer.lr=1e-3", "+prepare_only=true"],  # a delete, a build
    ["experiment=demo", "hydra.job.chdir=true", "seed=3", "init=[1,5,9]"],  # a preset, a hydra value, a list
    ["objective=att_kl", "++objective.alpha=0.25", "procedure=finetune"],
]


@pytest.fixture
def sweep() -> Iterator[tuple[Any, Any]]:
    """Hydra's loader, and a sweep's own config composed as Hydra's multirun composes it (with the preset the
    command line chose: every job of a sweep has it too, and Hydra 1.4 refuses a job that changes the sweeper)."""
    with initialize_config_dir(config_dir=CONF_DIR, job_name="run_job", **VERSION_BASE):
        loader = GlobalHydra.instance().config_loader()

        def master(overrides: list[str]) -> DictConfig:
            preset = [o for o in overrides if o.startswith("experiment=")]
            return loader.load_configuration("config", overrides=["hydra.sweep.dir=/tmp/sweep", "seed=1,2", *preset],
                                             run_mode=RunMode.MULTIRUN)

        yield loader, master


def _text(cfg: DictConfig) -> tuple[str, str]:
    """The config (less its hydra node) and its hydra node as text that keeps the keys' order and the values' types."""
    plain = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(plain, dict)
    hydra = plain.pop("hydra")
    return json.dumps(plain), json.dumps(hydra)


@pytest.mark.parametrize("overrides", JOBS, ids=lambda ov: " ".join(ov)[:40])
def test_a_launch_config_is_the_config_hydras_launcher_composes(sweep: Any, overrides: list[str]) -> None:
    loader, master_of = sweep
    master = master_of(overrides)
    ours = sweep_composer(loader, master).launch_config(overrides, master)
    hydras = loader.load_sweep_config(master, overrides)
    assert _text(ours) == _text(hydras)
    # what a job's .hydra/ files and its directory name are made from
    assert list(ours.hydra.overrides.task) == [o for o in overrides if not o.startswith("hydra.")]
    assert ours.hydra.job.override_dirname == hydras.hydra.job.override_dirname
    # the flags Hydra's composition sets: struct (a key not in the config needs +), a writable hydra node
    assert OmegaConf.is_struct(ours) and not OmegaConf.is_readonly(ours.hydra)


def test_the_jobs_of_one_group_set_are_composed_once_and_do_not_share_nodes(sweep: Any) -> None:
    loader, master_of = sweep
    master = master_of([])
    composer = sweep_composer(loader, master)
    first, second = (composer.launch_config(["objective=att_kl", f"seed={s}"], master) for s in (1, 2))
    assert len(composer.cache) == 1  # one composition for both
    first.optimizer.lr = 0.5  # a job that changed its config would not change the next one's
    assert second.optimizer.lr != 0.5 and first.hydra.overrides.task[-1] == "seed=1"
    assert second.hydra.overrides.task[-1] == "seed=2"
