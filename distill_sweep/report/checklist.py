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
import math
import sys
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from distill_sweep.analysis.expected_max import expected_best_curve, unbiased_expected_best
from distill_sweep.errors import DiskWriteError
from distill_sweep.records import files
from distill_sweep.records.disk import problem
from distill_sweep.records.record import RECORD
from distill_sweep.report import budget_verdict
from distill_sweep.report.svg import PALETTE, legend
from distill_sweep.report.tuning_studies import (
    COMPARISON_HEADER,
    COMPARISON_NOTE,
    STUDIES_HEADER,
    STUDIES_NOTE,
    comparison_rows,
    studies_line,
    studies_problem,
    studies_rows,
    study_journal,
)
from distill_sweep.sweep.journal import journal_damage, read_storage, stored_at, stored_path
from distill_sweep.sweep.tune import TUNING_DIR

HOURS = 3600.0
# what chosen.json must hold for the checklist to state it (tune.choose writes them): key -> (type, in words)
_CHOSEN = {"study": (str, "a name"), "trial": (int, "an integer"), "score": (float, "a number"),
           "values": (dict, "a mapping"), "trials": (int, "an integer"), "sampler": (str, "a name"),
           "seed": (int, "an integer"), "holdout": (float, "a number"), "metric": (str, "a name"),
           "task": (str, "a name"), "objective": (str, "a name"), "init": (str, "a name")}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _chosen_problem(chosen: Any) -> str | None:
    """Why a chosen.json cannot be stated (None: it can)."""
    if not isinstance(chosen, dict):
        return "not a JSON object (damaged or unreadable)"
    for key, (kind, words) in _CHOSEN.items():
        value = chosen.get(key)
        if key not in chosen:
            return f"no `{key}`"
        ok = _number(value) if kind is float else isinstance(value, kind) and not isinstance(value, bool)
        if not ok:
            return f"`{key}` is {value!r}, not {words}"
    space = chosen.get("space") if isinstance(chosen.get("space"), dict) else {}
    for key, value in chosen["values"].items():  # each within its space (a hand-edited or damaged value is no choice)
        domain = space.get(key)
        if isinstance(domain, list) and value not in domain:
            return f"its value {key}={value!r} is not one of the space's {domain}"
        if isinstance(domain, dict) and _number(domain.get("low")) and _number(domain.get("high")) and not (
                _number(value) and domain["low"] <= value <= domain["high"]):
            return f"its value {key}={value!r} is not in the space's [{domain['low']}, {domain['high']}]"
    return None


def charged_hours(records: Sequence[dict[str, Any]], packs: dict[str, list[float]] | None = None
                  ) -> dict[str, float]:
    """Wall-clock hours charged to these records by kind of device (cpu or gpu). A record trained in a pack
    (`pack`: the pack's id) shares its process's time with the pack's other members (`packs`: every member's wall
    time per pack id, from the whole results directory): each member is charged its share of every stretch of
    that time, split over the members still training then, so the members' charges add up to the pack's time,
    not the member count times it."""
    out = {"cpu": 0.0, "gpu": 0.0}
    for record in records:
        wall = float(record.get("wall_time_s")) if _number(record.get("wall_time_s")) else 0.0
        pack = record.get("pack")
        walls = sorted((packs or {}).get(pack, [])) if isinstance(pack, str) else []
        if len(walls) > 1:
            wall = _pack_share(wall, walls)
        kind = "cpu" if str(record.get("device") or "cpu").startswith("cpu") else "gpu"
        out[kind] += wall / HOURS
    return out


def _pack_share(wall: float, walls: Sequence[float]) -> float:
    """A member's share of its pack's time: members that start together and end after `walls` (sorted) seconds;
    the stretch between two ends is split over the members still training in it."""
    share, before = 0.0, 0.0
    for i, end in enumerate(walls):
        if end > wall:
            break
        share += (end - before) / (len(walls) - i)
        before = end
    return share


