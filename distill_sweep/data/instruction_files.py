"""Instruction files (`procedure.instructions`, source=jsonl or parquet) read whole and checked: every example a
prompt and a response that are strings, the file UTF-8 JSON Lines (or a Parquet table with those columns), and
enough examples for the dev slice and one training batch. Each problem is one DataError naming the file and the
line (JSONL, from 1) or row (Parquet, from 0).

No torch or datasets: the command line runs `check_file` before any job starts (job.check_paths, through
procedure settings' `check_files`), as it checks a task's TSVs (task_files.py); data/decoder.py reads the pairs
with `read_file_pairs`, so the job trains on exactly what was checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.errors import DataError

WHERE = "procedure.instructions"
# Leading bytes of compressed files someone may pass instead of the file itself
_MAGIC = {b"\x1f\x8b": "gzip-compressed", b"PK\x03\x04": "a zip archive", b"BZh": "bzip2-compressed",
          b"\xfd7zXZ": "xz-compressed", b"\x28\xb5\x2f\xfd": "zstd-compressed"}


def describe(value: Any) -> str:
    """A value that is not a string, as a message names it: null, or its JSON type and a short repr."""
    if value is None:
        return "null"
    kind = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object",
            str: "a string"}.get(
        type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} ({text if len(text) <= 40 else text[:37] + '...'})"


def as_pair(row: Any, settings: InstructionSettings, where: str) -> tuple[str, str]:
    """The row's (prompt, response), both strings; DataError naming `where` (file and line) otherwise."""
    fields = (settings.prompt_field, settings.response_field)
    if not isinstance(row, dict):
        raise DataError(f"{where}: {describe(row)}, not a JSON object with {fields[0]!r} and {fields[1]!r}")
    for name in fields:
        if name not in row:
            raise DataError(f"{where}: no {name!r} (it has {', '.join(map(repr, row)) or 'no keys'}; "
                            f"{WHERE}.prompt_field and .response_field name the keys)")
        if not isinstance(row[name], str):
            # str() would train on the text 'None' or "['a', 'b']"
            raise DataError(f"{where}: {name!r} is {describe(row[name])}, not a string")
    return row[fields[0]], row[fields[1]]


def _jsonl_pairs(path: Path, settings: InstructionSettings) -> list[tuple[str, str]]:
    with open(path, "rb") as f:
        start = f.read(8)
    for magic, what in _MAGIC.items():
        if start.startswith(magic):
            raise DataError(f"{path}: {what}, not JSON Lines text: extract it first")
    pairs: list[tuple[str, str]] = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise DataError(f"{path} line {n}: not UTF-8 text (byte 0x{raw[err.start]:02x} at column "
                                f"{err.start + 1}); re-save the file as UTF-8") from None
            if not line.strip():
                continue
            if not pairs and line.lstrip().startswith("["):
                raise DataError(f"{path} line {n}: a JSON array, not JSON Lines: write one object per line "
                                "(e.g. jq -c '.[]' file.json > file.jsonl)")
            try:
                row = json.loads(line.rstrip("\r\n"))
            except ValueError as err:
                raise DataError(f"{path} line {n}: not a JSON object ({err.msg} at column {err.colno})") from None
            pairs.append(as_pair(row, settings, f"{path} line {n}"))
            if settings.max_examples is not None and len(pairs) == settings.max_examples:
                break  # the rest is not read by the job either
    return pairs


def _parquet_pairs(path: Path, settings: InstructionSettings) -> list[tuple[str, str]]:
    import pyarrow.parquet as pq  # a parquet file only: loading pyarrow costs every other refusal ~0.3 s

    fields = [settings.prompt_field, settings.response_field]
    try:
        table = pq.read_table(path, columns=fields)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several types: not parquet, a column missing
        raise DataError(f"{path}: not a Parquet file with columns {fields[0]!r} and {fields[1]!r} "
                        f"({str(err).splitlines()[0] if str(err) else type(err).__name__})") from None
    if settings.max_examples is not None:
        table = table.slice(0, settings.max_examples)
    columns = {name: table.column(name).to_pylist() for name in fields}
    for name, values in columns.items():
        for row, value in enumerate(values):
            if not isinstance(value, str):
                raise DataError(f"{path} row {row} (from 0): {name!r} is {describe(value)}, not a string "
                                f"(the column is {table.schema.field(name).type})")
    return list(zip(columns[fields[0]], columns[fields[1]], strict=True))


def read_file_pairs(settings: InstructionSettings) -> list[tuple[str, str]]:
    """The (prompt, response) pairs of a jsonl or parquet source, in file order, at most `max_examples`; each a
    pair of strings, or DataError naming the file and the line or row."""
    path = Path(str(settings.path)).expanduser()
    try:
        return _parquet_pairs(path, settings) if settings.source == "parquet" else _jsonl_pairs(path, settings)
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror})") from None


def check_count(n: int, settings: InstructionSettings, batch_size: int, where: str) -> None:
    """Enough examples: more than the dev slice, and at least one training batch after it."""
    if n <= settings.dev_examples:
        raise DataError(f"{where}: {n} examples, not more than {WHERE}.dev_examples={settings.dev_examples} (the "
                        "dev slice), so nothing is left to train on")
    if n - settings.dev_examples < batch_size:
        raise DataError(f"{where}: {n} examples leave {n - settings.dev_examples} to train on after "
                        f"{WHERE}.dev_examples={settings.dev_examples}, fewer than one batch "
                        f"(procedure.batch_size={batch_size})")


def check_file(settings: InstructionSettings, batch_size: int) -> None:
    """A local instruction file read and checked whole (the command line's check, before any job starts)."""
    if settings.source not in ("jsonl", "parquet"):
        return
    check_count(len(read_file_pairs(settings)), settings, batch_size, str(Path(str(settings.path)).expanduser()))
