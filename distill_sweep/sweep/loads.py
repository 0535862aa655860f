"""Hydra's config files read once per sweep, not once per compose.

Planning composes one config per distinct set of group choices (sweep/compose.py's JobComposer): 42 for
Table 3, each reading and parsing the same twenty-odd YAML files (the primary config, its groups' options and
Hydra's own), which was the larger part of a compose. Hydra caches what it reads for one compose only
(`CachingConfigRepository`, made anew by each); `shared_loads` keeps the files' results across the
composes of a sweep and hands each compose its own deep copy, since a compose adopts and edits the nodes it
loads. A copy is what a fresh read would give: the files are read again by every process that runs a job.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hydra._internal.config_repository import ConfigRepository, IConfigRepository
from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigResult, ConfigSource


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
        return copy.deepcopy(self.cache[key])

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


@contextmanager
def shared_loads(loader: Any, cache: dict[Any, ConfigResult | None]) -> Iterator[None]:
    """Hydra's config loader (`ConfigLoaderImpl`) reading through `cache` while inside; as it was after."""
    repository = loader.repository
    loader.repository = SharedLoads(repository, cache)
    try:
        yield
    finally:
        loader.repository = repository
