"""A job's value overrides (seed=, init=, objective.alpha=) applied to the plain config of its group choices.

JobComposer (sweep/compose.py) composes one config per distinct set of group choices; each job then sets its own
values in a copy. Done on the composed config (an OmegaConf deep copy, `OmegaConf.update`, then
`job.plain_config`, which resolves every interpolation) that was most of a large grid's planning time. Here
the group set's config is made plain once (`PlainBase`) and each job's values are set in a copy of plain
dicts, exactly as `OmegaConf.update(cfg, key, value, merge=False, force_add=True)` would set them, in the
cases where that is provably the same config:

* the composed config is untyped (no structured-config node, no typed value, nothing read-only), so
  OmegaConf would check no type on assignment either (the job's settings are checked in `job.identify`,
  for every job, whichever way its config was made);
* its interpolations call only resolvers that read no other key (`PURE_RESOLVERS`), and no override names a
  key any interpolation mentions or passes through an interpolated node, so resolving before or after the
  edit gives the same values;
* each value is a plain one (None, bool, int, float, str, and lists and dicts of them) that OmegaConf stores
  as given: no string holding an interpolation or the missing-value marker.

Anything else returns None and the job's config is made the OmegaConf way (compose.JobComposer.__call__).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, ListConfig
from omegaconf.nodes import AnyNode

from distill_sweep.job.plain_config import plain_config

# Resolvers whose value depends on their arguments alone (an environment variable, a packaged model's path):
# resolved once per group set, they give what they would give per job.
PURE_RESOLVERS = frozenset({"oc.env", "pkg_model_dir"})
_RESOLVER = re.compile(r"\$\{\s*([^\s:}$]+)\s*:")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MISSING = "???"  # OmegaConf's missing-value marker


@dataclass(frozen=True)
class PlainBase:
    """The plain, resolved config of one set of group choices, and what its interpolations mention."""

    config: dict[str, Any]  # job.plain_config of the composed config
    interpolated: frozenset[tuple[str, ...]]  # the key paths of its interpolated values
    mentioned: frozenset[str]  # every word of their text: the keys they may read


def plain_base(composed: DictConfig) -> PlainBase | None:
    """The group set's plain config, or None where edits on it could differ from OmegaConf's (see above)."""
    interpolations: dict[tuple[str, ...], str] = {}
    if not _untyped(composed, (), interpolations):
        return None
    texts = list(interpolations.values())
    if any(name not in PURE_RESOLVERS for text in texts for name in _RESOLVER.findall(text)):
        return None
    try:
        config = plain_config(composed)
    except Exception:  # noqa: BLE001 - an interpolation that fails: each job fails the OmegaConf way, as it did
        return None
    return PlainBase(config, frozenset(interpolations), frozenset(w for t in texts for w in _WORD.findall(t)))


def apply(base: PlainBase, overrides: Sequence[Override]) -> dict[str, Any] | None:
    """A copy of the base config with these value overrides (and deletions, `~key`) applied in order, as
    compose.JobComposer.__call__ applies them; None where that cannot be shown to be the same."""
    config = _copy(base.config)
    for o in overrides:
        path = tuple(o.key_or_group.split("."))
        if (not all(path) or any("[" in p or "]" in p for p in path) or any(p in base.mentioned for p in path)
                or any(path[:i] in base.interpolated for i in range(1, len(path)))):
            return None
        if o.is_delete():
            if not _delete(config, path):
                return None
            continue
        value = o.value()
        if not _plain_value(value) or not _set(config, path, _copy(value)):
            return None
    return config


def _untyped(node: Any, path: tuple[str, ...], interpolations: dict[tuple[str, ...], str]) -> bool:
    """Every node untyped and writable (the composed config's flags: struct at most); collects the
    interpolations' text by key path."""
    flags = node._metadata.flags or {}
    if any(flag != "struct" for flag, on in flags.items() if on):
        return False
    if isinstance(node, DictConfig):
        meta = node._metadata
        if (meta.object_type is not dict or meta.ref_type is not Any or meta.key_type is not Any
                or meta.element_type is not Any):
            return False
        if node._is_missing() or node._is_none() or node._is_interpolation():
            return False
        return all(_untyped(node._get_node(k), (*path, str(k)), interpolations) for k in node.keys())
    if isinstance(node, ListConfig):
        meta = node._metadata
        if meta.object_type is not list or meta.ref_type is not Any or meta.element_type is not Any:
            return False
        if node._is_missing() or node._is_none() or node._is_interpolation():
            return False
        return all(_untyped(node._get_node(i), (*path, str(i)), interpolations) for i in range(len(node)))
    if type(node) is not AnyNode or node._metadata.ref_type is not Any:
        return False
    if node._is_interpolation():
        interpolations[path] = str(node._value())
    elif isinstance(node._value(), str) and "${" in node._value():
        return False  # an escaped interpolation: its text is unescaped when resolved
    return True


def _plain_value(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if isinstance(value, str):
        return "${" not in value and value != MISSING
    if isinstance(value, list):
        return all(_plain_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_value(v) for k, v in value.items())
    return False


def _copy(value: Any) -> Any:
    """A deep copy of plain containers (their leaves are immutable)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _set(config: dict[str, Any], path: tuple[str, ...], value: Any) -> bool:
    """OmegaConf.update's walk: a key on the way that holds no mapping (missing, a value) becomes an empty one."""
    node = config
    for key in path[:-1]:
        child = node.get(key)
        if isinstance(child, list):
            return False  # a list's index: left to OmegaConf
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[path[-1]] = value
    return True


def _delete(config: dict[str, Any], path: tuple[str, ...]) -> bool:
    """compose._delete: the key removed where its parent mapping has it, nothing where its parent is missing."""
    node: Any = config
    for key in path[:-1]:
        if not isinstance(node, dict):
            return False
        node = node.get(key)
        if node is None:
            return True
    if not isinstance(node, dict):
        return False
    node.pop(path[-1], None)
    return True


__all__ = ["PURE_RESOLVERS", "PlainBase", "apply", "plain_base"]
