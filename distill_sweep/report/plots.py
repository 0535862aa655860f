"""Dev curves per task: one line per row of a table (mean over seeds with its t-interval band)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from distill_sweep.analysis.curves import curve_lines, curve_means
from distill_sweep.analysis.paper import METRIC_ABBREV, task_label, task_order
from distill_sweep.analysis.stats import metric_range  # a band beyond it is drawn cut there
from distill_sweep.report.svg import BAND_REACH, epoch_ticks


def plot_curves(curves: pd.DataFrame, path: Path, title: str, systems: Sequence[str],
                inits: Sequence[str] | None = None) -> bool:
    """Per-epoch dev curves of the primary metric: one subplot per task, one line per system (per
    system x init when `inits` is given), in the order given, the band the t-interval of the mean over
    seeds (curves.curve_means); the dashed vertical line is the boundary between the intermediate and the
    scored stages, where the curves are given every stage (curves.curve_stages). False if there is no data."""
    by = ["system", "init_label"] if inits is not None else ["system"]
    means = curve_means(curves, by)
    if means.empty:
        return False
    import matplotlib

    matplotlib.use("Agg")  # headless: never needs a display
    import matplotlib.pyplot as plt

    tasks = task_order(means["task"].unique())
    ncols = min(4, len(tasks))
    nrows = math.ceil(len(tasks) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.2 * nrows), squeeze=False)
    present = set(means["system"])
    systems = [s for s in systems if s in present] + sorted(present - set(systems))
    cmap = plt.get_cmap("tab10" if len(systems) <= 10 else "tab20")
    colors = {s: cmap(i % cmap.N) for i, s in enumerate(systems)}
    levels: list[str | None] = list(inits) if inits is not None else [None]
    styles = {lab: ["-", "--", ":", "-."][i % 4] for i, lab in enumerate(levels)}
    for ax, task in zip(axes.flat, tasks, strict=False):
        sub = means[means["task"] == task]
        lo, hi = _y_limits(sub, *metric_range(str(sub["metric"].iloc[0])))
        for system, init, label, line in curve_lines(sub, systems, inits):  # legend in table order
            for _, part in line.groupby("scored", sort=False):  # no line across the stages' boundary
                ax.plot(part["x"], part["mean"], styles[init], color=colors[system], label=label, marker=".", lw=1.2)
                low, high = part["ci_low"].clip(lo, hi), part["ci_high"].clip(lo, hi)  # cut: see _y_limits
                ax.fill_between(part["x"], low, high, color=colors[system], alpha=0.12)
                if len(part) == 1:  # a lone epoch: its interval as an error bar (fill_between draws nothing)
                    ax.vlines(part["x"], low, high, color=colors[system], alpha=0.4, lw=3)
                cut = part[(part["ci_high"] > hi) | (part["ci_low"] < lo)]
                for x, c_low, c_high in zip(cut["x"], cut["ci_low"], cut["ci_high"], strict=True):
                    # a band cut at the plot's edge: an open arrowhead there says it goes on
                    if c_high > hi:
                        ax.plot([x], [hi], ls="none", marker="^", mfc="none", color=colors[system], ms=5)
                    if c_low < lo:
                        ax.plot([x], [lo], ls="none", marker="v", mfc="none", color=colors[system], ms=5)
        boundary = sub["boundary"].dropna()
        if not boundary.empty:
            ax.axvline(float(boundary.iloc[0]), color="grey", ls="--", lw=0.8)
        metric = str(sub["metric"].iloc[0])
        ax.set_title(task_label(task))
        xs = sub["x"].dropna()
        ax.set_xlim(xs.min() - 0.5, xs.max() + 0.5)  # one epoch alone must not give an axis of 0.95 ... 1.05
        ax.set_xticks(epoch_ticks(xs.min(), xs.max()))  # whole epochs
        margin = (hi - lo) * 0.05 or 1.0
        ax.set_ylim(lo - margin, hi + margin)
        ax.set_xlabel("epoch (intermediate | scored stage)" if not boundary.empty else "epoch of the scored stage")
        ax.set_ylabel(f"dev {METRIC_ABBREV.get(metric, metric)} (%)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(tasks):]:
        ax.set_visible(False)
    legend: dict[str, Any] = {}  # every line of every subplot once (a task may lack some rows)
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    order = [s if i is None else f"{s} [{i}]" for s in systems for i in levels]
    labels = [lab for lab in order if lab in legend]
    fig.legend([legend[lab] for lab in labels], labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


def _y_limits(sub: pd.DataFrame, lo: float, hi: float) -> tuple[float, float]:
    """Where a task's bands are cut: within what the metric can be (lo, hi), and no farther from the means than
    svg.BAND_REACH or the means' span (as the HTML charts), so a 2-seed band does not flatten the lines."""
    lo_m, hi_m = float(sub["mean"].min()), float(sub["mean"].max())
    reach = max(BAND_REACH, hi_m - lo_m)
    lows, highs = sub["ci_low"].dropna(), sub["ci_high"].dropna()
    y0 = max(min([lo_m, *lows]), lo_m - reach, lo)
    y1 = min(max([hi_m, *highs]), hi_m + reach, hi)
    return y0, y1


def plot_speed_accuracy(summary: pd.DataFrame, path: Path) -> bool:
    """FastBERT's curves: dev metric against the speed-up in FLOPs, one subplot per task, one line per row."""
    if summary.empty:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = task_order(summary["task"].unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.2), squeeze=False)
    for ax, task in zip(axes.flat, tasks, strict=False):
        sub = summary[summary["task"] == task]
        for system, line in sub.groupby("system", sort=False):
            line = line.sort_values("speedup")
            ax.errorbar(line["speedup"], line["mean"], yerr=line["std"].fillna(0.0), marker=".", label=system,
                        capsize=2, lw=1.2)
        metric = str(sub["metric"].iloc[0])
        ax.set_title(task_label(task))
        ax.set_xlabel("speed-up (FLOPs, x)")
        ax.set_ylabel(f"dev {METRIC_ABBREV.get(metric, metric)} (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True
