"""A sweep's composes sharing what does not change between them (`shared_loads`, around each compose).

Planning composes one config per distinct set of group choices (sweep/compose.py's JobComposer): 42 for Table 3,
which became most of planning's time once each job's values were set in plain dicts. Within a sweep:

* each config file is read and parsed once (`SharedLoads`): Hydra caches what it reads for one compose only
  (`CachingConfigRepository`, made anew by each), and a compose adopts and edits the nodes it loads, so each
  compose gets its own deep copy (`CopiedResult`, copied when first read): what a fresh read would give;
* each compose's merge resumes from a copy of the longest defaults-list prefix merged before
  (`MergedPrefixes`): the lists agree up to the first group the sweep varies;
* Hydra's map of group choices for interpolated defaults (`- x: ${y}`) is made only where a defaults list has
  one (`_interpolation_map_if_read`).

Each replaces a part of Hydra 1.3's loader (pinned in pyproject.toml) for the duration of a compose only, and
tests/unit/sweep/test_fast_planning.py compares the configs with Hydra's own. Under another Hydra (`make
test-hydra14`) a sweep composes through Hydra's loader as it is (`SHARED` is false): slower, never different.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import hydra
from hydra._internal import defaults_list
from hydra._internal.config_repository import ConfigRepository, IConfigRepository
from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.default_element import InputDefault, ResultDefault
from hydra.core.object_type import ObjectType
from hydra.errors import ConfigCompositionException
from hydra.plugins.config_source import ConfigResult, ConfigSource
from omegaconf import DictConfig, OmegaConf, flag_override
from omegaconf.errors import OmegaConfBaseException


class CopiedResult(ConfigResult):
    """A deep copy of a loaded config's result, its config copied when first read: a compose reads every
    file's header (its package) but merges only the files after the prefix it resumes from (MergedPrefixes)."""

    def __init__(self, loaded: ConfigResult) -> None:  # noqa: D107 - the dataclass's fields, copied
        self.__dict__.update(provider=loaded.provider, path=loaded.path, header=copy.deepcopy(loaded.header),
                             defaults_list=copy.deepcopy(loaded.defaults_list),
                             is_schema_source=loaded.is_schema_source, _loaded=loaded.config, _config=None)

    @property  # type: ignore[override]
    def config(self) -> Any:
        if self._config is None:
            self._config = copy.deepcopy(self._loaded)
        return self._config

    @config.setter
    def config(self, value: Any) -> None:
        self._config = value


class SharedLoads(IConfigRepository):
    """A config repository whose loads are kept in `cache`, keyed by the search path and the config's path (a
    compose that changes its search path, `hydra.searchpath`, reads from its own sources)."""

    def __init__(self, delegate: IConfigRepository, cache: dict[Any, ConfigResult | None]) -> None:
        self.delegate, self.cache = delegate, cache

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedLoads:
        # Each compose copies its repository so that re-pointing its sources (`hydra.searchpath`) leaves the
        # loader's as it was; the copy keeps the one cache. Hydra's ConfigRepository re-points by making a new
        # list of sources, so a shallow copy leaves the loader's list alone (the deep copy was a tenth of a
        # compose); another repository is copied deep, as Hydra does.
        shallow = type(self.delegate) is ConfigRepository
        return SharedLoads(copy.copy(self.delegate) if shallow else copy.deepcopy(self.delegate, memo), self.cache)

    def load_config(self, config_path: str) -> ConfigResult | None:
        key = (tuple((s.provider, s.path) for s in self.delegate.get_sources()), config_path)
        if key not in self.cache:
            self.cache[key] = self.delegate.load_config(config_path)
        loaded = self.cache[key]
        return None if loaded is None else CopiedResult(loaded)

    def get_schema_source(self) -> ConfigSource:
        return self.delegate.get_schema_source()

    def initialize_sources(self, config_search_path: ConfigSearchPath) -> None:
        self.delegate.initialize_sources(config_search_path)

    def group_exists(self, config_path: str) -> bool:
        return self.delegate.group_exists(config_path)

    def config_exists(self, config_path: str) -> bool:
        return self.delegate.config_exists(config_path)

    def get_group_options(self, group_name: str, results_filter: ObjectType | None = ObjectType.CONFIG) -> list[str]:
        return self.delegate.get_group_options(group_name, results_filter)

    def get_sources(self) -> list[ConfigSource]:
        return self.delegate.get_sources()


@dataclass
class SweepComposes:
    """What the composes of one sweep share: the files read and the merged list prefixes."""

    loads: dict[Any, ConfigResult | None] = field(default_factory=dict)
    merges: MergedPrefixes | None = None


