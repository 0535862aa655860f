"""mkdocs hook: tables rendered from data files, never typed into a page.

- `<!-- bench: NAME -->`: a bench's figures, from `docs/benchmarks/data/NAME.json` (written by
  `python -m distill_sweep.<bench> --json PATH`, see `distill_sweep.bench.json_output.writes_json`, which `make bench`
  runs): a header with the machine, the date, the commit and the command, then what the bench printed, its
  lines and its tables.
- `<!-- paper-csv: FILE -->`: a paper's published table as transcribed in `results/paper/FILE` (the CSVs
  the report compares with); a `<task>_std` column is shown as ± beside its task.

A marker whose file is missing stops the build.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

MARKER = re.compile(r"^<!-- bench: ([\w-]+) -->$", re.M)
PAPER_MARKER = re.compile(r"^<!-- paper-csv: ([\w.-]+) -->$", re.M)
DATA = Path("benchmarks") / "data"
PAPER = Path("results") / "paper"  # beside docs/


def header(data: dict[str, Any]) -> str:
    m = data.get("machine") or {}
    machine = ", ".join(str(p) for p in (m.get("processor"), f"{m.get('cpus')} CPUs" if m.get("cpus") else None,
                                         m.get("system"), f"Python {m['python']}" if m.get("python") else None,
                                         f"torch {m['torch']}" if m.get("torch") else None) if p)
    commit = str(data.get("commit") or "unknown")
    short = commit[:10] + ("-dirty" if commit.endswith("-dirty") else "")
    return (f'!!! info "Measured {data.get("date", "at an unknown date")} on {machine or "an unknown machine"}"\n'
            f"    Commit `{short}`; command `{data.get('command', '?')}`.\n")


def table(t: dict[str, Any]) -> str:
    align = t.get("align") or ["left"] * len(t["columns"])
    lines = ["| " + " | ".join(t["columns"]) + " |",
             "|" + "|".join("---:" if a == "right" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in t["rows"]]
    return "\n".join(lines)


def render(data: dict[str, Any]) -> str:
    parts = [header(data)]
    for block in data.get("blocks", []):
        parts.append(table(block["table"]) if "table" in block else block["text"])
    return "\n\n".join(parts) + "\n"


def load(docs_dir: Path, name: str) -> dict[str, Any]:
    path = docs_dir / DATA / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no figures for <!-- bench: {name} --> (run make bench)")
    return json.loads(path.read_text())


def paper_table(path: Path) -> str:
    """A results/paper CSV as a Markdown table, `X_std` shown as `mean ± std` in column X."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such paper table")
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    columns = [c for c in rows[0] if not c.endswith("_std")]

    def cell(row: dict[str, str], column: str) -> str:
        std = row.get(f"{column}_std")
        return f"{row[column]} ± {std}" if std else row[column]

    return table({"columns": columns, "align": ["left" if c in ("objective", "init", "method", "system") else "right"
                                                 for c in columns],
                  "rows": [[cell(r, c).replace("|", "\\|") for c in columns] for r in rows]}) + \
        f"\n\n*Source: `{PAPER / path.name}`, transcribed by hand as printed.*\n"


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None) -> str:
    docs_dir = Path(config["docs_dir"]) if config is not None else Path(__file__).resolve().parent.parent
    markdown = MARKER.sub(lambda m: render(load(docs_dir, m.group(1))), markdown)
    return PAPER_MARKER.sub(lambda m: paper_table(docs_dir.parent / PAPER / m.group(1)), markdown)
