"""Files written whole or not at all: atomic JSON writes, reading JSON that may be torn, and paths taken from where
the command was launched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distill_sweep.records.disk import atomic_file


def absolute(path: str | Path) -> Path:
    """`~` is the home directory (as in every path the tool reads); relative paths are taken from the directory
    the command was launched in (Hydra's rule)."""
    from hydra.utils import to_absolute_path

    path = Path(path).expanduser()  # Hydra's to_absolute_path would make `~` a directory of the launch directory
    try:
        return Path(to_absolute_path(str(path)))
    except ValueError:  # not running under Hydra (tests calling run_job directly)
        return Path(path).expanduser().resolve()


def write_json_atomic(path: Path, data: Any) -> None:
    """Write to a temp file in the same directory, fsync, then rename: readers never see half a file. A write
    that fails (a full disk) raises DiskWriteError naming `path`, whose earlier content is intact."""
    with atomic_file(path) as f:
        json.dump(data, f, indent=2, sort_keys=False, default=str)


def read_record(path: Path) -> dict[str, Any] | None:
    """The record at `path`, or None if absent, unreadable (binary, torn) or not a JSON object."""
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError):  # ValueError: JSONDecodeError and UnicodeDecodeError
        return None
    return record if isinstance(record, dict) else None
