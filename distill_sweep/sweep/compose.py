"""Composing a sweep's jobs: the config of each override list (cached per group choice), and a preset's expected
jobs for the report."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf, open_dict

try:  # Hydra 1.3 writes a job's override_dirname when it composes it; 1.4 resolves it from the task's overrides
    from hydra._internal.config_loader_impl import get_overrides_dirname
except ImportError:
    get_overrides_dirname = None

from distill_sweep.config.space import CONF_DIR, GROUPS, VERSION_BASE, group_options
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify, identify_plain
from distill_sweep.job.plain_config import plain_config
from distill_sweep.models.inits import init_spec
from distill_sweep.records.labels import seed_text
from distill_sweep.sweep import chain, plain_overrides
from distill_sweep.sweep.loads import SweepComposes, shared_loads


def split(overrides: Sequence[Override]) -> list[list[str]]:
    """Parsed overrides (with sweeps like `seed=1,2`) -> one override list per job, as Hydra's basic sweeper splits
    them, except that a delete given without a value stays one (`~key`): the sweeper writes it `~key=null`, which
    Hydra 1.3 deletes whatever the value, and 1.4 only where the value is null."""
    bare = {f"~{o.key_or_group}=null": f"~{o.key_or_group}" for o in overrides
            if o.is_delete() and o.value_type is None}
    return [[bare.get(item, item) for item in job] for job in BasicSweeper.split_arguments(list(overrides), None)[0]]


def expand(params: Sequence[str]) -> list[list[str]]:
    """Hydra override strings (with sweeps like `seed=1,2`) -> one override list per job."""
    return split(OverridesParser.create().parse_overrides(list(params)))


def expected_jobs(preset: str, extra_overrides: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The jobs of an experiment preset's grid, for the report: task, procedure, objective, init_spec, seed,
    and `hashes`, the names of the result directories the job's record can be in (today's and the first
    schema's), so that jobs differing only in teacher, student or layer map are told apart."""
    known = group_options("experiment")
    if preset not in known:
        raise ConfigError(f"unknown experiment preset {preset!r} (known: {', '.join(known)})")
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        base = [f"experiment={preset}", *extra_overrides]
        cfg = compose("config", overrides=base, return_hydra_config=True)
        params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.params or {}).items()]
        loader, shared = GlobalHydra.instance().config_loader(), SweepComposes()

        def load(groups: Sequence[str]) -> DictConfig:
            with shared_loads(loader, shared):
                return compose("config", overrides=list(groups), return_hydra_config=True)

        composer = JobComposer(load)
        idents, seen = [], set()
        for job in expand(params):
            ident = identify_plain(composer.plain([*base, *job]))
            if ident.digest in seen:  # e.g. procedure=finetune swept over objectives it ignores
                continue
            seen.add(ident.digest)
            idents.append((ident, [*base, *job]))
        # then the fine-tune grid on each distilled student (finetune_grid)
        chained = chain.plan(idents, composer, lambda ov: composer.choice(ov, "teacher"), identify)
        idents += [(job.ident, job.overrides) for job in chained]
    return [{"task": ident.task, "procedure": ident.procedure.name, "objective": ident.objective_name,
             "init_spec": init_spec(ident.settings.run.init), "seed": ident.seed,
             "seed_label": seed_text(ident.seed, ident.seeds),
             "hashes": [ident.out_dir.name, *(d.name for d in ident.legacy_dirs)]} for ident, _ in idents]


def sweep_composer(loader: Any, master: DictConfig) -> JobComposer:
    """The JobComposer of a running sweep: each group set composed as Hydra composes a sweep's job
    (`load_sweep_config` of the sweep's own config), the config files read once for all (sweep/loads.py)."""
    shared = SweepComposes()

    def load(groups: Sequence[str]) -> DictConfig:
        with shared_loads(loader, shared):
            return loader.load_sweep_config(master, list(groups))

    return JobComposer(load)


