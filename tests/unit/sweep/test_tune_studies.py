"""Fair proposals and tuning luck (sweep/journal.py's QMC sampler, sweep/studies.py, analysis/tuning_studies.py):
arms with one space get the same QMC points, a resumed QMC study continues its sequence, each study draws from a
seed of its own, and an arm's score over its studies is the median of their bests with their spread."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers import FAST, compose_cfg

from distill_sweep.analysis.tuning_studies import study_spread
from distill_sweep.config.parse import parse
from distill_sweep.config.seeds import derived_seed
from distill_sweep.config.tune import TuneSettings, sampler_seed, study_seed, trial_seed
from distill_sweep.job.identity import identify
from distill_sweep.sweep import studies, tune
from distill_sweep.sweep.compose import expand

SPACE = {"objective.temperature": {"low": 1.0, "high": 8.0, "log": True}, "objective.alpha": {"low": 0.1, "high": 0.9},
         "optimizer.batch_size": [16, 32]}


def _settings(**keys) -> TuneSettings:
    return parse(TuneSettings, {"trials": 4, "space": SPACE, "sampler": "qmc", **keys}, "tune")


def _arms(settings: TuneSettings, grid: Sequence[str] = ("objective=vanilla_kd,att_kl",)) -> list[tune.Arm]:
    jobs = [[*FAST, *job] for job in expand(list(grid))]
    return tune.plan_arms([(identify(compose_cfg(job)), job) for job in jobs], compose_cfg, settings)


def _draw(arm: tune.Arm, settings: TuneSettings, where: Path, parallel: int = 1, score=lambda values: 0.5,
          reopen_after: int | None = None) -> list[dict]:
    """The arm's trials' values in trial order, asked `parallel` at a time and told `score(values)`; with
    `reopen_after`, the study is opened again (a new sweep process) after that many trials were told."""
    study, drawn = tune.open_study(arm, settings, where), {}
    while pending := tune.next_trials(arm, study, settings.trials, parallel):
        for p in pending:
            tune.tell(study, p, score(p.values))
            drawn[p.number] = p.values
            if len(drawn) == reopen_after:
                study = tune.open_study(arm, settings, where)
    return [drawn[k] for k in sorted(drawn)]


def test_qmc_arms_with_one_space_get_the_same_points_whatever_the_timing(tmp_path: Path) -> None:
    """Two objectives (two arms, one space): trial k of each is the same point, though one arm asks 3 trials at a
    time (scores unknown while it asks) and the other one at a time, with scores that differ between the arms."""
    settings = _settings()
    kd, att = _arms(settings)
    assert kd.space == att.space and kd.digest != att.digest
    one = _draw(kd, settings, tmp_path / "kd", parallel=3)
    other = _draw(att, settings, tmp_path / "att", score=lambda v: v["objective.alpha"])
    assert one == other and len({v["objective.temperature"] for v in one}) == 4
    for values in one:  # inside the space, of its types
        assert 1.0 <= values["objective.temperature"] <= 8.0 and 0.1 <= values["objective.alpha"] <= 0.9
        assert values["optimizer.batch_size"] in (16, 32)


def test_qmc_points_are_the_scrambled_sobol_sequence_of_the_study_seed(tmp_path: Path) -> None:
    """Trial k's point is point k of SciPy's scrambled Sobol sequence seeded from (tune.seed, study) over the space's
    keys in name order (objective.alpha, objective.temperature, optimizer.batch_size), mapped onto each key's range: alpha linearly, the batch
    size's two choices by halves, the temperature on a log scale."""
    from scipy.stats import qmc

    settings = _settings(seed=3)
    (arm, _) = _arms(settings)
    drawn = _draw(arm, settings, tmp_path)
    points = qmc.Sobol(3, scramble=True, seed=study_seed(3, 0)).random(4)
    for values, (u_alpha, u_temp, u_batch) in zip(drawn, points, strict=True):
        assert values["objective.alpha"] == pytest.approx(0.1 + 0.8 * u_alpha, rel=1e-9)
        assert values["optimizer.batch_size"] == (16 if u_batch < 0.5 else 32)
        assert values["objective.temperature"] == pytest.approx(math.exp(math.log(8.0) * u_temp), rel=1e-9)


