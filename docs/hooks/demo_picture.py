"""The README's picture of a report: its Table 3 as the report printed it, drawn as an SVG of monospace text.

    make demo > /tmp/demo-report.txt        # the demo grid into demo-results/, then its report
    python docs/hooks/demo_picture.py /tmp/demo-report.txt docs/assets/demo-report.svg

The picture is what the report printed, line for line; nothing is typed in. Not a mkdocs hook: run by hand
when the report's layout changes.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

CHAR_W, LINE_H, PAD = 7.4, 17, 14
# the caption: the report command of `make demo` (the Makefile's DEMO_RESULTS, outside the default store)
CAPTION = "$ python -m distill_sweep.report demo-results preset=demo"


def section_table(report: str, title: str) -> list[str]:
    """The section of the printed report whose `== title` line starts with `title`: its title and its table
    (up to the first blank line after the table)."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"== {title}"))
    out = [lines[start], ""]
    for line in lines[start + 2:]:
        if not line.strip():
            break
        out.append(line.rstrip())
    return out


def svg(lines: list[str], title: str) -> str:
    width = int(max(len(line) for line in [title, *lines]) * CHAR_W + 2 * PAD)
    height = (len(lines) + 2) * LINE_H + 2 * PAD
    rows = [f'<text x="{PAD}" y="{PAD + LINE_H}" class="t">{escape(title)}</text>']
    rows += [f'<text x="{PAD}" y="{PAD + (i + 3) * LINE_H}" xml:space="preserve">{escape(line)}</text>'
             for i, line in enumerate(lines)]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">\n'
            "<style>text{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;"
            "fill:#1f2328}.t{font-weight:bold}</style>\n"
            f'<rect width="{width}" height="{height}" rx="6" fill="#f6f8fa" stroke="#d0d7de"/>\n'
            + "\n".join(rows) + "\n</svg>\n")


def main(argv: list[str]) -> int:
    report, out = Path(argv[0]), Path(argv[1])
    lines = section_table(report.read_text(), "Table 3")
    out.write_text(svg(lines, CAPTION))
    print(f"wrote {out}: {len(lines)} lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
