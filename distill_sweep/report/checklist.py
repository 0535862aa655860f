"""The tuning report of a results directory: per arm, the expected best holdout score against the number of trials
(Dodge et al.'s estimator, analysis/expected_max.py) and a reporting checklist (Markdown and JSON) of the search
bounds, the trials, the selection rule, the chosen values, the seeds and the compute per cell.

    python -m distill_sweep.report.checklist RESULTS_DIR [--out DIR]

reads `<RESULTS_DIR>/tuning/` (each arm's study and its choice, sweep/tune.py) and the records, and writes
`tuning_checklist.md`, `tuning_checklist.json`, `expected_best.md` and `expected_best.html` (the curves as an
inline SVG figure, one line per arm with a band of ± one standard deviation) to DIR (default: RESULTS_DIR).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from distill_sweep.analysis.expected_max import expected_best_curve
from distill_sweep.records import files
from distill_sweep.records.record import RECORD
from distill_sweep.report.svg import PALETTE, legend
from distill_sweep.sweep.tune import TUNING_DIR, read_storage

HOURS = 3600.0


def _hours(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Wall-clock hours of these records by kind of device (cpu or gpu), from their wall_time_s."""
    out = {"cpu": 0.0, "gpu": 0.0}
    for record in records:
        kind = "cpu" if str(record.get("device") or "cpu").startswith("cpu") else "gpu"
        out[kind] += float(record.get("wall_time_s") or 0.0) / HOURS
    return out


def _trial_scores(chosen: dict[str, Any]) -> tuple[list[float], list[dict[str, Any]]]:
    """The COMPLETE trials' scores in trial order, and the records of every trial that has one."""
    import optuna

    study = optuna.load_study(study_name=chosen["study"], storage=read_storage(Path(chosen["journal"])))
    done = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    records = [files.read_record(Path(t.user_attrs["record"]) / RECORD) for t in study.get_trials(deepcopy=False)
               if "record" in t.user_attrs]
    return [float(t.value) for t in done], [r for r in records if r]


def tuning_arms(results_dir: Path) -> list[dict[str, Any]]:
    """One entry per tuned arm of `results_dir`: its choice, trial scores, expected-best curve, grid seeds and
    compute ([] where nothing was tuned)."""
    grid: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(results_dir.glob("**/" + RECORD)):
        record = files.read_record(path) or {}
        tuned = record.get("tuned")
        if isinstance(tuned, dict) and record.get("status") == "completed":
            grid.setdefault(str(tuned.get("study")), []).append(record)
    arms = []
    for path in sorted((results_dir / TUNING_DIR).glob("*.chosen.json")):
        chosen = json.loads(path.read_text())
        scores, trial_records = _trial_scores(chosen)
        runs = grid.get(chosen["study"], [])
        arms.append({
            **chosen,
            "completed_trials": len(scores), "trial_scores": scores,
            "expected_best": [{"n": c.n, "mean": c.mean, "std": c.std} for c in expected_best_curve(scores)],
            "seeds": sorted(int(r["seed"]) for r in runs),
            "compute_hours": {"trials": _hours(trial_records), "grid": _hours(runs)},
        })
    return arms


def _bounds(space: dict[str, Any]) -> str:
    parts = []
    for key, domain in space.items():
        if isinstance(domain, list):
            parts.append(f"{key} in {{{', '.join(map(str, domain))}}}")
        else:
            scale = ", log scale" if domain.get("log") else ""
            parts.append(f"{key} in [{domain['low']}, {domain['high']}]{scale}")
    return "; ".join(parts) or "(none)"


def checklist_markdown(arms: Sequence[dict[str, Any]]) -> str:
    """The reporting checklist, one section per arm."""
    if not arms:
        return "# Tuning checklist\n\nNo tuned arm in this results directory (tune.trials was 0).\n"
    lines = ["# Tuning checklist", ""]
    for arm in arms:
        hours = arm["compute_hours"]
        left = f"; left out (not read by this arm): {', '.join(arm['left_out'])}" if arm.get("left_out") else ""
        lines += [
            f"## {arm['task']} / {arm['objective']} / {arm['init']}", "",
            f"- search bounds: {_bounds(arm.get('space') or {})}{left}",
            f"- trials: {arm['completed_trials']} completed of a budget of {arm['trials']} ({arm['sampler']} sampler, "
            f"seed {arm['seed']})",
            f"- selection rule: the trial with the best {arm['metric']} on a holdout of {arm['holdout']} of the "
            "training split (the reported dev split is never used for tuning)",
            "- chosen values: " + ", ".join(f"{k}={v}" for k, v in arm["values"].items())
            + f" (trial {arm['trial']}, holdout {arm['metric']} {arm['score']:.4f})",
            f"- seeds: {', '.join(map(str, arm['seeds'])) or '(the grid has not run yet)'}",
            f"- compute: trials {hours['trials']['cpu']:.3f} CPU-h + {hours['trials']['gpu']:.3f} GPU-h; grid "
            f"{hours['grid']['cpu']:.3f} CPU-h + {hours['grid']['gpu']:.3f} GPU-h (wall-clock hours of the records)",
            f"- study: {arm['study']} in {arm['journal']}", "",
        ]
    return "\n".join(lines)