def _pack_walls(records: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Every packed record's wall time per pack id."""
    out: dict[str, list[float]] = {}
    for record in records:
        pack = record.get("pack")
        if isinstance(pack, str) and _number(record.get("wall_time_s")):
            out.setdefault(pack, []).append(float(record.get("wall_time_s")))
    return out


def _load_study(journal: Path, name: str) -> tuple[Any, str | None]:
    """(the study, None), or (None, why it cannot be read). Read only: a missing journal is not created (Optuna's
    backend would), a damaged one is not mended (the next sweep mends it, sweep/tune.py)."""
    import optuna

    if not journal.is_file():
        return None, f"its journal {journal} is missing (a moved or partly copied store?)"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        return optuna.load_study(study_name=name, storage=read_storage(journal)), None
    except KeyError:
        return None, f"its journal {journal} holds no study {name!r}"
    except Exception as err:  # noqa: BLE001 - a journal Optuna cannot replay, whatever it raises
        return None, f"its journal {journal} is damaged ({type(err).__name__}: {str(err)[:120]})"


def _trial_scores(study: Any, results_dir: Path, notes: list[str]) -> tuple[list[float], list[dict[str, Any]]]:
    """The COMPLETE trials' scores in trial order, and the records of every trial that has one (a record that
    cannot be read: a note, its compute left out)."""
    import optuna

    trials = study.get_trials(deepcopy=False)
    done = [float(t.value) for t in trials if t.state == optuna.trial.TrialState.COMPLETE and _number(t.value)]
    records = []
    for t in trials:
        if "record" not in t.user_attrs:
            continue
        where = stored_at(str(t.user_attrs["record"]), results_dir) / RECORD
        record = files.read_record(where)
        problem = _record_problem(record) if record is not None else "missing or unreadable"
        if problem:
            notes.append(f"{where}: trial {t.number + 1} of study {study.study_name}: {problem}; its compute is left out")
        else:
            records.append(record)
    return done, records


def _pruned(study: Any) -> int:
    """Trials of the study its pruner stopped (tune.pruner): spent budget, never chosen."""
    import optuna

    return sum(t.state == optuna.trial.TrialState.PRUNED for t in study.get_trials(deepcopy=False))


def _pruned_text(arm: dict[str, Any]) -> str:
    return f" and {arm['pruned_trials']} pruned" if arm.get("pruned_trials") else ""


def _record_problem(record: dict[str, Any]) -> str | None:
    """Why a record's seed or compute cannot be counted (None: they can)."""
    seed = record.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        return f"its seed {seed!r} is not an integer"
    wall = record.get("wall_time_s")
    if wall is not None and not (_number(wall) and wall >= 0):
        return f"its wall_time_s {wall!r} is not a number of seconds"
    return None


def tuning_arms(results_dir: Path, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """One entry per tuned arm of `results_dir`: its choice, trial scores, expected-best curve, grid seeds and
    compute ([] where nothing was tuned). A file that cannot be read (a damaged chosen.json, journal or record, a
    moved store) is left out, with a line naming it and why appended to `notes`."""
    notes = [] if notes is None else notes
    grid: dict[str, list[dict[str, Any]]] = {}
    every: list[dict[str, Any]] = []
    for path in sorted(results_dir.glob("**/" + RECORD)):
        record = files.read_record(path)
        if record is None:
            continue  # (not this section's to report: the report's own readers name unreadable records)
        tuned = record.get("tuned")
        problem = _record_problem(record) if isinstance(tuned, dict) else None  # (trials': _trial_scores)
        if problem:
            notes.append(f"{path}: {problem}; the record is left out")
            continue
        every.append(record)
        if isinstance(tuned, dict) and record.get("status") == "completed":
            grid.setdefault(str(tuned.get("study")), []).append(record)
    packs = _pack_walls(every)
    arms = []
    for path in sorted((results_dir / TUNING_DIR).glob("*.chosen.json")):
        chosen = files.read_record(path)
        problem = _chosen_problem(chosen) or (studies_problem(chosen) if isinstance(chosen, dict) else None)
        if problem is None:
            assert chosen is not None
            # the journal beside it (where tune.choose wrote both): what it says of the journal's path is the
            # results directory's as written, which a copy or a move of the directory leaves behind
            journal = study_journal(path, int(chosen.get("median_study", 0)))
            study, problem = _load_study(journal, chosen["study"])
        if problem is not None:
            notes.append(f"{path}: {problem}; its arm is left out")
            continue
        assert chosen is not None
        damaged = journal_damage(journal)
        if damaged:  # Optuna reads the entries before it: the trials after it are not counted here
            notes.append(f"{journal}: {damaged}; the trials it records after that are not counted (the next sweep "
                         "sets the file aside and runs them again)")
        unit = str(chosen.get("budget_by") or "trials")
        median = int(chosen.get("median_study", 0))
        each = {median: (*_trial_scores(study, results_dir, notes), _pruned(study))}
        for other in chosen.get("studies", []):  # tune.studies > 1: every study's trials are the arm's
            if other["study"] != median:
                more, problem = _load_study(study_journal(path, other["study"]), str(other.get("name")))
                if problem is not None:
                    notes.append(f"{path}: study {other['study']}: {problem}; its trials and compute are left out")
                else:
                    each[other["study"]] = (*_trial_scores(more, results_dir, notes), _pruned(more))
        # The expected best (and so budget-vs-verdict) pools every study's completed trials: the studies draw from
        # one search (the same space and sampler, a seed each), so their trials are draws of one distribution, and
        # pooling S studies estimates its curve from S x the trials, where one study's alone would be one draw of
        # tuning luck. A budget n beyond one study's trials is the expected best of that many trials of the search.
        scores = [score for k in sorted(each) for score in each[k][0]]
        trial_records = [record for k in sorted(each) for record in each[k][1]]
        runs = grid.get(chosen["study"], [])
        arms.append({
            **chosen, "journal": stored_path(journal, results_dir),
            "completed_trials": len(scores), "trial_scores": scores,
            "pruned_trials": sum(pruned for _, _, pruned in each.values()),
            "expected_best": [{"n": c.n, "mean": c.mean, "std": c.std,
                               "unbiased": unbiased_expected_best(scores, c.n)} for c in expected_best_curve(scores)],
            "seeds": sorted(int(r["seed"]) for r in runs),
            "compute_hours": {"trials": charged_hours(trial_records, packs), "grid": charged_hours(runs, packs)},
            # the trials' measured cost, in the unit the budget was counted in (report/budget_verdict.py)
            "cost": budget_verdict.arm_cost(trial_records, unit),
            # each study read: its completed and pruned trials and their cost (the budget is each study's)
            "study_trials": [{"study": k, "completed": len(each[k][0]), "pruned": each[k][2],
                              "cost": budget_verdict.arm_cost(each[k][1], unit)} for k in sorted(each)],
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


def _notes_markdown(notes: Sequence[str]) -> list[str]:
    return ["## Left out", "", *(f"- {note}" for note in notes), ""] if notes else []


def checklist_markdown(arms: Sequence[dict[str, Any]], notes: Sequence[str] = ()) -> str:
    """The reporting checklist, one section per arm, then the files left out and why."""
    if not arms:
        return "\n".join(["# Tuning checklist", "", "No tuned arm in this results directory (tune.trials was 0)."
                          if not notes else "No tuned arm could be read in this results directory.", "",
                          *_notes_markdown(notes)])
    lines = ["# Tuning checklist", ""]
    for arm in arms:
        hours = arm["compute_hours"]
        left = f"; left out (not read by this arm): {', '.join(arm['left_out'])}" if arm.get("left_out") else ""
        lines += [
            f"## {arm['task']} / {arm['objective']} / {arm['init']}", "",
            f"- search bounds: {_bounds(arm.get('space') or {})}{left}",
            f"- trials: {arm['completed_trials']} completed{_pruned_text(arm)} of "
            f"{budget_verdict.budget_words(arm)} ({arm['sampler']} sampler, "
            f"seed {arm['seed']})",
            f"- selection rule: the trial with the best {arm['metric']} on a holdout of {arm['holdout']} of the "
            "training split (the reported dev split is never used for tuning)",
            "- chosen values: " + ", ".join(f"{k}={v}" for k, v in arm["values"].items())
            + f" (trial {arm['trial'] + 1}, holdout {arm['metric']} {arm['score']:.4f})",
            f"- seeds: {', '.join(map(str, arm['seeds'])) or '(the grid has not run yet)'}",
            f"- compute: trials {_hours_text(hours['trials'])}; grid {_hours_text(hours['grid'])} (wall-clock hours "
            "of the records; a pack's time split over its members)",
            f"- cost of the trials: {budget_verdict.cost_text(arm['cost'])}",
            f"- verdict budget: {budget_verdict.verdict_budget_text(arm)}",
            *filter(None, [studies_line(arm)]),
            f"- study: {arm['study']} in {arm['journal']}", "",
        ]
    return "\n".join([*lines, *_notes_markdown(notes)])


def _hours_text(hours: dict[str, float]) -> str:
    return f"{hours['cpu']:.3f} wall-hours on CPU + {hours['gpu']:.3f} on GPU"


# What the expected-best columns are, said wherever they are shown.
EXPECTED_BEST_NOTE = ("Dodge et al. (2019): mean ± std of the best of n trials drawn with replacement from each arm's "
                      "completed trials (with several studies, every study's, pooled; biased: low below n = N); in brackets Tang et al. (2020)'s unbiased estimator, "
                      "the mean best of every n-subset (high variance). Both assume independent trials, true of random "
                      "search and of TPE's random start-up trials only. An arm's chosen holdout score is the best of "
                      "its N trials and reads high; its grid jobs' dev scores at the chosen values are the unbiased "
                      "estimate")


def _expected_cell(point: dict[str, Any], scale: float) -> str:
    digits = 4 if scale == 1 else 2
    unbiased = point.get("unbiased")
    tang = f" [{scale * unbiased:.{digits}f}]" if isinstance(unbiased, (int, float)) else ""
    return f"{scale * point['mean']:.{digits}f} ± {scale * point['std']:.{digits}f}{tang}"


def expected_best_markdown(arms: Sequence[dict[str, Any]]) -> str:
    """Expected best holdout score (mean ± std) after n = 1 .. N trials, one column per arm."""
    if not arms:
        return ""
    longest = max(len(arm["expected_best"]) for arm in arms)
    head = ["n", *(_label(a) for a in arms)]
    lines = ["# Expected best holdout score after n trials", "", EXPECTED_BEST_NOTE, "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in range(1, longest + 1):
        cells = [_expected_cell(a["expected_best"][n - 1], 1) if n <= len(a["expected_best"]) else "" for a in arms]
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
    compute, then the expected best holdout score against the number of trials as a table and a figure, and each
    pair's winner at every budget (report/budget_verdict.py). The checklist export (`main`) holds the same facts
    per arm in Markdown and JSON."""
    notes: list[str] = []
    arms = tuning_arms(results_dir, notes)
    if not arms and not notes:
        return
    doc.heading(f"Tuning ({len(arms)} arm(s))")
    if notes:
        doc.text("left out of this section: " + "; ".join(notes))
    if not arms:
        return
    doc.text("each arm's values were chosen by its own study on a holdout of its training split, with the same "
             "budget and sampler for every arm; the reported dev split was never used for tuning; compute is the "
             "records' wall-clock hours, a pack's time split over its members (python -m "
             "distill_sweep.report.checklist writes the full checklist)")
    rows = []
    for arm in arms:
        hours = arm["compute_hours"]
        left = f" (not read: {', '.join(arm['left_out'])})" if arm.get("left_out") else ""
        rows.append([_label(arm), _bounds(arm.get("space") or {}) + left,
                     f"{budget_verdict.trials_cell(arm)} {arm['sampler']}, seed {arm['seed']}",
                     ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in arm["values"].items())
                     + f" (trial {arm['trial'] + 1})",
                     f"{arm['metric']} {arm['score']:.4f}",
                     f"{hours['trials']['cpu'] + hours['trials']['gpu']:.3f} / "
                     f"{hours['grid']['cpu'] + hours['grid']['gpu']:.3f}",
                     budget_verdict.cost_text(arm["cost"]),
                     ", ".join(map(str, arm["seeds"])) or "-"])
    doc.table(["arm", "search bounds", "trials", "chosen values", "holdout score (best of N: optimistic)",
               "wall-hours trials / grid", "trials' measured cost", "seeds"],
              rows)
    if studied := studies_rows(arms, _label):
        doc.heading("Tuning luck: independent studies per arm")
        doc.text(STUDIES_NOTE)
        doc.table(STUDIES_HEADER, studied)
        if compared := comparison_rows(arms, _label):
            doc.text(COMPARISON_NOTE)
            doc.table(COMPARISON_HEADER, compared)
    longest = max(len(arm["expected_best"]) for arm in arms)
    shown = _shown_trials(longest)
    doc.heading("Expected best holdout score after n trials")
    doc.text(EXPECTED_BEST_NOTE + "; the curve says how much of an arm's score its budget bought, and whether more "
             "trials would still pay" + ("" if len(shown) == longest else f"; n = {', '.join(map(str, shown))} shown, "
                                         "every n in expected_best.csv"))
    doc.table(["n", *(_label(a) for a in arms)],
              [[str(n), *(_expected_cell(a["expected_best"][n - 1], 100) if n <= len(a["expected_best"]) else ""
                          for a in arms)] for n in shown])
    items = [(_label(a), PALETTE[i % len(PALETTE)], "") for i, a in enumerate(a for a in arms if a["expected_best"])]
    doc.figure(expected_best_svg(arms) + legend(items))
    files_out["expected_best.csv"] = pd.DataFrame(
        [{"task": a["task"], "objective": a["objective"], "init": a["init"], "study": a["study"], **point}
         for a in arms for point in a["expected_best"]])
    budget_verdict.section(doc, files_out, arms)  # each pair's winner at every budget, and where it flips


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.report.checklist", description=__doc__.split("\n")[0])
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="where to write the files (default: results_dir)")
    args = parser.parse_args(argv)
    if not args.results_dir.is_dir():
        print(f"distill_sweep.report.checklist: error: {args.results_dir} is not a directory", file=sys.stderr)
        return 2
    out = args.out or args.results_dir
    if out.exists() and not out.is_dir():
        print(f"distill_sweep.report.checklist: error: --out {out} is a file: name a directory (the checklist "
              "writes four files into it)", file=sys.stderr)
        return 2
    notes: list[str] = []
    arms = tuning_arms(args.results_dir, notes)
    for note in notes:
        print(f"distill_sweep.report.checklist: left out: {note}", file=sys.stderr)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "tuning_checklist.md").write_text(checklist_markdown(arms, notes))
        files.write_json_atomic(out / "tuning_checklist.json", {"arms": arms, "left_out": notes})
        (out / "expected_best.md").write_text(expected_best_markdown(arms))
        (out / "expected_best.html").write_text(expected_best_html(arms))
    except OSError as err:
        print(f"distill_sweep.report.checklist: error: cannot write the checklist into {out}: {problem(err)}",
              file=sys.stderr)
        return 2
    except DiskWriteError as err:
        print(f"distill_sweep.report.checklist: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote the tuning checklist of {len(arms)} arm(s) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
