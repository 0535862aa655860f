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


def colour_bar(x: float, y: float, low: float, high: float, diverging: bool, unit: str, open_ends: bool = False) -> str:
    """What the colours mean: a bar from low to high (diverging: -span, 0, +span) with its ends and `unit`;
    `open_ends`: a fixed scale whose ends also stand for every value beyond them (labelled <= and >=)."""
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
        sign = ("≤" if anchor == "start" else "≥" if anchor == "end" else "") if open_ends and diverging else ""
        out.append(f'<text x="{lx:.1f}" y="{y + BAR_H + 11:.1f}" text-anchor="{anchor}" font-size="10">'
                   f'{sign}{v:{"+.1f" if diverging else ".1f"}}</text>')
    return "".join(out) + "</g>"


MUTED_INK = "#8a8a8a"  # the text of a cell whose difference is not significant


def muted(fill: str) -> str:
    """A cell's colour washed out to near white: what is not significant is not shown as a difference."""
    if not fill.startswith("rgb("):
        return fill
    rgb = [int(v) for v in fill[4:-1].split(",")]
    mixed = [round(v + (250 - v) * 0.8) for v in rgb]
    return f"rgb({mixed[0]},{mixed[1]},{mixed[2]})"


def heatmap(rows: Sequence[str], cols: Sequence[str], values: Sequence[Sequence[float]],
            texts: Sequence[Sequence[str]], tips: Sequence[Sequence[str]], *, diverging: bool, css: str,
            legend: str, unit: str = "", limits: tuple[float, float] | None = None,
            quiet: Sequence[Sequence[bool]] | None = None) -> str:
    """A grid: one rect per (row, column) coloured by its value (NaN grey), its text on it, its tip on hover,
    and under it a colour bar labelled `unit`; `legend` as the figure's caption. `limits`: the colour scale's
    fixed ends (diverging: symmetric around 0 to the larger), values beyond take the end's colour; without them
    the values' own range. `quiet`: cells drawn washed out with grey text (class "muted": not significant)."""
    finite = [v for line in values for v in line if not math.isnan(v) and math.isfinite(v)]
    low, high = limits if limits is not None else ((min(finite), max(finite)) if finite else (0.0, 1.0))
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
            fill, ink, cls = colour(shown, low, high, diverging), _ink(shown, low, high, diverging), ""
            if quiet is not None and quiet[i][j] and not math.isnan(v):
                fill, ink, cls = muted(fill), MUTED_INK, ' class="muted"'
            out.append(f'<g{cls}><title>{escape(tips[i][j])}</title><rect x="{x:.1f}" y="{y:.1f}" width="{CELL_W - 1}" '
                       f'height="{CELL_H - 1}" fill="{fill}"/>'
                       f'<text x="{x + CELL_W / 2:.1f}" y="{y + CELL_H * 0.68:.1f}" text-anchor="middle" font-size="11" '
                       f'fill="{ink}">{escape(texts[i][j])}</text></g>')
    out.append(colour_bar(left, top + CELL_H * len(rows) + 20, low, high, diverging, unit, open_ends=limits is not None))
    out.append("</svg>")
    return f'<figure class="{escape(css)}">' + "".join(out) + f"<figcaption>{escape(legend)}</figcaption></figure>"


@dataclass
class Series:
    label: str
    xs: list[float]
    mean: list[float]
    low: list[float]  # the band's bounds per point; NaN where there is none (one seed)
    high: list[float]
    colour: str
    dash: str = ""
    parts: list[int] | None = None  # points of one part are joined (a stage); None: one part
    n: list[int] | None = None  # seeds per point, for the tooltip
    context: bool = False  # another row shown faintly behind a small multiple: no band, no marks, no tooltip

    def runs(self) -> list[list[int]]:
        """The indices of each part, in order: consecutive points of the same part."""
        parts = self.parts or [0] * len(self.xs)
        out: list[list[int]] = []
        for i, part in enumerate(parts):
            if out and parts[out[-1][-1]] == part:
                out[-1].append(i)
            else:
                out.append([i])
        return out


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 2.5, 5, 10) if m * step >= raw)
    start = math.ceil(low / step) * step
    return [start + k * step for k in range(int((high - start) / step + 1e-9) + 1)]


def epoch_ticks(low: float, high: float, count: int = 8) -> list[int]:
    """Whole epochs between low and high: every one, or every k-th (k a whole number) when there are more
    than `count`."""
    first, last = math.ceil(low - 1e-9), math.floor(high + 1e-9)
    step = max(1, math.ceil((last - first + 1) / count))
    return list(range(first, last + 1, step))


