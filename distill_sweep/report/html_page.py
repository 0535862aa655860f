"""The report as one self-contained HTML page: the Doc's headings, text and tables (cells with their CI on
hover) plus its figures (inline SVG), under a header that says where the numbers come from.

No script, no external file: the page opens offline from disk in any browser.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict
from datetime import datetime, timezone
from html import escape
from typing import Any

import pandas as pd

from distill_sweep.records import environment
from distill_sweep.report.method_text import statistics_text, variability_text
from distill_sweep.report.render import Doc

CSS = """
body{font:13px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em auto;max-width:1400px;
padding:0 1em;color:#222}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0}th,td{border:1px solid #ddd;padding:2px 7px;text-align:left}
th{background:#f4f4f4}td[title]{cursor:help}table.report td[title]:hover{background:#fff6d5}
tr.failed td{background:#fde8e8}tr.running td{background:#fff8e1}tr.missing td{background:#eef1f5}
p{margin:.25em 0}.header{background:#f7f9fc;border:1px solid #dde5f0;padding:.6em 1em;border-radius:4px}
.figures{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start;margin:.6em 0}
.legend{display:flex;flex-wrap:wrap;gap:12px;font-size:12px}.legend svg{vertical-align:middle;margin-right:3px}
figure{margin:0;max-width:100%}figcaption{font-size:11px;color:#555;max-width:640px}
details{margin:.4em 0}summary{cursor:pointer;color:#1f4e99}code{background:#f2f2f2;padding:0 3px}
"""
GRID_COLUMNS = (("task", "task"), ("procedure", "procedure"), ("objective", "objective"), ("teacher", "teacher_name"),
                ("student", "student_name"), ("init", "init_spec"), ("seed", "seed"))  # what the header lists


def machine() -> str:
    return f"{platform.node()} ({platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()})"


def short_commit(commit: str) -> str:
    """A commit's first 12 hex digits, keeping a dirty tree's `-dirty` mark (cut off by a plain [:12])."""
    sha, dirty, _ = commit.partition("-dirty")
    return sha[:12] + ("-dirty" if dirty else "")


def header(opts: Any, records: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, value) lines: the code's commit, the records' commits, the sweep, the options, date, machine."""
    commits = sorted({str(c) for c in records["git_commit"].dropna()}) if "git_commit" in records else []
    options = ", ".join(f"{k}={v}" for k, v in asdict(opts).items() if v is not None)
    grid = "; ".join(f"{label} {', '.join(sorted({str(v) for v in records[col].dropna()}))}"
                     for label, col in GRID_COLUMNS if col in records and not records.empty)
    return [
        ("report code", environment.git_commit() or "unknown (not a git checkout)"),
        ("records' code", ", ".join(dict.fromkeys(short_commit(c) for c in commits)) or "not recorded"),
        ("sweep", f"{opts.results_dir}, {len(records)} records, preset {opts.preset or 'none'}: {grid}"),
        ("options", options),
        ("date", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("machine", machine()),
        ("statistics", statistics_text(opts.ci, opts.alpha)),
        ("variability", variability_text()),
    ]


def _table(headers: list[str], rows: list[list[str]], tips: list[list[str]] | None, css: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cells = []
        for j, value in enumerate(row):
            tip = tips[i][j] if tips is not None and i < len(tips) and j < len(tips[i]) else ""
            attr = f' title="{escape(tip)}"' if tip else ""
            cells.append(f"<td{attr}>{escape(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    cls = f' class="{escape(css)}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(doc: Doc, title: str, header_lines: list[tuple[str, str]]) -> str:
    """The whole page. Markdown bold (**x**) in table cells becomes <b>."""
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
             f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1><div class=\"header\">"]
    parts += [f"<p><b>{escape(k)}:</b> {escape(v)}</p>" for k, v in header_lines]
    parts.append("</div>")
    for i, (kind, payload) in enumerate(doc.blocks):
        if kind == "h" and i == 0 and payload == title:  # the page's own title, already the <h1>
            continue
        if kind == "h":
            parts.append(f"<h2>{escape(payload)}</h2>")
        elif kind == "p":
            parts.append(f"<p>{escape(payload)}</p>")
        elif kind == "f":
            parts.append(payload)
        else:
            headers, _, md_rows, tips, css = payload
            html = _table(headers, md_rows, tips, css)
            parts.append(_bold(html))
    parts.append("</body></html>")
    return "\n".join(parts)


def _bold(html: str) -> str:
    """Markdown's **x** (the best cell of a column) as <b>x</b> inside table cells."""
    out, bold = [], False
    for i, chunk in enumerate(html.split("**")):
        if i:
            out.append("<b>" if not bold else "</b>")
            bold = not bold
        out.append(chunk)
    return "".join(out)
