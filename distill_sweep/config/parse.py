"""Typed settings: every configurable part declares a dataclass, and `parse` checks a config node against it.

A wrong key, type or range is one `ConfigError` line naming the key, the value and what is allowed, raised
when the job is validated (before anything is loaded or written), for every job of a sweep.

Ranges live in the field's metadata: `field(default=3, metadata=IDENTITY | {"ge": 1})` (also `gt`, `le`, `lt`), and
so does the key's kind, what of it makes a job what it is (`IDENTITY`, `TEACHER`, `INVARIANT`, `nondeterministic`:
below), read by `hashed_form` (the settings' part of a config hash) and `teacher_form` (the teacher's cache key).
Besides its kind, a hashed key added after configs were hashed says `UNHASHED_AT_DEFAULT`: left out at its default
(`new_keys_at_default`), so the jobs hashed before it keep their hash; `unhashed_at(value)` the same at another value
(the one every job had before the key existed).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union

from distill_sweep.errors import ConfigError

T = TypeVar("T")
# The range of every seed setting: NumPy's generators take seeds in [0, 2**32), torch's and Python's more.
SEED_RANGE = {"ge": 0, "lt": 2**32}
# Finite values past these make the loss or the weights overflow at the first steps (a temperature of 1e-300
# divides the logits to inf, a learning rate of 1e30 or a loss weight of 1e308 leaves float32's range): refused with
# the other bad values, before any work, rather than failing at step 1-2 after a record. Generous for practice:
# KD temperatures of 0.05-20, learning rates up to 1e-2, weights up to a few hundred.
LEARNING_RATE = {"gt": 0.0, "le": 1.0}
TEMPERATURE = {"ge": 1e-3, "le": 1e3}
LOSS_WEIGHT = {"ge": 0.0, "le": 1e6}
# What a key is to the job's results: every settings field declares exactly one kind in its metadata (merged with
# its bounds: `metadata=IDENTITY | {"ge": 1}`). The config hash (`hashed_form`), the fine-tuned teacher's cache key
# (job/teacher_keys.py) and the checks generated over every key (tests/key_kinds.py) read them; nothing else
# lists keys by kind. docs/design.md shows one of each.
IDENTITY = {"kind": "identity"}  # makes the job: in its config hash
TEACHER = {"kind": "teacher"}  # makes the job's teacher too: in the config hash and in the teacher's cache key
INVARIANT = {"kind": "invariant"}  # where and how a job runs: not hashed, and no number of its record depends on it
KINDS = ("identity", "teacher", "invariant", "nondeterministic")


def nondeterministic(why: str) -> dict[str, Any]:
    """A field's metadata: not hashed, and the record's numbers agree across its values within a float tolerance,
    not bit for bit (`why`: the reason, shown in the config reference)."""
    return {"kind": "nondeterministic", "why": why}


UNHASHED_AT_DEFAULT = {"unhashed_at_default": True}  # with a hashed kind: a key added later, left out at its default


def unhashed_at(value: Any) -> dict[str, Any]:
    """A field's metadata: left out of the config hash while it holds `value` (the jobs' value before the key)."""
    return {"unhashed_at": value}


_BOUNDS = {"ge": (">=", lambda v, b: v >= b), "gt": (">", lambda v, b: v > b),
           "le": ("<=", lambda v, b: v <= b), "lt": ("<", lambda v, b: v < b)}


def parse(cls: type[T], node: Any, where: str) -> T:
    """The dataclass `cls` built from the mapping `node`, plain containers (job.plain_config turns the
    composed config into those); `where` is the key path used in messages ("" for top-level keys)."""
    data = {} if node is None else node
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a mapping of settings, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    def key(name: str) -> str:
        return f"{where}.{name}" if where else name

    unknown = sorted(str(k) for k in data if k not in fields)
    if unknown:
        raise ConfigError(f"{key(unknown[0])}: unknown setting (known: {', '.join(fields)})")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = check_value(hints[name], data[name], key(name), f.metadata)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{key(name)} is required")
    obj = cls(**kwargs)
    # numbers written in another form than the typed one (an integer for a float field): kept for `hashed_form`
    written = {name: data[name] for name, value in kwargs.items() if not _same_form(data[name], value)}
    if written:
        object.__setattr__(obj, WRITTEN, written)
    validate = getattr(obj, "validate", None)
    if callable(validate):  # cross-field rules of the part
        validate(where)
    return obj


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)  # slow (evaluates the annotations): once per class


def check_value(tp: Any, value: Any, key: str, metadata: Mapping[str, Any] | None = None) -> Any:
    """`value` checked against the type hint `tp` (and the bounds in `metadata`); returns it normalised."""
    out = _coerce(tp, value, key)
    for name, bound in (metadata or {}).items():
        if name in _BOUNDS and out is not None:
            sign, ok = _BOUNDS[name]
            if not ok(out, bound):
                raise ConfigError(f"{key}={value!r}: must be {sign} {bound}")
    return out


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if origin in (list, tuple):
        return "a list"
    if origin in (dict, Mapping):
        return "a mapping"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, str(tp))


def _coerce(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        others = [a for a in args if a is not type(None)]
        if len(others) == 1 and dataclasses.is_dataclass(others[0]):
            return _coerce(others[0], value, key)  # an optional part: its own error says what is wrong in it
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(arg, value, key)
            except ConfigError:
                continue
        raise ConfigError(f"{key}={value!r}: expected {_describe(tp)}")
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"{key}={value!r}: expected {_describe(tp)}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}={value!r}: expected a list")
        args = typing.get_args(tp)
        item = args[0] if args else Any
        items = [_coerce(item, v, f"{key}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}={value!r}: expected a mapping")
        args = typing.get_args(tp)
        item = args[1] if len(args) == 2 else Any
        return {str(k): _coerce(item, v, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return parse(tp, value, key)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}={value!r}: expected true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or int(value) != value:
            raise ConfigError(f"{key}={value!r}: expected an integer")
        return int(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}={value!r}: expected a number")
        if not math.isfinite(value):
            raise ConfigError(f"{key}={value!r}: expected a finite number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}={value!r}: expected a string")
        return value
    raise TypeError(f"settings type {tp!r} of {key} is not supported")  # a programming error


def as_dict(settings: Any) -> dict[str, Any]:
    """A settings dataclass as a plain dict (what records and config hashes hold)."""
    return dataclasses.asdict(settings)


WRITTEN = "_written_numbers"  # the attribute of a parsed dataclass that holds its numbers as written (`parse`)


def _same_form(raw: Any, value: Any) -> bool:
    """Whether a checked value is written in JSON as the config wrote it (1 and 1.0 are not; a dataclass: its
    own fields are compared when it is parsed)."""
    if raw is value or dataclasses.is_dataclass(value):
        return True
    if isinstance(value, (list, tuple)):
        return isinstance(raw, (list, tuple)) and len(raw) == len(value) and all(map(_same_form, raw, value))
    if isinstance(value, Mapping):
        return isinstance(raw, Mapping) and len(raw) == len(value) and all(map(_same_form, raw.values(),
                                                                               value.values()))
    return type(raw) is type(value) and raw == value


def hashed_form(settings: Any, written_numbers: bool = True) -> dict[str, Any]:
    """What of a settings dataclass makes a job what it is (its part of the config hash), by its fields' metadata
    (module docstring); a nested settings block (a dataclass in a field, a list or a mapping) in its own hashed form.
    `written_numbers`: a number as the config wrote it (an integer given to a float field stays one), the form the
    config hash took of the parts hashed as composed before they were typed (run, optimizer, task, teacher,
    procedure, corpus); False: the typed value (the student and the objective were hashed typed)."""
    written = getattr(settings, WRITTEN, {}) if written_numbers else {}
    out = {}
    for f in dataclasses.fields(settings):
        value, meta = getattr(settings, f.name), f.metadata
        if not is_hashed(meta) or ("unhashed_at" in meta and value == meta["unhashed_at"]):
            continue
        if meta.get("unhashed_at_default") and value == _default(f):
            continue
        # (as written while the value is the one parsed: `validate` may have changed it)
        as_written = f.name in written and written[f.name] == value
        out[f.name] = written[f.name] if as_written else _hashed_value(value, written_numbers)
    return out


def teacher_form(settings: Any, written_numbers: bool = True) -> dict[str, Any]:
    """What of a settings dataclass the teacher reads (its part of the teacher's cache key, job/teacher_keys.py): the
    fields declared `TEACHER`, in their hashed form; a hashed block holding teacher keys among others (task.recipe:
    the toy data's size and seed) in its own teacher form, where it has any."""
    hashed = hashed_form(settings, written_numbers)
    out = {}
    for f in dataclasses.fields(settings):
        if f.name not in hashed:
            continue
        value = getattr(settings, f.name)
        if key_kind(f) == "teacher":
            out[f.name] = hashed[f.name]
        elif dataclasses.is_dataclass(value) and (inner := teacher_form(value, written_numbers)):
            out[f.name] = inner
    return out


def key_kind(f: dataclasses.Field) -> str | None:
    """The kind a settings field declares (`KINDS`), or None where it declares none (tests/unit/config/
    test_key_kinds.py fails the suite on such a field)."""
    kind = f.metadata.get("kind")
    return kind if kind in KINDS else None


def is_hashed(meta: Mapping[str, Any]) -> bool:
    """Whether a field of this metadata is part of the config hash: identity and teacher-identity keys (a field not
    yet declared counts as identity, the safe side)."""
    return meta.get("kind", "identity") in ("identity", "teacher")


def _hashed_value(value: Any, written_numbers: bool) -> Any:
    if dataclasses.is_dataclass(value):
        return hashed_form(value, written_numbers)
    if isinstance(value, (list, tuple)):
        return [_hashed_value(v, written_numbers) for v in value]
    if isinstance(value, Mapping):
        return {k: _hashed_value(v, written_numbers) for k, v in value.items()}
    return value


def new_keys_at_default(settings: Any) -> set[str]:
    """The fields marked `UNHASHED_AT_DEFAULT` that are at their default (left out of the config hash)."""
    return {f.name for f in dataclasses.fields(settings)
            if f.metadata.get("unhashed_at_default") and getattr(settings, f.name) == _default(f)}


def _default(f: dataclasses.Field) -> Any:
    """A field's default value (a nested settings block's: its factory's)."""
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