@pytest.mark.parametrize("reopen_after", [1, 2, 3])
def test_a_resumed_qmc_study_continues_its_sequence(tmp_path: Path, reopen_after: int) -> None:
    """Opened again by a new sweep after some trials (a kill), the study draws the points the uninterrupted one drew
    next, never the sequence's first points again (Optuna's QMCSampler counts its points in the study)."""
    settings = _settings()
    (arm, _) = _arms(settings)
    whole = _draw(arm, settings, tmp_path / "whole")
    assert _draw(arm, settings, tmp_path / f"killed-{reopen_after}", reopen_after=reopen_after) == whole


def test_a_killed_qmc_trial_is_run_again_with_its_point(tmp_path: Path) -> None:
    settings = _settings()
    (arm, _) = _arms(settings)
    study = tune.open_study(arm, settings, tmp_path)
    first = tune.next_trials(arm, study, 4, 2)
    tune.tell(study, first[0], 0.5)  # trial 1's worker is killed: RUNNING; the next sweep runs it again
    (again,) = tune.next_trials(arm, tune.open_study(arm, settings, tmp_path), 4, 2)
    assert (again.number, again.values) == (1, first[1].values)


def test_each_study_draws_from_a_seed_of_its_own() -> None:
    """Study 0 keeps the single study's seeds (a sweep with tune.studies=1 is the sweep it was); the others'
    seeds differ from it and from each other, for every sampler."""
    assert [trial_seed(0, 0, n) for n in range(3)] == [derived_seed("tune-trial", 0, n) % 2**32 for n in range(3)]
    assert len({study_seed(0, k) for k in range(5)}) == 5
    assert len({trial_seed(0, k, n) for k in range(5) for n in range(5)}) == 25
    qmc, tpe = _settings(), _settings(sampler="tpe")
    assert sampler_seed(qmc, 2, 0) == sampler_seed(qmc, 2, 3) == study_seed(0, 2)  # a sequence's seed
    assert sampler_seed(tpe, 2, 3) == trial_seed(0, 2, 3)  # each trial's own


@pytest.mark.parametrize("sampler", ["qmc", "random"])
def test_studies_of_one_arm_draw_different_trials(tmp_path: Path, sampler: str) -> None:
    settings = _settings(studies=3, sampler=sampler)
    (arm, _) = _arms(settings)
    each = [a for a in studies.study_arms(_arms(settings), settings) if a.digest == arm.digest]
    assert [a.study for a in each] == [0, 1, 2] and each[0].journal(tmp_path) == arm.journal(tmp_path)
    assert len({a.journal(tmp_path) for a in each}) == 3 and len({a.name for a in each}) == 3
    drawn = [_draw(a, settings, tmp_path) for a in each]
    assert len({v["objective.temperature"] for d in drawn for v in d}) == 12
    first = tune.next_trials(each[2], tune.open_study(each[2], settings, tmp_path / "more"), 4)[0]
    assert first.overrides[-2:] == ["+tune_trial=0", "+tune_study=2"]  # its job's identity differs from study 0's
    assert tune.trial_overrides(arm, 0, {})[-1] == "+tune_trial=0"


def test_tune_study_changes_the_trials_identity_and_leaves_study_0s() -> None:
    job = [*FAST, "objective=vanilla_kd", "tune.trials=2", "tune.space={objective.temperature:{low:1.0,high:4.0}}",
           "+tune_trial=0"]
    base = identify(compose_cfg(job)).digest
    assert identify(compose_cfg([*job, "+tune_study=1"])).digest != base
    assert identify(compose_cfg([*job, "tune.studies=3"])).digest == base  # more studies continue the same ones


