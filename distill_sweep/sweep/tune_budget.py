"""The arms' equal budget (`tune.budget_by`): in trials, or in measured cost (seconds or FLOPs).

- `trials` (the default): every arm runs `tune.trials` COMPLETE trials (sweep/tune.py).
- `seconds` or `flops`: every arm has the same budget B in that unit, and the rule is: each round, an arm runs its
  next trial while the cost its COMPLETE trials spent is below B. An arm therefore stops at a cost in [B, B + its
  last trial's cost): any two arms' costs differ by less than one trial's cost (with `tune.parallel` = p trials a
  round, by less than p trials' cost). A trial's cost is its record's `cost` block (training/cost.py): `seconds`
  counts its GPU-seconds where it trained on CUDA, else its CPU-seconds (a pack member's: its share of the pack's);
  `flops` its training FLOPs. A trial whose record holds no cost (written before costs were measured; or 0, a part
  the FLOP counter does not see) counts as the reference cost below; where no trial of any arm has one, the budget
  falls back to `tune.trials` trials per arm, and the sweep says so.
- B is `tune.budget` where given; else `tune.trials` x the reference cost: the mean over the arms of each arm's
  first COMPLETE trial's cost (so that arms get `tune.trials` trials on average, the cheaper more, the dearer
  fewer). Until every arm has a COMPLETE trial (or has failed `tune.trials` of them) an arm without one runs its
  first; then B is fixed. The costs are read from the trials' records every round, so a resumed sweep finds the
  same first trials and continues to the same B.
- With `tune.studies` = S (sweep/studies.py) each study of an arm is an "arm" above: it has the budget B, and B is
  one amount for every study of every arm, `tune.trials` x the mean over all of them of each one's first trial's
  cost (not a B per study index: a study whose first points happened to be cheap would get a smaller budget, and
  the studies' spread would mix tuning luck with budget). So every study of every arm ends within one trial's cost
  of B, and an arm's S studies together spend S x B, within S trials' cost of the other arm's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distill_sweep.config.tune import TuneSettings
from distill_sweep.records.record import Record, RecordError, completed_record
from distill_sweep.sweep.journal import read_storage, stored_at
from distill_sweep.sweep.tune import Arm, failed_trials

UNITS = {"trials": "trials", "seconds": "seconds (GPU where trained on CUDA, else CPU)", "flops": "FLOPs"}


def trial_cost(record: Record, unit: str) -> float | None:
    """A trial's cost in `unit` (seconds or flops) from its record, None where its record holds none."""
    cost = record.cost
    if cost is None:
        return None
    value = cost.flops if unit == "flops" else cost.gpu_seconds if cost.gpu_seconds is not None else cost.cpu_seconds
    # (a damaged record's word or negative number is no cost, and neither is 0: a part the counter does not see, such
    # as an LSTM's FLOPs; each counts as the reference, like a record without a cost, so that no arm runs forever)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return float(value) if ok else None


def reference_budget(trials: int, first_costs: Sequence[float | None]) -> float | None:
    """`trials` x the mean of the arms' first trials' costs (None where no arm has one)."""
    known = [c for c in first_costs if c is not None]
    return trials * sum(known) / len(known) if known else None


def trials_to_ask(spent: float, budget: float, mean_cost: float | None, parallel: int) -> int:
    """How many new trials an arm asks this round: none once `spent` reaches `budget`; else one, or with
    `parallel` > 1 as many (up to `parallel`) as its mean trial cost so far says the rest of the budget holds (at
    least one)."""
    if spent >= budget:
        return 0
    if parallel <= 1 or not mean_cost or mean_cost <= 0:
        return 1
    return max(1, min(parallel, math.ceil((budget - spent) / mean_cost)))


@dataclass
class ArmSpend:
    """What an arm's spent trials (COMPLETE or PRUNED) cost so far, in trial order."""

    costs: list[float | None]  # each spent trial's cost (None: its record holds none)

    def spent(self, reference: float | None) -> float:
        """The sum, a trial without a cost counted as `reference` (0 where that is unknown too)."""
        return sum(c if c is not None else (reference or 0.0) for c in self.costs)

    def mean(self) -> float | None:
        known = [c for c in self.costs if c is not None]
        return sum(known) / len(known) if known else None