@contextmanager
def shared_loads(loader: Any, shared: SweepComposes) -> Iterator[None]:
    """Hydra's config loader (`ConfigLoaderImpl`) reading and merging through `shared` while inside; as it
    was after. Under a Hydra other than 1.3 the loader is left as it is."""
    if not SHARED:
        yield
        return
    repository = loader.repository
    if shared.merges is None or shared.merges.loader is not loader:
        shared.merges = MergedPrefixes(loader)
    loader.repository = SharedLoads(repository, shared.loads)
    loader._compose_config_from_defaults_list = shared.merges  # an instance attribute: the class's is untouched
    interpolation_map = defaults_list._create_interpolation_map
    defaults_list._create_interpolation_map = _interpolation_map_if_read
    try:
        yield
    finally:
        loader.repository = repository
        del loader._compose_config_from_defaults_list
        defaults_list._create_interpolation_map = interpolation_map


# the loader parts replaced here are Hydra 1.3's (1.4 has neither this function nor the same merge)
_HYDRAS_INTERPOLATION_MAP = getattr(defaults_list, "_create_interpolation_map", None)
SHARED = hydra.__version__.startswith("1.3.") and _HYDRAS_INTERPOLATION_MAP is not None


def _interpolation_map_if_read(overrides: Any, defaults: list[InputDefault], self_added: bool) -> Any:
    """Hydra's map of the group choices for the interpolated entries of a defaults list (`- x: ${y}`), made
    only where the list has one: Hydra makes it for every list, read or not (a fifth of a compose), and reads it
    only to resolve those entries."""
    if not any(d.is_interpolation() for d in defaults):
        return None
    return _HYDRAS_INTERPOLATION_MAP(overrides, defaults, self_added)


class MergedPrefixes:
    """Hydra's merge of a compose's defaults list (`ConfigLoaderImpl._compose_config_from_defaults_list`, the
    larger part of a compose), resuming from a copy of the merge of the longest list prefix merged before.

    The composes of a grid differ in a few group choices: their defaults lists agree up to the first group a
    sweep varies (Hydra's own configs, then the procedure, teacher and student), and a merge is a fold over the
    list, so the config merged from the same prefix (each entry's config path, package and role) is the same.
    One copy is kept where a list first parts from the one before it; the merge of the rest, the removal of
    the `defaults` keys and the errors are Hydra's, as in Hydra 1.3's function (pinned in pyproject.toml).
    """

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.merged: dict[tuple[Any, ...], DictConfig] = {}  # a list prefix's key -> its merge (never handed out)
        self.last: tuple[Any, ...] = ()

    def __call__(self, defaults: list[ResultDefault], repo: IConfigRepository) -> DictConfig:
        sources = tuple((s.provider, s.path) for s in repo.get_sources())  # where each path is read from
        keys = tuple((sources, d.config_path, d.package, d.parent, d.is_self, d.primary) for d in defaults)
        start = next((n for n in range(len(keys), 0, -1) if keys[:n] in self.merged), 0)
        common = next((n for n, (a, b) in enumerate(zip(keys, self.last)) if a != b), min(len(keys), len(self.last)))
        self.last = keys
        cfg = copy.deepcopy(self.merged[keys[:start]]) if start else OmegaConf.create()
        cfg._set_flag("no_deepcopy_set_nodes", True)  # Hydra's flag_override over the loop
        for n in range(start, len(defaults)):
            if n == common and n > start:
                self.merged[keys[:n]] = copy.deepcopy(cfg)
            default = defaults[n]
            loaded = self.loader._load_single_config(default=default, repo=repo)
            try:
                cfg.merge_with(loaded.config)
            except OmegaConfBaseException as e:
                raise ConfigCompositionException(
                    f"In '{default.config_path}': {type(e).__name__} raised while composing config:\n{e}"
                ).with_traceback(sys.exc_info()[2]) from e
        cfg._set_flag("no_deepcopy_set_nodes", None)
        _strip_defaults(cfg)
        return cfg


def _strip_defaults(cfg: Any) -> None:
    """Hydra's removal of the remaining defaults lists from all nodes (in `_compose_config_from_defaults_list`)."""
    if isinstance(cfg, DictConfig):
        if cfg._is_missing() or cfg._is_none():
            return
        with flag_override(cfg, ["readonly", "struct"], False):
            if cfg._get_flag("HYDRA_REMOVE_TOP_LEVEL_DEFAULTS"):
                cfg._set_flag("HYDRA_REMOVE_TOP_LEVEL_DEFAULTS", None)
                cfg.pop("defaults", None)
        for _key, value in cfg.items_ex(resolve=False):
            _strip_defaults(value)