def test_the_median_of_the_studies_bests_and_their_spread() -> None:
    """Bests 0.6, 0.8, 0.7: median 0.7 (study 2), range 0.2, sample std sqrt((0.01 + 0.01 + 0) / 2) = 0.1. Four
    bests 0.5, 0.9, 0.6, 0.8: median (0.6 + 0.8) / 2 = 0.7; the grid's study the lower middle one, 0.6 (study 2)."""
    odd = study_spread([0.6, 0.8, 0.7])
    assert odd.median_best == pytest.approx(0.7) and odd.median_study == 2
    assert odd.spread == pytest.approx(0.2) and odd.std == pytest.approx(0.1)
    even = study_spread([0.5, 0.9, 0.6, 0.8])
    assert even.median_best == pytest.approx(0.7) and even.median_study == 2
    assert even.std == pytest.approx(math.sqrt((0.04 + 0.04 + 0.01 + 0.01) / 3))
    assert study_spread([0.4]).std is None and study_spread([0.4]).median_study == 0
    with pytest.raises(ValueError):
        study_spread([0.4, float("nan")])


def test_the_grid_runs_at_the_median_studys_values(tmp_path: Path) -> None:
    """Three studies whose bests are 0.9, 0.5 and 0.7 (each told a fixed score per trial): the arm's choice is
    study 2's best trial, and chosen.json lists every study's best with their median and spread."""
    settings = _settings(studies=3, trials=2)
    (arm, _) = _arms(settings)
    each = [a for a in studies.study_arms([arm], settings)]
    opened = {a.key: tune.open_study(a, settings, tmp_path) for a in each}
    scores = {0: (0.9, 0.2), 1: (0.1, 0.5), 2: (0.7, 0.3)}
    for a in each:
        for score in scores[a.study]:
            (p,) = tune.next_trials(a, opened[a.key], 2)
            tune.tell(opened[a.key], p, score)
    (grouped,) = studies.by_arm(each, opened).values()
    studies.choose_over_studies(arm, grouped, tmp_path, settings)
    assert arm.best == opened[each[2].key].trials[0].params and arm.best_trial == 0
    chosen = json.loads(tune.chosen_path(arm, tmp_path).read_text())
    assert [(s["study"], s["trial"], s["score"]) for s in chosen["studies"]] == [(0, 0, 0.9), (1, 1, 0.5), (2, 0, 0.7)]
    assert chosen["median_study"] == 2 and chosen["median_best"] == pytest.approx(0.7)
    assert chosen["study_spread"]["range"] == pytest.approx(0.4) and chosen["score"] == pytest.approx(0.7)
    assert chosen["journal"] == f"tuning/{arm.digest[:10]}.s2.journal" and chosen["study"] == f"{arm.name}-s2"
    assert all(s["sampler_seed"] == study_seed(0, s["study"]) for s in chosen["studies"])
    assert [job[-1] for job in tune.tuned_grid(arm, tmp_path)] == [f"+tune_chosen='tuning/{arm.digest[:10]}.chosen.json'"]


def test_one_study_writes_chosen_json_as_before(tmp_path: Path) -> None:
    settings = _settings(trials=1)
    (arm, _) = _arms(settings)
    (only,) = studies.study_arms([arm], settings)
    study = tune.open_study(only, settings, tmp_path)
    (p,) = tune.next_trials(only, study, 1)
    tune.tell(study, p, 0.4)
    studies.choose_over_studies(arm, [(only, study)], tmp_path, settings)
    chosen = json.loads(tune.chosen_path(arm, tmp_path).read_text())
    assert "studies" not in chosen and chosen["score"] == 0.4 and chosen["journal"] == f"tuning/{arm.digest[:10]}.journal"


def test_the_dry_run_counts_every_study(tmp_path: Path) -> None:
    settings = _settings(studies=3)
    arms = _arms(settings)
    line = tune.dry_run_line(studies.study_arms(arms, settings), settings, tmp_path)
    assert line.startswith("distill_sweep: tuning first: 2 arm(s) x 3 independent studies x 4 trial(s) (qmc, seed 0, "
                           "holdout 0.1 of the training split) = 24 trial jobs, 0 already completed, 24 to run")
    assert "6 trial(s) at a time (1 per study); then the grid with each arm's median study's values" in line


