"""Pruning a tuning trial from inside its job (tune.pruner): after each holdout evaluation the trial reports to
its study's journal and asks the study's pruner whether to stop; a stopped trial's record says where
(`tune_trial.pruned`), and the sweep tells the study it was PRUNED (sweep/tune.py), counted in the budget.

The rule is the same for every arm and every trial: the same rungs (the holdout evaluations of the stages that
train the scored head, records/record.py's SCORED_STAGES: an objective with an intermediate stage first, whose
head is still untrained, is judged from its prediction stage on, as one without) and the same pruner, built here
from its name alone:

- `wilcoxon`: Optuna's WilcoxonPruner, a paired test over instances: the trial's per-example results on the
  holdout (1 for a right prediction, 0 for a wrong one; a regression's minus its absolute error) against the
  study's best trial's on the same examples, at the same evaluation. The instances of evaluation e are the steps
  e * n + i (n examples), so each evaluation's examples pair with the best trial's at that evaluation. A test
  over examples compares objectives on what they are scored on, whatever the scale of their losses.
- `asha`: Optuna's SuccessiveHalvingPruner (asynchronous successive halving) over the holdout metric at each
  evaluation (the rung), which stops a trial below the top 1/`ASHA_REDUCTION` of the trials that reached its
  rung.

A trial reports by its number into its own study (the journal the sweeper names in `tune_journal`, relative to
the results directory); the journal's file lock orders its writes with the sweeper's. A resumed trial reports
its evaluations again: Optuna keeps the first value of a step, so the decision is the one made before.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("distill_sweep")

ASHA_REDUCTION = 2  # each rung keeps the top half of the trials that reached it
WILCOXON_P = 0.1  # the paired test's threshold: a trial worse than the best one at this level is stopped


def journal_storage(path: Path) -> Any:
    """The Optuna journal storage of a study file, under its file lock (every process that opens it shares it)."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    return JournalStorage(JournalFileBackend(str(path), lock_obj=JournalFileOpenLock(str(path))))


def make_pruner(name: str) -> Any:
    """The pruner `tune.pruner` names (None for `none`): the same for every arm of a sweep."""
    import warnings

    import optuna

    if name == "wilcoxon":
        with warnings.catch_warnings():  # (marked experimental by Optuna)
            warnings.simplefilter("ignore")
            return optuna.pruners.WilcoxonPruner(p_threshold=WILCOXON_P)
    if name == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=ASHA_REDUCTION)
    if name == "none":
        return None
    raise ValueError(f"unknown pruner {name!r}")


def instance_values(predictions: np.ndarray, labels: np.ndarray, regression: bool) -> np.ndarray:
    """Each holdout example's result, higher better: right (1) or wrong (0), a regression's -|error|."""
    if regression:
        return -np.abs(predictions.astype(np.float64) - labels.astype(np.float64))
    return (predictions == labels).astype(np.float64)


def report_and_decide(trial: Any, pruner_name: str, evaluation: int, metric: float,
                      instances: np.ndarray | None) -> bool:
    """Report evaluation `evaluation` (from 0) of a RUNNING Optuna trial and ask its study's pruner: True when
    it is to stop. Wilcoxon reports each instance (step evaluation * n + i); ASHA the metric (step: the
    evaluation + 1)."""
    if pruner_name == "wilcoxon":
        assert instances is not None, "the Wilcoxon pruner needs the holdout's per-example results"
        n = len(instances)
        for i, value in enumerate(instances):
            trial.report(float(value), evaluation * n + i)
    else:  # (rung k is step k + 1: Optuna's successive halving has its first rung at min_resource = 1)
        trial.report(float(metric), evaluation + 1)
    return bool(trial.should_prune())


class TrialPruning:
    """The job side of a pruned trial: `after_evaluation` reports and decides (module docstring)."""

    def __init__(self, journal: Path, number: int, pruner_name: str, metric: str) -> None:
        self.journal, self.number, self.pruner_name, self.metric = journal, number, pruner_name, metric
        self.off = False  # set once its study cannot be read: the trial then trains to its end

    def _trial(self) -> Any:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.ERROR)  # (a resumed trial's repeated reports: kept as before)
        if not self.journal.is_file():  # (Optuna's backend would create an empty one)
            raise FileNotFoundError(f"no journal {self.journal}")
        storage = journal_storage(self.journal)
        (name,) = optuna.get_all_study_names(storage)  # (one study per journal: sweep/tune.py)
        study = optuna.load_study(study_name=name, storage=storage, pruner=make_pruner(self.pruner_name))
        frozen = study.get_trials(deepcopy=False)[self.number]
        return optuna.trial.Trial(study, frozen._trial_id)

    def after_evaluation(self, evaluation: int, entry: dict[str, Any], instances: np.ndarray | None
                         ) -> dict[str, Any] | None:
        """Report the holdout score of history entry `evaluation` (its index: a resumed job's count on from the
        checkpoint's): None to go on, else what the record says of the prune."""
        if self.off:
            return None
        try:
            stop = report_and_decide(self._trial(), self.pruner_name, evaluation, float(entry["dev"][self.metric]),
                                     instances)
        except Exception as err:  # noqa: BLE001 - a journal missing, damaged or without this trial: never a traceback
            self.off = True
            log.warning("tune.pruner=%s: the study in %s cannot be read (%s: %s): this trial is not pruned, it "
                        "trains to its end", self.pruner_name, self.journal, type(err).__name__, str(err)[:120])
            return None
        if not stop:
            return None
        return {"pruner": self.pruner_name, "rung": evaluation, "stage": entry["stage"], "epoch": entry["epoch"],
                "step": entry["step"], "metric": self.metric, "value": float(entry["dev"][self.metric])}


__all__ = ["ASHA_REDUCTION", "WILCOXON_P", "TrialPruning", "instance_values", "journal_storage", "make_pruner",
           "report_and_decide"]