def expected_best_markdown(arms: Sequence[dict[str, Any]]) -> str:
    """Expected best holdout score (mean ± std) after n = 1 .. N trials, one column per arm."""
    if not arms:
        return ""
    longest = max(len(arm["expected_best"]) for arm in arms)
    head = ["n", *(_label(a) for a in arms)]
    lines = ["# Expected best holdout score after n trials (Dodge et al. 2019)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in range(1, longest + 1):
        cells = [f"{a['expected_best'][n - 1]['mean']:.4f} ± {a['expected_best'][n - 1]['std']:.4f}"
                 if n <= len(a["expected_best"]) else "" for a in arms]
        lines.append("| " + " | ".join([str(n), *cells]) + " |")
    return "\n".join(lines) + "\n"


def expected_best_svg(arms: Sequence[dict[str, Any]], width: int = 460, height: int = 280) -> str:
    """The expected-best curves: x = trials n, y = E[max of n] in percent, a band of ± one standard deviation;
    every point's tooltip has its numbers."""
    curves = [a["expected_best"] for a in arms if a["expected_best"]]
    if not curves:
        return ""
    pad_l, pad_r, pad_t, pad_b = 48, 12, 24, 38
    n_max = max(len(c) for c in curves)
    values = [100 * (p["mean"] + sign * p["std"]) for c in curves for p in c for sign in (-1, 1)]
    y0, y1 = min(values), max(values)
    y0, y1 = (y0 - 1, y1 + 1) if y1 - y0 < 1e-9 else (y0 - 0.05 * (y1 - y0), y1 + 0.05 * (y1 - y0))

    def px(n: float) -> float:
        return pad_l + (n - 1) / max(n_max - 1, 1) * (width - pad_l - pad_r)

    def py(y: float) -> float:
        return height - pad_b - (y - y0) / (y1 - y0) * (height - pad_t - pad_b)

    title = "Expected best holdout score after n trials"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
           f'aria-label="{escape(title)}">',
           f'<text x="{width / 2:.0f}" y="15" text-anchor="middle" font-size="13">{escape(title)}</text>',
           f'<rect x="{pad_l}" y="{pad_t}" width="{width - pad_l - pad_r}" height="{height - pad_t - pad_b}" '
           'fill="none" stroke="#999"/>',
           f'<text x="{(pad_l + width - pad_r) / 2:.0f}" y="{height - 6}" text-anchor="middle" font-size="11">'
           'trials n</text>',
           f'<text x="12" y="{(pad_t + height - pad_b) / 2:.0f}" text-anchor="middle" font-size="11" '
           f'transform="rotate(-90 12 {(pad_t + height - pad_b) / 2:.0f})">E[best score] (%)</text>']
    for k in range(5):
        y = y0 + (y1 - y0) * k / 4
        out.append(f'<text x="{pad_l - 6}" y="{py(y) + 4:.1f}" text-anchor="end" font-size="10">{y:.1f}</text>')
    for n in sorted({1, n_max, *range(1, n_max + 1, max(1, n_max // 6))}):
        out.append(f'<text x="{px(n):.1f}" y="{height - pad_b + 14}" text-anchor="middle" font-size="10">{n}</text>')
    for i, arm in enumerate(a for a in arms if a["expected_best"]):
        colour, curve = PALETTE[i % len(PALETTE)], arm["expected_best"]
        upper = [f"{px(p['n']):.1f},{py(100 * (p['mean'] + p['std'])):.1f}" for p in curve]
        lower = [f"{px(p['n']):.1f},{py(100 * (p['mean'] - p['std'])):.1f}" for p in curve]
        line = " ".join(f"{px(p['n']):.1f},{py(100 * p['mean']):.1f}" for p in curve)
        tips = "; ".join(f"n = {p['n']}: {100 * p['mean']:.2f} ± {100 * p['std']:.2f}" for p in curve)
        out.append(f'<g><title>{escape(_label(arm))}: {escape(tips)}</title>'
                   f'<polygon points="{" ".join(upper + lower[::-1])}" fill="{colour}" fill-opacity="0.15"/>'
                   f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.6"/></g>')
    out.append("</svg>")
    return "".join(out)


def _label(arm: dict[str, Any]) -> str:
    return f"{arm['objective']} {arm['init']} ({arm['task']})"


def expected_best_html(arms: Sequence[dict[str, Any]]) -> str:
    """A page of its own: the figure, its legend, and what the band is."""
    items = [(_label(a), PALETTE[i % len(PALETTE)], "") for i, a in enumerate(a for a in arms if a["expected_best"])]
    return ("<!doctype html><meta charset=\"utf-8\"><title>Expected best score after n trials</title>"
            "<body style=\"font-family: sans-serif; font-size: 12px\">" + expected_best_svg(arms) + legend(items)
            + "<p>Dodge et al. (2019): the expected best holdout score of n trials drawn from each arm's completed "
              "trials; the band is ± one standard deviation of that best.</p></body>")


def _shown_trials(longest: int) -> list[int]:
    """The trial counts a terminal table shows: 1, 2, 3, 5, 10, 20, 50, ... and the budget itself."""
    marks = {1, 2, 3, longest}
    scale = 1
    while scale <= longest:
        marks.update(m * scale for m in (1, 2, 5))
        scale *= 10
    return sorted(n for n in marks if n <= longest)


def tuning_section(doc: Any, files_out: dict[str, Any], results_dir: Path) -> None:
    """The report's tuning section (nothing where no arm was tuned): per arm its bounds, trials, choice and
    compute, then the expected best holdout score against the number of trials as a table and a figure. The
    checklist export (`main`) holds the same facts per arm in Markdown and JSON."""
    arms = tuning_arms(results_dir)
    if not arms:
        return
    doc.heading(f"Tuning ({len(arms)} arm(s))")
    doc.text("each arm's values were chosen by its own study on a holdout of its training split, with the same "
             "budget and sampler for every arm; the reported dev split was never used for tuning; compute is the "
             "records' wall-clock hours (python -m distill_sweep.report.checklist writes the full checklist)")
    rows = []
    for arm in arms:
        hours = arm["compute_hours"]
        left = f" (not read: {', '.join(arm['left_out'])})" if arm.get("left_out") else ""
        rows.append([_label(arm), _bounds(arm.get("space") or {}) + left,
                     f"{arm['completed_trials']}/{arm['trials']} {arm['sampler']}, seed {arm['seed']}",
                     ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in arm["values"].items())
                     + f" (trial {arm['trial']})",
                     f"{arm['metric']} {arm['score']:.4f}",
                     f"{hours['trials']['cpu'] + hours['trials']['gpu']:.3f} / "
                     f"{hours['grid']['cpu'] + hours['grid']['gpu']:.3f}",
                     ", ".join(map(str, arm["seeds"])) or "-"])
    doc.table(["arm", "search bounds", "trials", "chosen values", "holdout score", "hours trials / grid", "seeds"],
              rows)
    longest = max(len(arm["expected_best"]) for arm in arms)
    shown = _shown_trials(longest)
    doc.heading("Expected best holdout score after n trials (Dodge et al. 2019)")
    doc.text("mean ± std of the best of n trials drawn from each arm's completed trials (closed form); the curve "
             "says how much of an arm's score its budget bought, and whether more trials would still pay"
             + ("" if len(shown) == longest else f"; n = {', '.join(map(str, shown))} shown, every n in "
                "expected_best.csv"))
    doc.table(["n", *(_label(a) for a in arms)],
              [[str(n), *(f"{100 * a['expected_best'][n - 1]['mean']:.2f} ± {100 * a['expected_best'][n - 1]['std']:.2f}"
                          if n <= len(a["expected_best"]) else "" for a in arms)] for n in shown])
    items = [(_label(a), PALETTE[i % len(PALETTE)], "") for i, a in enumerate(a for a in arms if a["expected_best"])]
    doc.figure(expected_best_svg(arms) + legend(items))
    files_out["expected_best.csv"] = pd.DataFrame(
        [{"task": a["task"], "objective": a["objective"], "init": a["init"], "study": a["study"], **point}
         for a in arms for point in a["expected_best"]])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.report.checklist", description=__doc__.split("\n")[0])
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="where to write the files (default: results_dir)")
    args = parser.parse_args(argv)
    if not args.results_dir.is_dir():
        print(f"distill_sweep.report.checklist: error: {args.results_dir} is not a directory", file=sys.stderr)
        return 2
    arms = tuning_arms(args.results_dir)
    out = args.out or args.results_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "tuning_checklist.md").write_text(checklist_markdown(arms))
    files.write_json_atomic(out / "tuning_checklist.json", {"arms": arms})
    (out / "expected_best.md").write_text(expected_best_markdown(arms))
    (out / "expected_best.html").write_text(expected_best_html(arms))
    print(f"wrote the tuning checklist of {len(arms)} arm(s) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
