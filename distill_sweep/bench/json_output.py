"""A bench's printed figures as JSON: `--json PATH` on every bench's `main` (`make bench` writes
docs/benchmarks/data/<bench>.json, which the documentation renders: docs/hooks/benchmarks.py)."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import io
import json
import os
import platform
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from distill_sweep.records.environment import git_commit


def markdown_blocks(text: str) -> list[dict[str, Any]]:
    """What a bench printed, as blocks: {"text": line} or {"table": {"columns", "align", "rows"}} (a run of
    `|` lines: header, alignment row, rows)."""
    blocks: list[dict[str, Any]] = []
    table: list[list[str]] = []

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    def close() -> None:
        if table:
            align = ["right" if c.endswith(":") else "left" for c in table[1]] if len(table) > 1 else []
            blocks.append({"table": {"columns": table[0], "align": align, "rows": table[2:]}})
            table.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            table.append(cells(line))
            continue
        close()
        if line.strip():
            blocks.append({"text": line.strip().removeprefix("# ")})
    close()
    return blocks


def machine() -> dict[str, Any]:
    """The machine a bench ran on (no model is loaded to say it: versions are read from the installed packages)."""
    versions = {}
    for name in ("torch", "transformers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"system": f"{platform.system()} {platform.release()}", "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "python": platform.python_version(), **versions}


def _module_name(fn: Callable[..., Any]) -> str:
    """The module's import name, also when it runs as `python -m` (then it is __main__)."""
    spec = getattr(sys.modules.get(fn.__module__), "__spec__", None)
    return spec.name if spec is not None else fn.__module__


@contextlib.contextmanager
def teed_stdout() -> Iterator[io.StringIO]:
    """While the block runs, what it prints goes to stdout and into the yielded buffer too."""
    printed, out = io.StringIO(), sys.stdout

    class Tee(io.TextIOBase):
        def write(self, s: str) -> int:
            printed.write(s)
            return out.write(s)

    with contextlib.redirect_stdout(Tee()):
        yield printed


def writes_json(bench: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """`--json PATH` for a bench's `main`: what it prints to stdout is also written to PATH as JSON, with the
    command, the machine, the date and the git commit (`make bench` writes docs/benchmarks/data/<bench>.json,
    which the documentation renders)."""

    def deco(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def wrapped(argv: Sequence[str] | None = None) -> int:
            args = list(sys.argv[1:] if argv is None else argv)
            path = None
            for i, arg in enumerate(args):
                if arg == "--json" or arg.startswith("--json="):
                    path = arg.partition("=")[2] or (args[i + 1] if i + 1 < len(args) else "")
                    del args[i:i + (1 if "=" in arg else 2)]
                    break
            if path == "":
                raise SystemExit("--json needs a path")
            if any(a in ("-h", "--help") for a in args):
                print(f"  --json PATH  also write the figures as JSON (make bench: docs/benchmarks/data/{bench}.json)")
            if path is None:
                return main(args)
            with teed_stdout() as printed:
                code = main(args)
            data = {"bench": bench, "command": " ".join(["python -m", _module_name(main), *args]),
                    "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
                    "machine": machine(), "blocks": markdown_blocks(printed.getvalue())}
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(data, indent=1) + "\n")
            return code

        return wrapped

    return deco
