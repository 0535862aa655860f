"""A task's local GLUE TSVs (`task.data_dir`) as far as their first bytes tell: where each split's file is, that
it is text, and that it has the columns the task reads. No torch or datasets: the command line checks them
before the training code is imported; data.py reads the rows.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from distill_sweep.config.schema import TaskSettings, TsvSettings
from distill_sweep.errors import ConfigError, DataError


def dev_splits(task_cfg: TaskSettings) -> dict[str, str]:
    return dict(task_cfg.dev_splits or {"validation": "validation"})


def tsv_subdir(task_cfg: TaskSettings) -> str:
    tsv = task_cfg.tsv
    return tsv.subdir if tsv is not None and tsv.subdir else task_cfg.name.upper()


def _tsv(task_cfg: TaskSettings) -> TsvSettings:
    if task_cfg.tsv is None:
        raise ConfigError(f"task {task_cfg.name}: no tsv: block, cannot read task.data_dir")
    return task_cfg.tsv


def find_tsv(task_cfg: TaskSettings, filename: str) -> Path:
    root = Path(os.path.expanduser(str(task_cfg.data_dir)))
    candidates = [root / tsv_subdir(task_cfg) / filename, root / filename]
    for c in candidates:
        if c.is_file():
            return c
    raise DataError(
        f"task {task_cfg.name}: {filename} not found (looked for {candidates[0]} and {candidates[1]}); "
        f"task.data_dir must hold the original GLUE TSVs"
    )


def tsv_paths(task_cfg: TaskSettings) -> dict[str, Path]:
    """The TSV file of every split under task.data_dir (DataError naming the file when one is missing)."""
    files = _tsv(task_cfg).files
    paths: dict[str, Path] = {}
    for split in ["train", *dev_splits(task_cfg)]:
        if split not in files:
            raise ConfigError(f"task {task_cfg.name}: tsv.files has no entry for split {split!r}")
        paths[split] = find_tsv(task_cfg, str(files[split]))
    return paths


def check_files(task_cfg: TaskSettings) -> None:
    """What can be known of task.data_dir's TSVs from their first bytes, before a job starts: every file is
    there, is text, and has the columns the task reads. Reads at most 8 KB and one line per file (the
    rows themselves are checked when the job loads them)."""
    if task_cfg.source != "glue" or not task_cfg.data_dir:
        return
    paths = tsv_paths(task_cfg)
    columns, header = tsv_columns(task_cfg), _tsv(task_cfg).header
    for path in paths.values():
        refuse_binary(path)
        if not header:
            continue
        try:
            with open(path, "rb") as f:
                first = f.readline(1 << 20).decode("utf-8-sig")  # the header row alone, as read_glue_tsv reads it
        except UnicodeDecodeError:
            raise DataError(f"{path}: the header row is not UTF-8 text; GLUE TSVs are UTF-8: re-save it as UTF-8"
                            ) from None
        except OSError as e:
            raise DataError(f"{path}: cannot open ({e.strerror})") from e
        head = next(csv.reader([first.rstrip("\r\n")], delimiter="\t", quoting=csv.QUOTE_NONE), None)
        if not first or head is None:
            raise DataError(f"{path}: empty file (expected a header row)")
        column_index(path, head, columns)


def tsv_columns(task_cfg: TaskSettings) -> dict[str, Any]:
    """task.tsv.columns (our field -> file column name or 0-based position), with an entry for every field."""
    columns = dict(_tsv(task_cfg).columns)
    for key in [*task_cfg.text_fields, "label"]:
        if key not in columns:
            raise ConfigError(f"task {task_cfg.name}: tsv.columns has no entry for {key!r}")
    return columns


def column_index(path: Path, head: list[str], columns: dict[str, Any]) -> dict[str, int]:
    """Where each column is in a file whose header row is `head`."""
    index: dict[str, int] = {}
    for key, col in columns.items():
        if isinstance(col, int):
            index[key] = col
        elif col in head:
            index[key] = head.index(col)
        else:
            hint = " (comma-separated? GLUE files are tab-separated)" if len(head) == 1 and "," in head[0] else ""
            raise DataError(f"{path}: missing column {col!r} (header has {short(head)}){hint}")
    return index


# Leading bytes of compressed/archive files someone may pass instead of the TSV itself.
_MAGIC = {b"\x1f\x8b": "gzip-compressed", b"PK\x03\x04": "a zip archive", b"BZh": "bzip2-compressed",
          b"\xfd7zXZ": "xz-compressed"}


def refuse_binary(path: Path) -> None:
    """A one-line DataError for files that are not text at all (decoding them would fail obscurely)."""
    try:
        with open(path, "rb") as f:
            start = f.read(8192)
    except OSError as e:
        raise DataError(f"{path}: cannot open ({e.strerror})") from e
    for magic, what in _MAGIC.items():
        if start.startswith(magic):
            raise DataError(f"{path}: {what}, not a TSV: extract it first (task.data_dir must hold plain .tsv files)")
    if b"\x00" in start:
        raise DataError(f"{path}: binary file (NUL bytes in its first 8 KB), not a UTF-8 GLUE TSV")


def short(values: list[str], limit: int = 120) -> str:
    text = repr(values)
    return text if len(text) <= limit else text[: limit - 3] + "..."
