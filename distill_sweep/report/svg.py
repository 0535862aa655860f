"""Inline SVG for the HTML report: heatmaps (a grid of coloured cells) and line charts with bands.

Strings only, no plotting library: the page stays one small file that any browser draws offline. Every
mark carries a <title> (the browser's tooltip) with its exact numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

Colour = tuple[int, int, int]
SEQUENTIAL: tuple[Colour, ...] = ((247, 251, 255), (107, 174, 214), (8, 48, 107))  # low -> high score
DIVERGING: tuple[Colour, ...] = ((178, 24, 43), (247, 247, 247), (33, 102, 172))  # below 0 -> 0 -> above 0
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
DASHES = ("", "6 3", "2 3", "8 3 2 3")
MISSING_FILL = "#e0e0e0"
CELL_W, CELL_H, CHAR_W = 74, 24, 7.0  # pixels; CHAR_W: a label character at the page's 12px font
BAR_STEPS, BAR_W, BAR_H = 24, 192, 10  # the colour bar under every heatmap: rects, not a gradient (no ids)


def _mix(stops: Sequence[Colour], t: float) -> str:
    """The colour at t in [0, 1] along evenly spaced stops."""
    t = min(1.0, max(0.0, t))
    pos = t * (len(stops) - 1)
    i = min(int(pos), len(stops) - 2)
    frac = pos - i
    rgb = [round(a + (b - a) * frac) for a, b in zip(stops[i], stops[i + 1], strict=True)]
    return f"rgb({rgb[0]},{rgb[1]},{rgb[2]})"


def colour(value: float, low: float, high: float, diverging: bool) -> str:
    """Sequential between low and high; diverging around 0 (symmetric to max(|low|, |high|))."""
    if math.isnan(value):
        return MISSING_FILL
    if diverging:
        span = max(abs(low), abs(high)) or 1.0
        return _mix(DIVERGING, 0.5 + 0.5 * max(-1.0, min(1.0, value / span)))
    return _mix(SEQUENTIAL, 0.5 if high <= low else (value - low) / (high - low))


def _ink(value: float, low: float, high: float, diverging: bool) -> str:
    """Black or white text, whichever reads on the cell."""
    if math.isnan(value):
        return "#000"
    if diverging:
        span = max(abs(low), abs(high)) or 1.0
        return "#fff" if abs(value) / span > 0.6 else "#000"
    return "#fff" if high > low and (value - low) / (high - low) > 0.6 else "#000"


def colour_bar(x: float, y: float, low: float, high: float, diverging: bool, unit: str) -> str:
    """What the colours mean: a bar from low to high (diverging: -span, 0, +span) with its ends and `unit`."""
    if diverging:
        low, high = -(max(abs(low), abs(high)) or 1.0), max(abs(low), abs(high)) or 1.0
    out = [f'<g class="colourbar"><text x="{x:.1f}" y="{y - 3:.1f}" font-size="11">{escape(unit)}</text>']
    for k in range(BAR_STEPS):
        v = low + (high - low) * (k + 0.5) / BAR_STEPS
        out.append(f'<rect x="{x + k * BAR_W / BAR_STEPS:.1f}" y="{y:.1f}" width="{BAR_W / BAR_STEPS + 0.5:.1f}" '
                   f'height="{BAR_H}" fill="{colour(v, low, high, diverging)}"/>')
    labels = [(low, "start"), (high, "end")] + ([(0.0, "middle")] if diverging else [])
    for v, anchor in labels:
        lx = x + BAR_W * ((v - low) / (high - low) if high > low else 0.5)
        out.append(f'<text x="{lx:.1f}" y="{y + BAR_H + 11:.1f}" text-anchor="{anchor}" font-size="10">'
                   f'{v:{"+.1f" if diverging else ".1f"}}</text>')
    return "".join(out) + "</g>"


def heatmap(rows: Sequence[str], cols: Sequence[str], values: Sequence[Sequence[float]],
            texts: Sequence[Sequence[str]], tips: Sequence[Sequence[str]], *, diverging: bool, css: str,
            legend: str, unit: str = "") -> str:
    """A grid: one rect per (row, column) coloured by its value (NaN grey), its text on it, its tip on hover,
    and under it a colour bar of the values' range labelled `unit`; `legend` as the figure's caption."""
    finite = [v for line in values for v in line if not math.isnan(v) and math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    left = 12 + CHAR_W * max((len(r) for r in rows), default=4)
    top = 16 + CHAR_W * max((len(c) for c in cols), default=4) * 0.75  # column labels turned 45 degrees
    # the last column's label, turned 45 degrees, reaches past the grid's right edge
    width = left + CELL_W * len(cols) + 10 + CHAR_W * max((len(c) for c in cols), default=4) * 0.75
    height = top + CELL_H * len(rows) + 6 + 40  # the colour bar below the grid
    width = max(width, left + BAR_W + 20)
    out = [f'<svg class="{escape(css)}" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'role="img" aria-label="{escape(legend)}">']
    for j, col in enumerate(cols):
        x = left + CELL_W * (j + 0.5)
        out.append(f'<text x="{x:.1f}" y="{top - 6:.1f}" transform="rotate(-45 {x:.1f} {top - 6:.1f})" '
                   f'font-size="12">{escape(col)}</text>')
    for i, row in enumerate(rows):
        y = top + CELL_H * i
        out.append(f'<text x="{left - 6:.1f}" y="{y + CELL_H * 0.68:.1f}" text-anchor="end" font-size="12">'
                   f'{escape(row)}</text>')
        for j in range(len(cols)):
            v = values[i][j]
            # an infinite effect (zero-variance differences) takes the strongest colour of its sign
            shown = math.copysign(max(abs(low), abs(high)) or 1.0, v) if math.isinf(v) else v
            x = left + CELL_W * j
            out.append(f'<g><title>{escape(tips[i][j])}</title><rect x="{x:.1f}" y="{y:.1f}" width="{CELL_W - 1}" '
                       f'height="{CELL_H - 1}" fill="{colour(shown, low, high, diverging)}"/>'
                       f'<text x="{x + CELL_W / 2:.1f}" y="{y + CELL_H * 0.68:.1f}" text-anchor="middle" font-size="11" '
                       f'fill="{_ink(shown, low, high, diverging)}">{escape(texts[i][j])}</text></g>')
    out.append(colour_bar(left, top + CELL_H * len(rows) + 20, low, high, diverging, unit))
    out.append("</svg>")
    return f'<figure class="{escape(css)}">' + "".join(out) + f"<figcaption>{escape(legend)}</figcaption></figure>"


@dataclass
class Series:
    label: str
    xs: list[float]
    mean: list[float]
    std: list[float]  # the band: mean +- std (0 where a point has one seed)
    colour: str
    dash: str = ""


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if m * step >= raw)
    start = math.ceil(low / step) * step
    return [start + k * step for k in range(int((high - start) / step + 1e-9) + 1)]


def line_chart(title: str, series: Sequence[Series], *, x_label: str, y_label: str, boundary: float | None = None,
               css: str = "curve", width: int = 420, height: int = 260) -> str:
    """Lines of means with a translucent band of +-std, axes with ticks, a dashed vertical line at `boundary`."""
    pad_l, pad_r, pad_t, pad_b = 48, 12, 24, 38
    xs = [x for s in series for x in s.xs]
    lows = [m - d for s in series for m, d in zip(s.mean, s.std, strict=True)]
    highs = [m + d for s in series for m, d in zip(s.mean, s.std, strict=True)]
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y0, y1 = (min(lows), max(highs)) if lows else (0.0, 1.0)
    if x1 == x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    margin = (y1 - y0) * 0.05 or 1.0
    y0, y1 = y0 - margin, y1 + margin

    def px(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * (width - pad_l - pad_r)

    def py(y: float) -> float:
        return height - pad_b - (y - y0) / (y1 - y0) * (height - pad_t - pad_b)

    out = [f'<svg class="{escape(css)}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="{escape(title)}">',
           f'<text x="{width / 2:.0f}" y="15" text-anchor="middle" font-size="13">{escape(title)}</text>',
           f'<rect x="{pad_l}" y="{pad_t}" width="{width - pad_l - pad_r}" height="{height - pad_t - pad_b}" '
           'fill="none" stroke="#999"/>']
    for y in _ticks(y0, y1):
        out.append(f'<line x1="{pad_l - 4}" x2="{width - pad_r}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>'
                   f'<text x="{pad_l - 6}" y="{py(y) + 4:.1f}" text-anchor="end" font-size="10">{y:g}</text>')
    for x in _ticks(x0, x1, 6):
        out.append(f'<text x="{px(x):.1f}" y="{height - pad_b + 14}" text-anchor="middle" font-size="10">{x:g}</text>')
    out.append(f'<text x="{(pad_l + width - pad_r) / 2:.0f}" y="{height - 6}" text-anchor="middle" font-size="11">'
               f'{escape(x_label)}</text>')
    out.append(f'<text x="12" y="{(pad_t + height - pad_b) / 2:.0f}" text-anchor="middle" font-size="11" '
               f'transform="rotate(-90 12 {(pad_t + height - pad_b) / 2:.0f})">{escape(y_label)}</text>')
    if boundary is not None and x0 <= boundary <= x1:
        out.append(f'<line class="boundary" x1="{px(boundary):.1f}" x2="{px(boundary):.1f}" y1="{pad_t}" '
                   f'y2="{height - pad_b}" stroke="#888" stroke-dasharray="4 3"/>')
    for s in series:
        upper = [f"{px(x):.1f},{py(m + d):.1f}" for x, m, d in zip(s.xs, s.mean, s.std, strict=True)]
        lower = [f"{px(x):.1f},{py(m - d):.1f}" for x, m, d in zip(s.xs, s.mean, s.std, strict=True)]
        points = " ".join(f"{px(x):.1f},{py(m):.1f}" for x, m in zip(s.xs, s.mean, strict=True))
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        tip = "; ".join(f"epoch {x:g}: {m:.2f}±{d:.2f}" for x, m, d in zip(s.xs, s.mean, s.std, strict=True))
        out.append(f'<g class="series"><title>{escape(s.label)}: {escape(tip)}</title>'
                   f'<polygon points="{" ".join(upper + lower[::-1])}" fill="{s.colour}" fill-opacity="0.12"/>'
                   f'<polyline points="{points}" fill="none" stroke="{s.colour}" stroke-width="1.6"{dash}/>'
                   + "".join(f'<circle cx="{px(x):.1f}" cy="{py(m):.1f}" r="2.5" fill="{s.colour}"/>'
                             for x, m in zip(s.xs, s.mean, strict=True)) + "</g>")
    out.append("</svg>")
    return "".join(out)


def legend(items: Sequence[tuple[str, str, str]]) -> str:
    """An HTML legend: (label, colour, dash) per line."""
    spans = []
    for label, col, dash in items:
        stroke = f' stroke-dasharray="{dash}"' if dash else ""
        spans.append(f'<span class="key"><svg width="26" height="10"><line x1="0" x2="26" y1="5" y2="5" stroke="{col}" '
                     f'stroke-width="2"{stroke}/></svg>{escape(label)}</span>')
    return '<div class="legend">' + "".join(spans) + "</div>"