class JobComposer:
    """Each job's config, composing once per distinct set of config-group choices.

    Composing through Hydra is the slow part of planning a large grid (Table 3: 504 jobs), and only group
    choices (task=, objective=, ...) change what is composed; value overrides (seed=, init=,
    objective.alpha=) are applied after composition, which is Hydra's own order, so applying them to a
    copy of the composed config gives the same config (without the `hydra` node). `plain` gives that config
    as plain containers, set in plain dicts where that is the same (sweep/plain_overrides.py): what the sweeper
    identifies each job from.
    """

    def __init__(self, load: Callable[[Sequence[str]], DictConfig]) -> None:
        self.load = load
        self.parser = OverridesParser.create()
        self.parsed: dict[str, Override] = {}  # each override string's parse (parse())
        self.cache: dict[tuple[str, ...], DictConfig] = {}
        self.hydra_nodes: dict[tuple[str, ...], DictConfig] = {}  # each one's hydra node (launch_config())
        self.choices: dict[tuple[str, ...], dict[str, Any]] = {}  # the config-group options each one chose
        self.bases: dict[tuple[str, ...], plain_overrides.PlainBase | None] = {}  # each one made plain (plain())

    def _composed(self, parsed: Sequence[Any]) -> tuple[str, ...]:
        """The key of the composed config of these parsed overrides' group choices (composed on first use)."""
        groups = tuple(o.input_line for o in parsed if _at_composition(o.key_or_group))
        if groups not in self.cache:
            composed = self.load(groups)
            with open_dict(composed):
                hydra = composed.pop("hydra", None)  # jobs are identified without it; it is most of a copy's cost
            if hydra is not None:
                self.hydra_nodes[groups] = hydra
            choices = OmegaConf.select(hydra, "runtime.choices") if hydra is not None else None
            self.choices[groups] = OmegaConf.to_container(choices) if choices is not None else {}
            self.cache[groups] = composed
        return groups

    def parse(self, overrides: Sequence[str]) -> list[Override]:
        """Hydra's parse of each override string, once per distinct string (a grid's jobs share most of theirs,
        and the override grammar's parser is slow: it was a quarter of planning Table 3). An Override is read,
        never changed, by its users here."""
        for item in overrides:
            if item not in self.parsed:
                self.parsed[item] = self.parser.parse_overrides([item])[0]
        return [self.parsed[item] for item in overrides]

    def choice(self, overrides: Sequence[str], group: str) -> str:
        """The option of config group `group` a job's config chose (on the command line or in a preset)."""
        return str(self.choices[self._composed(self.parse(overrides))].get(group))

    def plain(self, overrides: Sequence[str]) -> dict[str, Any]:
        """The job's config as `job.plain_config(self(overrides))` gives it, made from the group set's plain config
        without an OmegaConf copy where that gives the same config (sweep/plain_overrides.py), else that way."""
        parsed = self.parse(overrides)
        groups = self._composed(parsed)
        if groups not in self.bases:
            self.bases[groups] = plain_overrides.plain_base(self.cache[groups])
        base = self.bases[groups]
        edits = [o for o in parsed if not _at_composition(o.key_or_group)]
        config = plain_overrides.apply(base, edits) if base is not None else None
        return config if config is not None else plain_config(self(overrides))

    def __call__(self, overrides: Sequence[str]) -> DictConfig:
        parsed = self.parse(overrides)
        groups = self._composed(parsed)
        cfg = copy.deepcopy(self.cache[groups])
        with open_dict(cfg):
            for o in parsed:
                if _at_composition(o.key_or_group):
                    continue
                if o.is_delete():
                    _delete(cfg, o.key_or_group)
                else:
                    OmegaConf.update(cfg, o.key_or_group, o.value(), merge=False, force_add=True)
        return cfg

    def launch_config(self, overrides: Sequence[str], master: DictConfig) -> DictConfig:
        """The config Hydra's launcher composes for a job of the sweep whose config is `master`
        (`load_sweep_config(master, overrides)`), made from the group set's composition as Hydra makes it: the
        value overrides applied by Hydra's own code, then the hydra node's two fields that depend on them (the
        task's overrides and the job's `override_dirname`). The in-process launcher runs a job from it
        (sweep/launch.py), so the job is composed once, here."""
        parsed = self.parse(overrides)
        groups = self._composed(parsed)
        cfg = copy.deepcopy(self.cache[groups])
        with open_dict(cfg):
            cfg.hydra = copy.deepcopy(self.hydra_nodes[groups])
        ConfigLoaderImpl._apply_overrides_to_config([o for o in parsed if not _at_composition(o.key_or_group)], cfg)
        task = [o for o in parsed if not o.is_hydra_override()]
        cfg.hydra.overrides.task = [o.input_line for o in task]
        if get_overrides_dirname is not None:
            dirname = cfg.hydra.job.config.override_dirname
            cfg.hydra.job.override_dirname = get_overrides_dirname(overrides=task, kv_sep=dirname.kv_sep,
                                                                   item_sep=dirname.item_sep,
                                                                   exclude_keys=dirname.exclude_keys)
        OmegaConf.copy_cache(from_config=master, to_config=cfg)
        return cfg


def _at_composition(key: str) -> bool:
    """Group choices, and Hydra's own settings (its node is set aside once composed, see `_composed`)."""
    return "/" in key or key in GROUPS or key.split(".")[0] == "hydra"


def _delete(cfg: DictConfig, key: str) -> None:
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    if node is not None and leaf in node:
        del node[leaf]
