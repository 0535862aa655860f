"""An arm's independent studies (tune.studies = S): tuning luck as a source of variance.

Each arm gets S studies of `tune.trials` trials each, every one in a journal of its own
(`<results_dir>/tuning/<arm>.s<k>.journal`; study 0 is `<arm>.journal`, the single study of S = 1, so S = 1 is
the sweep it was before studies existed and a larger S continues it) and drawn from a seed of its own
(config/tune.py's `study_seed` and `trial_seed`, from tune.seed and the study's index). A trial of study k > 0
is the arm's job with `+tune_study=k`.

Once every study has spent its budget, the arm's score is the median over its studies of each study's best
(analysis/tuning_studies.py), with the studies' spread beside it, and the grid runs once, at the values of the
median study (the lower median for an even S): a documented choice that keeps the grid's size, rather than S
grids at each study's values. chosen.json then holds, besides the median study's choice, every study's best
(`studies`), the median of the bests (`median_best`) and their spread (`study_spread`), which the grid's records
copy (`tuned`) and the tuning checklist reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from distill_sweep.analysis.tuning_studies import study_spread
from distill_sweep.config.tune import TuneSettings, study_seed
from distill_sweep.sweep.journal import stored_path
from distill_sweep.sweep.tune import Arm, choose


def study_arms(arms: Sequence[Arm], tune: TuneSettings) -> list[Arm]:
    """Every study of every arm, as an Arm each (`Arm.study`, `Arm.key`): an arm's study 0 is the arm itself,
    its others copies that share its grid, with a study name and journal of their own."""
    out: list[Arm] = []
    for arm in arms:
        arm.pruner = tune.pruner  # (its trials report to their study's journal: sweep/tune.py's trial_overrides)
        out.append(arm)
        out.extend(dataclasses.replace(arm, name=f"{arm.name}-s{k}", study=k, grid=arm.grid)
                   for k in range(1, tune.studies))
    return out


def choose_over_studies(arm: Arm, studies: Sequence[tuple[Arm, Any]], results_dir: Path,
                        tune: TuneSettings) -> str:
    """The arm's chosen values: its best trial's at one study; at several, the median study's (the module's
    docstring), with every study's best, their median and spread written into chosen.json. Returns what the
    sweep's line adds about the studies ("" for one)."""
    if len(studies) == 1:
        choose(arm, studies[0][1], results_dir, tune)
        return ""
    bests = [study.best_trial for _, study in studies]
    spread = study_spread([float(b.value) for b in bests])
    median_arm, median = studies[spread.median_study]
    each = [{"study": s.study, "name": s.name, "journal": stored_path(s.journal(results_dir), results_dir),
             "sampler_seed": study_seed(tune.seed, s.study) if tune.sampler == "qmc" else None,
             "trial": b.number, "score": float(b.value), "values": dict(b.params)}
            for (s, _), b in zip(studies, bests, strict=True)]
    more = {"studies": each, "median_study": median_arm.study, "median_best": spread.median_best,
            "study_spread": {"low": spread.low, "high": spread.high, "range": spread.spread, "std": spread.std}}
    choose(median_arm, median, results_dir, tune, more)
    # (chosen.json is the arm's, named by its digest; the median study's trial and values are the arm's choice)
    arm.best, arm.best_trial = median_arm.best, median_arm.best_trial
    return (f" of study {median_arm.study}, the median of {len(studies)} studies (bests "
            f"{', '.join(f'{float(b.value):.4f}' for b in bests)}: median {spread.median_best:.4f}, spread "
            f"{spread.spread:.4f})")


def by_arm(all_studies: Sequence[Arm], opened: Mapping[str, Any]) -> dict[str, list[tuple[Arm, Any]]]:
    """The studies grouped by their arm (its digest), in study order, each with its opened Optuna study."""
    out: dict[str, list[tuple[Arm, Any]]] = {}
    for arm in sorted(all_studies, key=lambda a: a.study):
        out.setdefault(arm.digest, []).append((arm, opened[arm.key]))
    return out


__all__ = ["by_arm", "choose_over_studies", "study_arms"]
