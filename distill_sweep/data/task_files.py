"""A task's local GLUE TSVs (`task.data_dir`): where each split's file is, that it is text with the columns the
task reads, and its rows (`read_rows`: every label readable, few malformed rows). No torch or datasets: the command
line checks every file before the training code is imported (a bad row deep in a file is one line then, not a
failed job); glue.py turns the same rows into datasets.
"""

from __future__ import annotations

import csv
import math
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
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
    """task.data_dir's TSVs, before a job starts: every file is there, is text, has the columns the task reads
    (from its first bytes: the line names the header), and every row parses (`read_rows`, once per file and
    version in a process: a sweep's jobs of one task read it once)."""
    if task_cfg.source != "glue" or not task_cfg.data_dir:
        return
    paths = tsv_paths(task_cfg)
    columns, header = tsv_columns(task_cfg), _tsv(task_cfg).header
    for path in paths.values():
        refuse_binary(path)
        if header:
            _check_header(path, columns)
    for path in paths.values():
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, repr(task_cfg.tsv), tuple(task_cfg.text_fields),
               tuple(task_cfg.label_names or ()), task_cfg.num_labels)
        if key not in _ROWS_CHECKED:
            read_rows(path, task_cfg)
            _ROWS_CHECKED.add(key)


_ROWS_CHECKED: set[tuple[Any, ...]] = set()


def _check_header(path: Path, columns: dict[str, Any]) -> None:
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20).decode("utf-8-sig")  # the header row alone, as read_rows reads it
    except UnicodeDecodeError:
        raise DataError(f"{path}: the header row is not UTF-8 text; GLUE TSVs are UTF-8: re-save it as UTF-8"
                        ) from None
    except OSError as e:
        raise DataError(f"{path}: cannot open ({e.strerror})") from e
    head = next(csv.reader([first.rstrip("\r\n")], delimiter="\t", quoting=csv.QUOTE_NONE), None)
    if not first or head is None:
        raise DataError(f"{path}: empty file (expected a header row)")
    column_index(path, head, columns)


# Above this fraction of unparseable rows a file is treated as the wrong format rather than a few bad
# lines (the original QQP train.tsv has a handful of rows with missing fields; that is all we tolerate).
MAX_BAD_ROW_FRACTION = 0.01


@dataclass
class Rows:
    """A TSV's rows by column (the text fields and `label`), and the malformed rows skipped."""

    rows: dict[str, list[Any]]
    bad: int
    total: int
    first_bad: int | None


def read_rows(path: Path, task_cfg: TaskSettings) -> Rows:
    """Every row of one original GLUE TSV (DataError, one line naming the file and line, for what cannot be read).

    Quirks handled: no quote processing at all (fields may start with an unbalanced ``"``), an optional
    UTF-8 BOM (MRPC), header-less files (CoLA: columns addressed by position), string labels mapped
    through ``label_names`` (RTE, QNLI, MNLI), and rows with the wrong field count (QQP train) skipped
    and counted (more than MAX_BAD_ROW_FRACTION of them: the wrong file).
    """
    tsv = _tsv(task_cfg)
    fields = list(task_cfg.text_fields)
    columns = tsv_columns(task_cfg)
    label_names = [str(x) for x in (task_cfg.label_names or [])]
    num_labels = int(task_cfg.num_labels)

    refuse_binary(path)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # long MNLI parse-tree fields
    try:
        # utf-8-sig drops MRPC's BOM; QUOTE_NONE keeps quotes as plain characters, as GLUE intends.
        f = open(path, encoding="utf-8-sig", newline="")
    except OSError as e:
        raise DataError(f"{path}: cannot open ({e.strerror})") from e
    with f:
        try:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            width, index = _columns(path, reader, tsv.header, columns)
            need = max(index.values()) + 1

            rows: dict[str, list] = {k: [] for k in [*fields, "label"]}
            bad = total = 0
            first_bad: int | None = None
            for lineno, row in enumerate(reader, start=2 if tsv.header else 1):
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # blank (trailing) line
                total += 1
                if len(row) < need or (width is not None and len(row) != width):
                    bad += 1
                    first_bad = first_bad or lineno
                    continue
                label = _label(row[index["label"]].strip(), tsv, label_names, num_labels, f"{path}:{lineno}")
                for k in fields:
                    rows[k].append(row[index[k]])
                rows["label"].append(label)
        except UnicodeDecodeError as e:
            # the reader decodes in chunks, so its line count is where decoding stopped, roughly
            raise DataError(
                f"{path}: not UTF-8 text near line {reader.line_num + 1} (byte {e.object[e.start:e.start + 1]!r} "
                f"cannot be decoded); GLUE TSVs are UTF-8: re-save it as UTF-8"
            ) from None
        except csv.Error as e:
            raise DataError(f"{path}:{reader.line_num}: not a readable TSV ({e})") from None

    if total == 0:
        raise DataError(f"{path}: no data rows{' (only a header row)' if tsv.header else ' (empty file)'}")
    if bad > MAX_BAD_ROW_FRACTION * total:
        raise DataError(
            f"{path}: {bad}/{total} rows have the wrong number of fields (first at line {first_bad}); "
            f"not a GLUE {task_cfg.name} file?"
        )
    return Rows(rows, bad, total, first_bad)


def _columns(path: Path, reader: Iterator[list[str]], header: bool, columns: Mapping[str, Any]
             ) -> tuple[int | None, dict[str, int]]:
    """(the row width a header fixes, else None; each field's 0-based column), reading the header row if any."""
    if not header:  # header-less files are checked by the highest position we read
        return None, {key: int(col) for key, col in columns.items()}
    head = next(reader, None)
    if head is None:
        raise DataError(f"{path}: empty file (expected a header row)")
    return len(head), column_index(path, head, columns)


def _label(raw: str, tsv: TsvSettings, label_names: list[str], num_labels: int, where: str) -> int | float:
    """One row's label as the task reads it: a name mapped through label_names, a regression score, or an id."""
    if tsv.label_type == "str":
        if raw not in label_names:
            raise DataError(f"{where}: unknown label {raw!r} (expected one of {label_names})")
        return label_names.index(raw)
    if tsv.label_type == "float":
        try:
            score = float(raw)
        except ValueError:
            raise DataError(f"{where}: label {raw!r} is not a number") from None
        if not math.isfinite(score):
            raise DataError(f"{where}: label {raw!r} is not a finite number")
        return score
    try:
        label = int(raw)
    except ValueError:
        raise DataError(f"{where}: label {raw!r} is not an integer id") from None
    if not 0 <= label < num_labels:
        raise DataError(f"{where}: label {label} outside 0..{num_labels - 1}")
    return label


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
