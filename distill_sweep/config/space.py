"""The config space on disk: where `conf/` is, its groups and the options of each group.

Read by the entry's early checks, the schema and the sweeper; it imports nothing heavy, so a typo in a group
option is refused before torch or Hydra are loaded.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

CONF_DIR = str(Path(__file__).resolve().parents[2] / "conf")  # the repository's conf/, beside the package
GROUPS = ("procedure", "teacher", "student", "objective", "task", "optimizer", "logger", "experiment", "corpus")
BASES = ("base",)  # config files other options extend; not options themselves
# Options whose defaults are given in code, by group: a part's settings dataclass is their one home
# (students/base.register_student registers each student type, procedures/base.declare each procedure).
# conf/<group>/ then holds only presets.
CODE_OPTIONS: dict[str, dict[str, dict[str, Any]]] = {}
# The options of other groups that an option given in code composes with it, by group and option
# (procedure=causal_lm: {"corpus": "toy"}); what `option_defaults` reads from a YAML's defaults list.
CODE_CHOICES: dict[str, dict[str, dict[str, str]]] = {}


def hydra_version_base(version: str) -> dict[str, str]:
    """The `version_base` keyword for Hydra's entry points (`hydra.main`, `initialize_config_dir`) under Hydra
    `version`: "1.3" up to 1.3 (without it 1.2-1.3 fall back to 1.1's defaults, with a warning); none from 1.4,
    which deprecates the parameter (a warning on every run, above the command line's one-line errors) and keeps
    1.3's behaviour as its only one."""
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", version).groups())  # type: ignore[union-attr]
    return {} if (major, minor) >= (1, 4) else {"version_base": "1.3"}


VERSION_BASE = hydra_version_base(metadata.version("hydra-core"))  # read without importing Hydra


def register_option(group: str, name: str, defaults: dict[str, Any], choose: Mapping[str, str] | None = None) -> None:
    """A config-group option given in code: `group=name` composes `defaults` as if conf/<group>/<name>.yaml held
    them (Hydra finds it in its ConfigStore, a preset's defaults list too: `- fresh`). `choose`: options of other
    groups it composes first, each at the config's top level, as a YAML's defaults list would
    (`- /corpus@_global_.corpus: toy`); the command line's `corpus=...` still overrides it.

    Stored as a plain mapping, not as the settings dataclass, so the composed config stays untyped: see
    docs/design.md ("A part's defaults: one home")."""
    from hydra.core.config_store import ConfigStore  # here: the early checks read the options without Hydra

    CODE_OPTIONS.setdefault(group, {})[name] = defaults
    node = dict(defaults)
    CODE_CHOICES.setdefault(group, {}).pop(name, None)
    if choose:
        CODE_CHOICES[group][name] = dict(choose)
        node = {"defaults": [*({f"/{g}@_global_.{g}": option} for g, option in choose.items()), "_self_"], **node}
    ConfigStore.instance().store(group=group, name=name, node=node, provider="distill_sweep")


def config_defaults(settings: type) -> dict[str, Any]:
    """What a part's option registered in code composes: every field of its settings dataclass at its default, as
    plain containers (a nested dataclass as its mapping); a required field, without one, is left for the
    command line (or the registration) to add, and so is one marked `filled_in` (set when the job is prepared)."""
    out = {}
    for f in dataclasses.fields(settings):
        if f.metadata.get("filled_in"):
            continue
        if f.default_factory is not dataclasses.MISSING:
            out[f.name] = _plain(f.default_factory())
        elif f.default is not dataclasses.MISSING:
            out[f.name] = _plain(f.default)
    return out


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def group_options(group: str, user_dirs: Sequence[str] = ()) -> list[str]:
    """The options of a config group (`conf/<group>/*.yaml`, `<dir>/<group>/*.yaml` of the user's own config
    directories and those registered in code, `register_option`), sorted."""
    files = {p.stem for root in (CONF_DIR, *user_dirs) for p in (Path(root) / group).glob("*.yaml")}
    return sorted((files | set(CODE_OPTIONS.get(group, ()))) - set(BASES))


def user_config_dirs(argv: Sequence[str]) -> list[str]:
    """The user's own config directories a command line adds to Hydra's search path: `--config-dir DIR`
    (`-cd DIR`, `--config-dir=DIR`) and the `file://` entries of a `hydra.searchpath=[...]` override."""
    dirs: list[str] = []
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            dirs.append(argv[i + 1])
        elif arg.startswith("--config-dir="):
            dirs.append(arg.partition("=")[2])
        elif arg.lstrip("+").startswith("hydra.searchpath="):
            dirs += re.findall(r"file://([^,\]'\"]+)", arg)
    return [str(Path(d).expanduser().resolve()) for d in dirs]


@cache
def default_choices() -> dict[str, str]:
    """The option each group takes when the command line names none (conf/config.yaml's defaults list)."""
    defaults = yaml.safe_load((Path(CONF_DIR) / "config.yaml").read_text())["defaults"]
    return {group: str(option) for entry in defaults if isinstance(entry, dict)
            for group, option in entry.items() if group in GROUPS}


def option_defaults(group: str, option: str) -> dict[str, str]:
    """The group options that an option's own defaults list chooses, by group (procedure=causal_lm composes
    `corpus=toy` -> {"corpus": "toy"}): a YAML's defaults list, or what its registration in code chose."""
    if option in CODE_CHOICES.get(group, {}):
        return dict(CODE_CHOICES[group][option])
    return _file_defaults(group, option)


@cache
def _file_defaults(group: str, option: str) -> dict[str, str]:
    path = Path(CONF_DIR) / group / f"{option}.yaml"
    if not path.is_file():  # an option registered in code that chooses nothing
        return {}
    config = yaml.safe_load(path.read_text()) or {}
    return {key.lstrip("/").split("@")[0]: str(value) for entry in config.get("defaults", [])
            if isinstance(entry, dict) for key, value in entry.items()}


def shadowed_file(user_dir: Path) -> str | None:
    """One line for a config file of the user's that Hydra would never read: conf/ comes first on the search path,
    so a file of the user's directory at the path of one of conf/'s (`objective/vanilla_kd.yaml`, `config.yaml`)
    is shadowed by it, silently. A copy with the same content loses nothing and passes."""
    for mine in sorted(user_dir.rglob("*.yaml")):
        ours = Path(CONF_DIR) / mine.relative_to(user_dir)
        if not ours.is_file() or _same_text(mine, ours):
            continue
        where = mine.relative_to(user_dir)
        if where == Path("config.yaml"):
            return (f"config file {mine}: the tool's primary config (conf/config.yaml) is read instead, so yours "
                    f"would be ignored; put your settings in a preset of your own, {user_dir}/experiment/<name>.yaml with "
                    "`# @package _global_` as its first line, and run it with experiment=<name>")
        option = f"{where.parent.as_posix()}={where.stem}" if where.parent != Path(".") else str(where)
        return (f"config file {mine}: conf/{where.as_posix()} has its name and is read instead ({option} picks the "
                "tool's), so yours would be ignored; give yours a name of its own")
    return None


def _same_text(a: Path, b: Path) -> bool:
    try:
        return a.read_bytes() == b.read_bytes()
    except OSError:  # unreadable: Hydra's own error says so when it loads the file
        return True


def check_group_choices(argv: list[str]) -> str | None:
    """One line naming an unknown config-group option (`task=nosuch`), checked before Hydra starts.

    Hydra would also refuse it, but with a multi-line message; plain comma sweeps (`task=rte,mrpc`) are
    checked value by value, and anything fancier is left to Hydra.
    """
    user_dirs = user_config_dirs(argv)
    for path in user_dirs:
        if not Path(path).is_dir():
            return f"config directory {path} (--config-dir or hydra.searchpath): not a directory"
        if (shadowed := shadowed_file(Path(path))) is not None:
            return shadowed
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key.lstrip("+~") not in GROUPS or any(c in value for c in "()[]{}*$"):
            continue
        group = key.lstrip("+~")
        known = group_options(group, user_dirs)
        for choice in value.split(","):
            if choice and choice != "null" and choice not in known:
                return f"unknown {group} {choice!r} (choose from: {', '.join(known)})"
    return None
