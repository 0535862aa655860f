"""`-m +plan_seeds=true`: the sweep's dry run, plus, from the records a pilot left in results_dir, how many seeds
each comparison of the planned grid needs.

A comparison is what the report tests: two objectives (procedure and objective) at the same init, or two inits of
the same objective, paired on (task, seed) and pooled over the planned tasks they share. From the pilot's matched
pairs it takes Cohen's d_z and its 1 - alpha interval (stats.dz_interval), and asks the power analysis
(stats.seeds_range: 80% power, two-sided paired t-test) for the pairs needed at each end of it, divided by the
planned tasks (each seed gives one pair per task): a range, because a pilot's d is itself uncertain (at 3 seeds
the same true d gives anything from 4 to 488 seeds as a point estimate). The level is the one the report
corrects to: alpha / m over the plan's m comparisons (Holm's first step; conservative, as the report's tables
are smaller families).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd
from tabulate import tabulate

from distill_sweep.analysis import frames, stats

COLUMNS = ("comparison", "tasks", "pilot pairs", "mean(A-B)", "d", "d interval", "seeds needed", "planned seeds",
           "verdict")
NUMBERS = ("d_low", "d_high", "seeds_low", "seeds_high", "level")  # the frame's numbers behind the text columns


def system_name(procedure: str, objective: str) -> str:
    """A planned job's row name: the no-KD label, the objective (task_specific) or "procedure:objective"."""
    if procedure == "finetune":
        return frames.NO_KD_LABEL
    return objective if procedure == "task_specific" else f"{procedure}:{objective}"


def comparisons(planned: Sequence[dict[str, Any]]) -> list[tuple[str, tuple[str, str], tuple[str, str], list[str]]]:
    """(name, cell A, cell B, shared tasks) per comparison of the planned jobs (dicts of task, procedure,
    objective, init: the init's directory name, seed); a cell is (system, init directory)."""
    tasks: dict[tuple[str, str], set[str]] = {}
    for job in planned:
        cell = (system_name(job["procedure"], job["objective"]), str(job["init"]))
        tasks.setdefault(cell, set()).add(str(job["task"]))
    cells = list(tasks)
    out = []
    for a, b in combinations(cells, 2):
        shared = sorted(tasks[a] & tasks[b])
        if not shared or (a[0] != b[0] and a[1] != b[1]):  # the report compares one thing at a time
            continue
        name = f"{a[1]}: {a[0]} vs {b[0]}" if a[1] == b[1] else f"{a[0]}: {a[1]} vs {b[1]}"
        out.append((name, a, b, shared))
    return out


def plan(results_dir: str | Path, planned: Sequence[dict[str, Any]], alpha: float = 0.05) -> pd.DataFrame:
    """One row per comparison of the planned grid, from the pilot's records under results_dir (COLUMNS)."""
    rows = []
    pilot = pd.DataFrame()
    if Path(results_dir).is_dir():
        records, _ = frames.one_dev_set(frames.load_store(results_dir).records)  # one dev set, as the report
        if not records.empty:
            sc, _ = frames.scores(records)
            # a record's init directory (hashing.job_dir: <task>/<part>/<init>/<seed>/<hash>/result.json)
            pilot = sc.assign(cell=[(system_name(p, o), Path(path).parents[2].name) for p, o, path in
                                    zip(sc["procedure"], sc["objective"], sc["path"], strict=True)])
    seeds = len({int(job["seed"]) for job in planned})
    planned_comparisons = comparisons(planned)
    level = alpha / max(1, len(planned_comparisons))  # every comparison is tested: Holm's first step
    for name, a, b, shared in planned_comparisons:
        pairs = pd.DataFrame(columns=["a", "b"])
        if not pilot.empty:
            mine = pilot[pilot["task"].isin(shared) & pilot["cell"].isin([a, b])]
            wide = mine.pivot_table(index=["task", "seed"], columns="cell", values="value", aggfunc="mean")
            if a in wide and b in wide:
                pairs = wide[[a, b]].dropna().set_axis(["a", "b"], axis=1)
        d = stats.cohens_dz(pairs["a"], pairs["b"])
        d_low, d_high = stats.dz_interval(len(pairs), d, 1.0 - alpha)
        low, high = stats.seeds_range(len(pairs), d, len(shared), alpha, level)
        if len(pairs) < 2:
            verdict = "no pilot: run at least 2 seeds of both"
        elif math.isnan(low):
            verdict = "no spread in the pilot's differences: no d to plan from"
        elif seeds >= high:
            verdict = "enough"
        elif seeds < low:
            verdict = f"add at least {int(low) - seeds} seed(s)"
        else:
            verdict = "enough only if the true d is near the pilot's upper end; add seeds to be sure"
        rows.append({"comparison": name, "tasks": ",".join(shared), "pilot pairs": len(pairs),
                     "mean(A-B)": float((pairs["a"] - pairs["b"]).mean()) if len(pairs) else math.nan, "d": d,
                     "d interval": (d_low, d_high), "seeds needed": (low, high), "planned seeds": seeds,
                     "verdict": verdict, "d_low": d_low, "d_high": d_high, "seeds_low": low, "seeds_high": high,
                     "level": level})
    return pd.DataFrame(rows, columns=[*COLUMNS, *NUMBERS])


def plan_text(results_dir: str | Path, planned: Sequence[dict[str, Any]], alpha: float = 0.05) -> str:
    """The plan as the dry run prints it: one table and what it assumes."""
    table = plan(results_dir, planned, alpha)
    level = float(table["level"].iloc[0]) if not table.empty else alpha
    head = (f"seeds needed per comparison (+plan_seeds): from the pilot's records under {results_dir}, the seeds a "
            f"two-sided paired t-test needs for {stats.POWER:.0%} power at alpha/m = {alpha}/{len(table)} = "
            f"{level:.3g} (Holm's first step over the plan's {len(table)} comparisons) to detect d (Cohen's d_z on "
            f"(task, seed) pairs, pooled over the planned tasks), over d's {100 * (1 - alpha):g}% interval: from its "
            "end farthest from 0 to its end nearest 0 (∞: the pilot cannot rule out d = 0)")
    if table.empty:
        return head + "\n  no comparison in the planned grid (one objective at one init)"

    shown = table[list(COLUMNS)].assign(**{
        "mean(A-B)": [f"{v:+.2f}" if not math.isnan(v) else "—" for v in table["mean(A-B)"]],
        "d": [f"{v:.2f}" if not math.isnan(v) else "—" for v in table["d"]],
        "d interval": [f"[{lo:.2f}, {hi:.2f}]" if not math.isnan(lo) else "—"
                       for lo, hi in zip(table["d_low"], table["d_high"], strict=True)],
        "seeds needed": [seeds_range_text(lo, hi) for lo, hi in zip(table["seeds_low"], table["seeds_high"], strict=True)]})
    return head + "\n" + tabulate(shown.to_numpy().tolist(), headers=list(COLUMNS), tablefmt="simple",
                                  disable_numparse=True)


def seeds_range_text(low: float, high: float) -> str:
    """Seeds needed as a range: "4–120", "4–∞" (d may be 0), "never" (no difference seen), "—" (no test)."""
    if math.isnan(low):
        return "—"
    if math.isinf(low):
        return "never"
    top = "∞" if math.isinf(high) else f"{int(high)}"
    return top if top == f"{int(low)}" else f"{int(low)}–{top}"