class Budget:
    """The sweep's tuning budget: how many trials each arm may have COMPLETE now (`trials_for`, what
    tune.next_trials is given), and whether an arm has spent it (`spent_for`)."""

    def __init__(self, tune: TuneSettings, results_dir: Path) -> None:
        self.tune, self.results_dir = tune, results_dir
        self.unit = tune.budget_by
        self._costs: dict[str, float | None] = {}  # a trial's record (as its study stores it) -> its cost

    @property
    def by_cost(self) -> bool:
        return self.unit != "trials"

    def spend(self, study: Any) -> ArmSpend:
        """The costs of a study's spent trials (COMPLETE, and PRUNED ones: their training counts in the budget too),
        from their records."""
        import optuna

        states = optuna.trial.TrialState
        costs: list[float | None] = []
        for trial in study.get_trials(deepcopy=False, states=(states.COMPLETE, states.PRUNED)):
            costs.append(self._cost(trial))
        return ArmSpend(costs)

    def _cost(self, trial: Any) -> float | None:
        where = trial.user_attrs.get("record")
        if not where:
            return None
        if where not in self._costs:  # (a COMPLETE trial's record no longer changes)
            self._costs[str(where)] = self._read_cost(str(where))
        return self._costs[str(where)]

    def _read_cost(self, where: str) -> float | None:
        found = completed_record(stored_at(where, self.results_dir))
        if found is None:
            return None
        try:
            return trial_cost(Record.from_dict(found), self.unit)
        except RecordError:
            return None

    def amount(self, studies: Sequence[Any]) -> float | None:
        """B in the unit: tune.budget, or tune.trials x the mean first-trial cost once every arm has its first
        (None until then)."""
        if not self.by_cost:
            return float(self.tune.trials)
        if self.tune.budget is not None:
            return float(self.tune.budget)
        firsts: list[float | None] = []
        for study in studies:
            spend = self.spend(study)
            if not spend.costs:
                if _failed(study) < self.tune.trials:
                    return None  # its first trial is still to come
                continue  # given up: as many trials failed as the budget in trials
            firsts.append(spend.costs[0])
        return reference_budget(self.tune.trials, firsts)

    def unknowable(self, studies: Sequence[Any]) -> bool:
        """Every arm has its first trial (or gave up) and still no B: no trial's record holds a cost in the unit
        (records without costs, a part the counter does not see). The budget falls back to `tune.trials` trials."""
        return self.by_cost and self.amount(studies) is None and all(
            self.spend(s).costs or _failed(s) >= self.tune.trials for s in studies)

    def trials_for(self, study: Any, studies: Sequence[Any]) -> int:
        """The number of COMPLETE trials the arm of `study` may reach this round (tune.next_trials' budget)."""
        if not self.by_cost or self.unknowable(studies):
            return self.tune.trials
        spend = self.spend(study)
        done = len(spend.costs)
        budget = self.amount(studies)
        if budget is None:  # the reference is not known yet: an arm without a complete trial runs its first
            return max(done, 1)
        return done + trials_to_ask(spend.spent(budget / self.tune.trials), budget, spend.mean(),
                                    self.tune.parallel)

    def spent_for(self, study: Any, studies: Sequence[Any]) -> bool:
        """Whether the arm spent its budget (and so has a choice to make): `tune.trials` COMPLETE trials, or its
        cost at or above B with at least one COMPLETE trial."""
        spend = self.spend(study)
        if not _has_complete(study):  # nothing to choose (every trial pruned or failed)
            return False
        if not self.by_cost or self.unknowable(studies):
            return len(spend.costs) >= self.tune.trials
        budget = self.amount(studies)
        return budget is not None and spend.spent(budget / self.tune.trials) >= budget

    def line(self, studies: Sequence[Any]) -> str:
        """What the budget is, in words (the dry run's and the sweep's line)."""
        if not self.by_cost:
            return f"distill_sweep: tuning budget: {self.tune.trials} trials per arm (tune.budget_by=trials)"
        unit = UNITS[self.unit]
        rule = ("each round an arm runs its next trial while its completed trials' cost is below the budget: the "
                "arms' costs end within one trial's cost of each other")
        if self.tune.budget is not None:
            return f"distill_sweep: tuning budget: {self.tune.budget:.4g} {unit} per arm (tune.budget); {rule}"
        if self.unknowable(studies):
            return (f"distill_sweep: warning: no trial's record holds a cost in {unit} (records from before costs "
                    f"were measured, or a part the FLOP counter does not see): the tuning budget falls back to "
                    f"tune.trials={self.tune.trials} trials per arm")
        amount = self.amount(studies)
        # (with tune.studies > 1 every study of every arm has this one B: the module's docstring)
        each = "per study, every study of every arm" if self.tune.studies > 1 else "per arm"
        fixed = (f"= {amount:.4g} {unit} {each}" if amount is not None
                 else "(fixed once every arm's first trial has completed)")
        firsts = "every study's first trial" if self.tune.studies > 1 else "the arms' first trials"
        return (f"distill_sweep: tuning budget: tune.trials={self.tune.trials} x the mean cost of {firsts}, "
                f"in {unit} {fixed}; {rule}")


def _failed(study: Any) -> int:
    return failed_trials(study)


def _has_complete(study: Any) -> bool:
    import optuna

    return bool(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))


class _NoTrials:
    """An arm's study before its journal exists (the dry run creates none)."""

    def get_trials(self, deepcopy: bool = False, states: Any = None) -> list[Any]:
        return []


def dry_run_line(arms: Sequence[Arm], tune: TuneSettings, results_dir: Path) -> str:
    """The budget as the dry run states it: from the studies as they are on disk, read only."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    studies: list[Any] = []
    for arm in arms:
        path = arm.journal(results_dir)
        try:
            studies.append(optuna.load_study(study_name=arm.name, storage=read_storage(path)) if path.exists()
                           else _NoTrials())
        except Exception:  # noqa: BLE001 - a journal Optuna cannot replay (tune.dry_run_line says so): none counted
            studies.append(_NoTrials())
    return Budget(tune, results_dir).line(studies)


__all__ = ["UNITS", "ArmSpend", "Budget", "dry_run_line", "reference_budget", "trial_cost", "trials_to_ask"]
