"""Tuning luck in the report (tune.studies > 1, sweep/studies.py): per arm, each study's best holdout score, the
median of the bests (the arm's score, AlgoPerf's rule) and their spread, and which study's values the grid ran.

An arm's chosen.json (`<results_dir>/tuning/<arm>.chosen.json`) names the median study; its studies' journals lie
beside it (`<arm>.journal` for study 0, `<arm>.s<k>.journal` for study k). A chosen.json without `studies` is a
single study's, and adds nothing here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def study_journal(chosen_file: Path, study: int) -> Path:
    """The journal of study `study` of the arm whose chosen.json is `chosen_file` (beside it, where the sweep
    wrote both: a copied or moved results directory reads its own)."""
    stem = chosen_file.name[: -len(".chosen.json")]
    return chosen_file.with_name(f"{stem}.journal" if study == 0 else f"{stem}.s{study}.journal")


def studies_problem(chosen: dict[str, Any]) -> str | None:
    """Why chosen.json's `studies` block cannot be reported (None: it can, or there is none)."""
    if "studies" not in chosen:
        return None
    each, spread = chosen.get("studies"), chosen.get("study_spread")
    if not isinstance(each, list) or not each or not all(isinstance(s, dict) for s in each):
        return "its studies is not a list of studies"
    for s in each:
        if not isinstance(s.get("study"), int) or not _finite(s.get("score")):
            return f"a study of its studies has no index or no finite score: {str(s)[:80]}"
    if not _finite(chosen.get("median_best")) or not isinstance(chosen.get("median_study"), int) \
            or not isinstance(spread, dict) or not _finite(spread.get("range")):
        return "its median_best, median_study or study_spread is missing or not a number"
    return None


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def studies_line(arm: dict[str, Any]) -> str | None:
    """The checklist's line on the arm's studies (None for a single study)."""
    if "studies" not in arm:
        return None
    spread = arm["study_spread"]
    bests = ", ".join(f"{s['score']:.4f}" for s in arm["studies"])
    std = f", std {spread['std']:.4f}" if _finite(spread.get("std")) else ""
    size = (f"of {arm['trials']} trials each" if (arm.get("budget_by") or "trials") == "trials"
            else f"each with the same budget in {arm['budget_by']}")
    return (f"- studies: {len(arm['studies'])} independent studies {size}; their best "
            f"holdout {arm['metric']}: {bests}; median of the bests {arm['median_best']:.4f} (the arm's score), "
            f"spread {spread['range']:.4f} (max - min{std}); the grid ran the median study's values "
            f"(study {arm['median_study']})")


def studies_rows(arms: Sequence[dict[str, Any]], label: Any) -> list[list[str]]:
    """One row per arm tuned with several studies: its studies' bests, their median and spread."""
    rows = []
    for arm in arms:
        if "studies" not in arm:
            continue
        spread = arm["study_spread"]
        rows.append([label(arm), str(len(arm["studies"])),
                     ", ".join(f"{s['score']:.4f}" for s in arm["studies"]), f"{arm['median_best']:.4f}",
                     f"{spread['range']:.4f}" + (f" (std {spread['std']:.4f})" if _finite(spread.get("std")) else ""),
                     str(arm["median_study"])])
    return rows


def comparison_rows(arms: Sequence[dict[str, Any]], label: Any) -> list[list[str]]:
    """One row per pair of arms of one task and init tuned with as many studies: the difference of their scores
    (medians of the bests), the mean of the study-by-study differences and its t-interval, and whether the arms
    differ beyond tuning luck (the interval leaves out 0)."""
    from distill_sweep.analysis.tuning_studies import study_difference

    studied = [a for a in arms if "studies" in a]
    rows = []
    for i, a in enumerate(studied):
        for b in studied[i + 1:]:
            if (a["task"], a["init"]) != (b["task"], b["init"]) or len(a["studies"]) != len(b["studies"]):
                continue
            d = study_difference(*([s["score"] for s in sorted(arm["studies"], key=lambda s: s["study"])]
                                   for arm in (a, b)))
            if not (math.isfinite(d.low) and math.isfinite(d.high)):
                verdict = "-"
            elif d.low > 0 or d.high < 0:
                verdict = f"{label(a) if d.low > 0 else label(b)} ahead beyond tuning luck"
            else:
                verdict = "within tuning luck"
            rows.append([f"{label(a)} - {label(b)}", str(len(a["studies"])), f"{d.medians:+.4f}",
                         f"{d.mean:+.4f} [{d.low:+.4f}, {d.high:+.4f}]", verdict])
    return rows


COMPARISON_HEADER = ["arms", "studies", "difference of the medians", "mean study-by-study difference [95% t-interval]",
                     "verdict (holdout)"]
COMPARISON_NOTE = ("study k of each arm drew its trials from the same seed (tune.sampler=qmc: the same points), "
                   "so the arms' bests are paired study by study; the t-interval of their differences over the "
                   "studies is how far apart the arms' tuned holdout scores are with tuning luck counted in (the "
                   "grid's intervals below count the seeds' variance at one study's values, not this)")
STUDIES_HEADER = ["arm", "studies", "each study's best (holdout)", "median of the bests", "spread: max - min",
                  "grid at study"]
STUDIES_NOTE = ("each arm was tuned by several independent studies of the same budget (tune.studies), each from a "
                "seed of its own: the arm's score is the median over its studies of each study's best (a lucky "
                "study does not make the arm), and the spread between the studies' bests is the tuning luck a "
                "single study hides; an arm ahead by less than the spreads is not ahead beyond tuning luck")


__all__ = ["COMPARISON_HEADER", "COMPARISON_NOTE", "STUDIES_HEADER", "comparison_rows", "STUDIES_NOTE", "studies_line", "studies_problem", "studies_rows", "study_journal"]