def test_a_round_of_qmc_trials_of_two_arms_is_one_pack_of_paired_trials(tmp_path: Path) -> None:
    """The launcher packs a round's trials that share batches (sweep/packs.py's key: the same data, teacher, data
    order, batch size, ...): the two objectives' trial k, same point, train in one process on the same batches."""
    from distill_sweep.sweep.packs import plan_packs

    settings = parse(TuneSettings, {"trials": 2, "space": {"objective.temperature": {"low": 1.0, "high": 8.0},
                                                           "objective.alpha": {"low": 0.1, "high": 0.9}},
                                    "sampler": "qmc"}, "tune")
    arms = _arms(settings, ["pack=auto", "objective=vanilla_kd,att_kl"])
    round_one = [p for arm in arms for p in tune.next_trials(arm, tune.open_study(arm, settings, tmp_path), 2)]
    assert [p.number for p in round_one] == [0, 0] and round_one[0].values == round_one[1].values
    assert plan_packs([identify(compose_cfg(p.overrides)) for p in round_one]) == [[0, 1]]


def test_the_checklist_reports_the_median_of_the_bests_and_the_spread(tmp_path: Path) -> None:
    """Bests 0.9, 0.5, 0.7 (studies 0, 1, 2): median 0.7, spread 0.9 - 0.5 = 0.4, std sqrt((0.04 + 0.04 + 0) / 2)
    = 0.2; the arm's journal the median study's (study 2), read from beside chosen.json."""
    from distill_sweep.report import checklist

    settings = _settings(studies=3, trials=2)
    (arm, _) = _arms(settings)
    each = studies.study_arms([arm], settings)
    opened = {a.key: tune.open_study(a, settings, tmp_path) for a in each}
    for a in each:
        for score in {0: (0.9, 0.2), 1: (0.1, 0.5), 2: (0.7, 0.3)}[a.study]:
            (p,) = tune.next_trials(a, opened[a.key], 2)
            tune.tell(opened[a.key], p, score)
    studies.choose_over_studies(arm, next(iter(studies.by_arm(each, opened).values())), tmp_path, settings)
    notes: list[str] = []
    (reported,) = checklist.tuning_arms(tmp_path, notes)
    assert notes == [] and reported["journal"] == f"tuning/{arm.digest[:10]}.s2.journal"
    # the expected best pools every study's trials (study order), not the median study's alone: Dodge et al. at
    # n = 1 is their mean (0.9 + 0.2 + 0.1 + 0.5 + 0.7 + 0.3) / 6 = 0.45, at n = 6 (1^6 - (5/6)^6) x 0.9 + ...
    assert reported["trial_scores"] == [0.9, 0.2, 0.1, 0.5, 0.7, 0.3] and reported["completed_trials"] == 6
    assert reported["expected_best"][0]["mean"] == pytest.approx(0.45)
    ranked = sorted(reported["trial_scores"])  # E[max of n] = sum_i v_(i) ((i/N)^n - ((i-1)/N)^n)
    assert reported["expected_best"][5]["mean"] == pytest.approx(
        sum(v * ((i / 6) ** 6 - ((i - 1) / 6) ** 6) for i, v in enumerate(ranked, start=1)))
    assert reported["expected_best"][5]["unbiased"] == pytest.approx(0.9)  # the one 6-subset's best
    assert [(s["study"], s["completed"]) for s in reported["study_trials"]] == [(0, 2), (1, 2), (2, 2)]
    assert reported["median_best"] == pytest.approx(0.7)
    assert reported["study_spread"]["std"] == pytest.approx(0.2)
    text = checklist.checklist_markdown([reported])
    assert ("- studies: 3 independent studies of 2 trials each; their best holdout accuracy: 0.9000, 0.5000, 0.7000; "
            "median of the bests 0.7000 (the arm's score), spread 0.4000 (max - min, std 0.2000); the grid ran the "
            "median study's values (study 2)") in text
    assert "- trials: 6 completed of 3 studies, each with a budget of 2 (qmc sampler" in text
    assert ("- verdict budget: the grid's comparison is at the values chosen by its median study (study 2, of 3 with "
            "the same budget) after 2 trial(s) (a budget in trials)") in text
    # a damaged studies block: the arm is left out with a note, never a traceback
    path = tune.chosen_path(arm, tmp_path)
    path.write_text(path.read_text().replace('"median_best": 0.7', '"median_best": "x"'))
    assert checklist.tuning_arms(tmp_path, notes) == [] and "median_best" in notes[0]


