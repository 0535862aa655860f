"""The tuning report of a results directory: per arm, the expected best holdout score against the number of trials
(Dodge et al.'s estimator, analysis/expected_max.py) and a reporting checklist (Markdown and JSON) of the search
bounds, the trials, the selection rule, the chosen values, the seeds and the compute per cell.

    python -m distill_sweep.report.checklist RESULTS_DIR [--out DIR]

reads `<RESULTS_DIR>/tuning/` (each arm's study and its choice, sweep/tune.py) and the records, and writes
`tuning_checklist.md`, `tuning_checklist.json` and `expected_best.md` to DIR (default: RESULTS_DIR).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distill_sweep.analysis.expected_max import expected_best_curve
from distill_sweep.records import files
from distill_sweep.records.record import RECORD
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
    head = ["n", *(f"{a['objective']} {a['init']} ({a['task']})" for a in arms)]
    lines = ["# Expected best holdout score after n trials (Dodge et al. 2019)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in range(1, longest + 1):
        cells = [f"{a['expected_best'][n - 1]['mean']:.4f} ± {a['expected_best'][n - 1]['std']:.4f}"
                 if n <= len(a["expected_best"]) else "" for a in arms]
        lines.append("| " + " | ".join([str(n), *cells]) + " |")
    return "\n".join(lines) + "\n"


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
    print(f"wrote the tuning checklist of {len(arms)} arm(s) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