BAND_REACH = 2.0  # a band reaches at most max(this, the means' span) beyond the means; the rest is cut off


def y_range(series: Sequence[Series]) -> tuple[float, float]:
    """The y axis of a chart of scores in percent: every mean, and the bands as far as BAND_REACH allows
    and a score can go, so that the wide t-interval of 2 seeds (t = 12.7) does not squeeze the lines into a
    sliver; plus 5% margins."""
    means = [m for s in series for m in s.mean if math.isfinite(m)]
    if not means:
        return 0.0, 1.0
    lo_m, hi_m = min(means), max(means)
    reach = max(BAND_REACH, hi_m - lo_m)
    lows = [v for s in series if not s.context for v in s.low if math.isfinite(v)]
    highs = [v for s in series if not s.context for v in s.high if math.isfinite(v)]
    y0, y1 = max(min([lo_m, *lows]), lo_m - reach), min(max([hi_m, *highs]), hi_m + reach)
    # nor past what a score in percent can be (accuracy, F1: 0 to 100; MCC, Pearson: -100 to 100)
    y0, y1 = max(y0, min(lo_m, 0.0 if lo_m >= 0 else -100.0)), min(y1, max(hi_m, 100.0))
    margin = (y1 - y0) * 0.05 or 1.0
    return y0 - margin, y1 + margin


DODGE = 12.0  # pixels between the rows' marks at one epoch at most, so their bands do not cover each other