def test_two_arms_are_compared_study_by_study() -> None:
    """A's bests 0.72, 0.73, 0.68 and B's 0.70, 0.76, 0.73 (study k against study k): differences 0.02, -0.03,
    -0.05, mean -0.02, sd sqrt((0.04^2 + 0.01^2 + 0.03^2) / 2) = sqrt(0.0013); t(2, 0.975) = 4.3027, half-width
    4.3027 * sqrt(0.0013) / sqrt(3) = 0.08957: [-0.1096, 0.0696], which holds 0: within tuning luck. The medians
    differ by 0.72 - 0.73 = -0.01. C's bests 0.62, 0.64, 0.57: A - C = 0.10, 0.09, 0.11, mean 0.10, sd 0.01, half-width
    4.3027 * 0.01 / sqrt(3) = 0.0248, [0.075, 0.125] without 0: A ahead; B - C = 0.08, 0.12, 0.16, mean 0.12, sd
    0.04, half-width 0.0994, [0.021, 0.219]: B ahead."""
    from distill_sweep.analysis.tuning_studies import study_difference
    from distill_sweep.report.tuning_studies import comparison_rows

    d = study_difference([0.72, 0.73, 0.68], [0.70, 0.76, 0.73])
    assert d.medians == pytest.approx(-0.01) and d.mean == pytest.approx(-0.02)
    half = 4.302653 * math.sqrt(0.0013) / math.sqrt(3)
    assert (d.low, d.high) == (pytest.approx(-0.02 - half, abs=1e-5), pytest.approx(-0.02 + half, abs=1e-5))
    with pytest.raises(ValueError):
        study_difference([0.7, 0.8], [0.7])

    def arm(objective: str, bests: list[float]) -> dict:
        return {"task": "toy", "init": "init-1", "objective": objective,
                "studies": [{"study": k, "score": s} for k, s in enumerate(bests)]}

    rows = comparison_rows([arm("a", [0.72, 0.73, 0.68]), arm("b", [0.70, 0.76, 0.73]),
                            arm("c", [0.62, 0.64, 0.57])], lambda a: a["objective"])
    assert [(r[0], r[-1]) for r in rows] == [("a - b", "within tuning luck"), ("a - c", "a ahead beyond tuning luck"),
                                            ("b - c", "b ahead beyond tuning luck")]


def test_the_fair_tuning_demo_pairs_two_objectives_over_three_studies() -> None:
    """The preset (its sweep is out of the suite: minutes): two objectives with one space, QMC, 3 studies of 4
    trials each; both objectives' trials pack (the same batches), so a round is one pack of 6."""
    from distill_sweep.sweep.packs import pack_key

    settings = tune.settings_of(compose_cfg(["experiment=fair_tuning_demo"]))
    assert settings is not None and (settings.sampler, settings.studies, settings.trials) == ("qmc", 3, 4)
    jobs = [["experiment=fair_tuning_demo", *job] for job in expand(["objective=vanilla_kd,att_kl", "seed=1,2,3"])]
    arms = tune.plan_arms([(identify(compose_cfg(job)), job) for job in jobs], compose_cfg, settings)
    assert len(arms) == 2 and arms[0].space == arms[1].space and len(studies.study_arms(arms, settings)) == 6
    keys = {pack_key(identify(compose_cfg(tune.trial_overrides(a, 0, {"objective.temperature": 2.0}))))
            for a in studies.study_arms(arms, settings)}
    assert len(keys) == 1 and None not in keys
