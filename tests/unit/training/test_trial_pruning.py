"""Pruning a tuning trial (training/trial_pruning.py): the decisions of the two pruners on hand-made intermediate
values, the per-example instances, and the stage driver stopping where the pruner says."""

from __future__ import annotations

import numpy as np
import pytest

from distill_sweep.training.trial_pruning import instance_values, make_pruner, report_and_decide


def _study(pruner: str):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    return optuna.create_study(direction="maximize", pruner=make_pruner(pruner))


def test_asha_keeps_the_top_half_of_the_trials_at_a_rung() -> None:
    """Holdout scores at the first evaluation 0.6, 0.8, 0.7, 0.9, 0.75 in trial order. Successive halving with a
    reduction factor of 2 keeps a trial whose score is among the best floor(k / 2) (at least 1) of the k trials
    that reached the rung: 0.6 (best of 1) and 0.8 (best of 2) go on; 0.7 is not the best 1 of 3 (0.8): pruned;
    0.9 is the best 2 of 4: goes on; 0.75 is not among the best 2 of 5 (0.9, 0.8): pruned."""
    study = _study("asha")
    decisions = []
    for score in (0.6, 0.8, 0.7, 0.9, 0.75):
        trial = study.ask()
        decisions.append(report_and_decide(trial, "asha", 0, score, None))
        study.tell(trial, score)
    assert decisions == [False, False, True, False, True]


def _instances(wrong: int, n: int = 20) -> np.ndarray:
    return np.array([0.0] * wrong + [1.0] * (n - wrong))


@pytest.mark.parametrize(("wrong", "pruned"), [(0, False), (1, False), (10, True), (20, True)])
def test_wilcoxon_stops_a_trial_reliably_worse_than_the_best_on_the_same_examples(wrong: int, pruned: bool) -> None:
    """The study's best trial got all 20 holdout examples right. A trial wrong on k of them differs from it on k
    examples, all against it: the one-sided signed-rank test's p-value is 0.5^k (every sign against it), so
    k = 1 (p = 0.5) goes on, k = 10 (p < 0.001) and k = 20 are stopped at the threshold 0.1; k = 0 (no
    difference) goes on."""
    study = _study("wilcoxon")
    best = study.ask()
    assert not report_and_decide(best, "wilcoxon", 0, 1.0, _instances(0))
    study.tell(best, 1.0)
    trial = study.ask()
    assert report_and_decide(trial, "wilcoxon", 0, 1 - wrong / 20, _instances(wrong)) is pruned


def test_wilcoxon_pairs_each_evaluation_with_the_best_trials_same_evaluation() -> None:
    """Instances of evaluation e are steps e * n + i: a trial as good as the best one at evaluation 0 and worse on
    every example at evaluation 1 is compared on both (20 pairs, 10 against it): stopped at evaluation 1."""
    study = _study("wilcoxon")
    best = study.ask()
    for evaluation in (0, 1):
        report_and_decide(best, "wilcoxon", evaluation, 1.0, _instances(0, 10))
    study.tell(best, 1.0)
    trial = study.ask()
    assert not report_and_decide(trial, "wilcoxon", 0, 1.0, _instances(0, 10))
    assert report_and_decide(trial, "wilcoxon", 1, 0.0, _instances(10, 10))
    assert sorted(trial.study.trials[1].intermediate_values) == list(range(20))


def test_instances_are_right_or_wrong_and_minus_a_regressions_error() -> None:
    assert instance_values(np.array([1, 0, 2]), np.array([1, 1, 2]), False).tolist() == [1.0, 0.0, 1.0]
    assert instance_values(np.array([0.5, 2.0]), np.array([1.0, 2.0]), True).tolist() == [-0.5, 0.0]
    assert make_pruner("none") is None


def test_a_trial_reports_through_its_studys_journal(tmp_path) -> None:
    """The job side: a trial opens its study's journal by path (one study per journal), reports each evaluation by
    its trial number and gets back what its record says of the prune. Wilcoxon: trial 0 right on all 20 holdout
    examples (told COMPLETE), trial 1 wrong on all 20 at its first rung: stopped there."""
    import optuna

    from distill_sweep.training.trial_pruning import TrialPruning, journal_storage

    journal = tmp_path / "tuning" / "arm.journal"
    journal.parent.mkdir()
    study = optuna.create_study(study_name="arm", storage=journal_storage(journal), direction="maximize")
    first, second = study.ask(), study.ask()
    entry = {"stage": "prediction", "epoch": 1, "step": 8, "dev": {"accuracy": 1.0}}
    assert TrialPruning(journal, 0, "wilcoxon", "accuracy").after_evaluation(0, entry, _instances(0)) is None
    study.tell(first, 1.0)
    worse = {**entry, "dev": {"accuracy": 0.0}}
    assert TrialPruning(journal, 1, "wilcoxon", "accuracy").after_evaluation(0, worse, _instances(20)) == {
        "pruner": "wilcoxon", "rung": 0, "stage": "prediction", "epoch": 1, "step": 8, "metric": "accuracy",
        "value": 0.0}
    again = optuna.load_study(study_name="arm", storage=journal_storage(journal))
    assert again.trials[1].intermediate_values == {i: 0.0 for i in range(20)} and second.number == 1


@pytest.mark.parametrize("damage", ["missing", "not a journal"])
def test_a_trial_whose_journal_cannot_be_read_trains_on(tmp_path, caplog, damage: str) -> None:
    """One warning line, no traceback, no prune: the trial trains to its end (the sweep mends or sets the journal
    aside before its next round)."""
    import logging

    from distill_sweep.training.trial_pruning import TrialPruning

    journal = tmp_path / "arm.journal"
    if damage == "not a journal":
        journal.write_bytes(b"\x00\xff garbage\n")
    pruning = TrialPruning(journal, 0, "asha", "accuracy")
    entry = {"stage": "prediction", "epoch": 1, "step": 8, "dev": {"accuracy": 0.5}}
    with caplog.at_level(logging.WARNING, logger="distill_sweep"):
        assert pruning.after_evaluation(0, entry, None) is None
        assert pruning.after_evaluation(1, entry, None) is None
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"tune.pruner=asha: the study in {journal} cannot be read (") and "\n" not in line
    assert journal.exists() == (damage == "not a journal")  # (a missing one is not created)