def line_chart(title: str, series: Sequence[Series], *, x_label: str, y_label: str, boundary: float | None = None,
               css: str = "curve", width: int = 420, height: int = 260,
               y_limits: tuple[float, float] | None = None) -> str:
    """Lines of means, each part (stage) on its own, with translucent bands (a whisker at a lone point),
    whole-epoch ticks, a dashed vertical line at `boundary`. Bands are cut at the plot's edge (`y_range`) and
    an open arrowhead there says so; every point's tooltip has its numbers."""
    pad_l, pad_r, pad_t, pad_b = 48, 12, 24, 38
    xs = [x for s in series for x in s.xs]
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    x0, x1 = x0 - 0.25, x1 + 0.25  # room for the dodged marks at the ends
    y0, y1 = y_limits if y_limits is not None else y_range(series)
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b

    def px(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return height - pad_b - (y - y0) / (y1 - y0) * plot_h

    out = [f'<svg class="{escape(css)}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="{escape(title)}">',
           f'<text x="{width / 2:.0f}" y="15" text-anchor="middle" font-size="13">{escape(title)}</text>',
           f'<rect x="{pad_l}" y="{pad_t}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    for y in _ticks(y0, y1):
        out.append(f'<line x1="{pad_l - 4}" x2="{width - pad_r}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>'
                   f'<text x="{pad_l - 6}" y="{py(y) + 4:.1f}" text-anchor="end" font-size="10">{y:g}</text>')
    for x in epoch_ticks(x0, x1):
        out.append(f'<text class="xtick" x="{px(x):.1f}" y="{height - pad_b + 14}" text-anchor="middle" '
                   f'font-size="10">{x}</text>')
    out.append(f'<text x="{(pad_l + width - pad_r) / 2:.0f}" y="{height - 6}" text-anchor="middle" font-size="11">'
               f'{escape(x_label)}</text>')
    out.append(f'<text x="12" y="{(pad_t + height - pad_b) / 2:.0f}" text-anchor="middle" font-size="11" '
               f'transform="rotate(-90 12 {(pad_t + height - pad_b) / 2:.0f})">{escape(y_label)}</text>')
    # the marks in a nested <svg>: it clips what leaves the plot (a cut band) without an id to clash
    out.append(f'<svg x="{pad_l}" y="{pad_t}" width="{plot_w}" height="{plot_h}" '
               f'viewBox="{pad_l} {pad_t} {plot_w} {plot_h}">')
    if boundary is not None and x0 <= boundary <= x1:
        out.append(f'<line class="boundary" x1="{px(boundary):.1f}" x2="{px(boundary):.1f}" y1="{pad_t}" '
                   f'y2="{height - pad_b}" stroke="#888" stroke-dasharray="4 3"/>')
    for s in (s for s in series if s.context):
        for run in s.runs():
            points = " ".join(f"{px(s.xs[i]):.1f},{py(s.mean[i]):.1f}" for i in run)
            out.append(f'<polyline class="context" points="{points}" fill="none" stroke="#d4d4d4" stroke-width="1.2"/>'
                       if len(run) >= 2 else f'<circle class="context" cx="{points.split(",")[0]}" '
                       f'cy="{points.split(",")[1]}" r="2.2" fill="#d4d4d4"/>')
    shown = [s for s in series if not s.context]
    # the rows' marks at one epoch side by side: at most DODGE apart, together within half an epoch
    dodge = min(DODGE, 0.5 * plot_w / (x1 - x0) / max(1, len(shown)))
    for k, s in enumerate(shown):
        shift = (k - (len(shown) - 1) / 2) * dodge

        def qx(x: float, shift: float = shift) -> float:
            return px(x) + shift

        tips = []
        for i, (x, m) in enumerate(zip(s.xs, s.mean, strict=True)):
            band = f", 95% CI [{s.low[i]:.2f}, {s.high[i]:.2f}]" if math.isfinite(s.low[i]) else ", no interval"
            tips.append(f"epoch {x:g}: {m:.2f}{band}" + (f", n = {s.n[i]}" if s.n is not None else ""))
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        parts = [f'<g class="series"><title>{escape(s.label)}: {escape("; ".join(tips))}</title>']
        for run in s.runs():
            banded = [i for i in run if math.isfinite(s.low[i]) and math.isfinite(s.high[i])]
            if len(banded) == len(run) and len(run) >= 2:
                upper = [f"{qx(s.xs[i]):.1f},{py(s.high[i]):.1f}" for i in run]
                lower = [f"{qx(s.xs[i]):.1f},{py(s.low[i]):.1f}" for i in run]
                parts.append(f'<polygon class="band" points="{" ".join(upper + lower[::-1])}" fill="{s.colour}" '
                             'fill-opacity="0.15"/>')
            else:  # a lone point, or a part where some point has no interval: one whisker per point
                parts += [f'<line class="band" x1="{qx(s.xs[i]):.1f}" x2="{qx(s.xs[i]):.1f}" y1="{py(s.low[i]):.1f}" '
                          f'y2="{py(s.high[i]):.1f}" stroke="{s.colour}" stroke-opacity="0.45" stroke-width="3"{dash}/>'
                          for i in banded]
            for i in banded:  # a band cut at the plot's edge: an open arrowhead there says it goes on
                if s.high[i] > y1:
                    parts.append(f'<path class="cut" d="M{qx(s.xs[i]) - 4:.1f},{pad_t + 7} L{qx(s.xs[i]):.1f},{pad_t + 1} '
                                 f'L{qx(s.xs[i]) + 4:.1f},{pad_t + 7}" fill="none" stroke="{s.colour}" stroke-width="1.5"/>')
                if s.low[i] < y0:
                    bottom = height - pad_b
                    parts.append(f'<path class="cut" d="M{qx(s.xs[i]) - 4:.1f},{bottom - 7} L{qx(s.xs[i]):.1f},{bottom - 1} '
                                 f'L{qx(s.xs[i]) + 4:.1f},{bottom - 7}" fill="none" stroke="{s.colour}" stroke-width="1.5"/>')
            if len(run) >= 2:
                points = " ".join(f"{qx(s.xs[i]):.1f},{py(s.mean[i]):.1f}" for i in run)
                parts.append(f'<polyline points="{points}" fill="none" stroke="{s.colour}" stroke-width="1.6"{dash}/>')
            # a dashed row's marks are hollow: a lone point has no line to show its dashes
            mark = f'fill="#fff" stroke="{s.colour}" stroke-width="1.5"' if s.dash else f'fill="{s.colour}"'
            parts += [f'<circle cx="{qx(s.xs[i]):.1f}" cy="{py(s.mean[i]):.1f}" r="2.8" {mark}/>' for i in run]
        out.append("".join(parts) + "</g>")
    out.append("</svg></svg>")
    return "".join(out)


def legend(items: Sequence[tuple[str, str, str]]) -> str:
    """An HTML legend: (label, colour, dash) per line."""
    spans = []
    for label, col, dash in items:
        stroke = f' stroke-dasharray="{dash}"' if dash else ""
        mark = f'fill="#fff" stroke="{col}" stroke-width="1.5"' if dash else f'fill="{col}"'  # as line_chart's
        spans.append(f'<span class="key"><svg width="26" height="10"><line x1="0" x2="26" y1="5" y2="5" stroke="{col}" '
                     f'stroke-width="2"{stroke}/><circle cx="13" cy="5" r="2.8" {mark}/></svg>{escape(label)}</span>')
    return '<div class="legend">' + "".join(spans) + "</div>"
