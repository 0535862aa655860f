"""The `tune` block: a tuning budget per arm of a sweep, and the search space its trials draw from.

An arm is one cell of the grid without its seed. With `tune.trials` > 0 the sweeper gives every arm the same
number of trials, from the same sampler and seed, each trained on the training split less a seeded holdout and
scored on that holdout (never on a reported dev split); the grid's jobs then run with each arm's best values
(sweep/tune.py). At its defaults the block is off and leaves every config hash as it was (job/hashed.py).

This module checks the block on its own (types, ranges, the shape of the space); the rules that need a job's
config (a key that exists and that the arm reads, not the teacher's, a holdout of at least a batch) are
sweep/tune.py's, checked for every arm before any work.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from distill_sweep.config.parse import IDENTITY, INVARIANT, SEED_RANGE, UNHASHED_AT_DEFAULT
from distill_sweep.config.seeds import derived_seed
from distill_sweep.errors import ConfigError


@dataclass(frozen=True)
class Range:
    """One numeric key of the space: drawn from [low, high], on a log scale with `log`."""

    low: float
    high: float
    log: bool = False
    integer: bool = False  # both bounds integers: the key takes integers (a batch size, epochs)


@dataclass
class TuneSettings:
    # trials per arm (0: no tuning, the default: the grid runs at its configured values). Not hashed: a larger budget
    # continues the same studies (the trials' jobs, and a grid job whose chosen values did not change, stay the same
    # jobs); the block is hashed only while tuning is on (job/hashed.py)
    trials: int = field(default=0, metadata={"ge": 0, **INVARIANT})
    # the keys tuned: a job-config key (objective.temperature, optimizer.lr) -> {low, high, log} or a list of choices
    # (null: none)
    space: dict[str, Any] | None = field(default=None, metadata=IDENTITY)
    # the share of the training split held out as the tuning dev set (trials train on the rest)
    holdout: float = field(default=0.1, metadata=IDENTITY | {"gt": 0.0, "lt": 1.0})
    # how trials are drawn: tpe (Optuna's TPE), random, or qmc (scrambled Sobol points, one sequence per study: the
    # arms whose spaces coincide get the same points, whatever the other arms or the timing; for comparisons)
    sampler: Literal["tpe", "random", "qmc"] = field(default="tpe", metadata=IDENTITY)
    # the holdout metric maximised (null: the task's primary metric)
    metric: str | None = field(default=None, metadata=IDENTITY)
    # trials of one arm asked together and launched side by side (a SLURM array of that many workers per arm);
    # each is drawn without the others' scores, so the same seed and the same value give the same trials (how they are
    # scheduled, not what a trial computes: not hashed)
    parallel: int = field(default=1, metadata={"ge": 1, **INVARIANT})
    # the sampler's seed and the holdout's: the same seed gives the same trials and the same holdout
    seed: int = field(default=0, metadata=IDENTITY | SEED_RANGE)
    # what the arms' equal budget is counted in: trials (each arm `trials` trials), seconds or flops (each arm trains
    # trials while its spent cost is below the budget: sweep/tune_budget.py). How many trials run, not what a trial
    # computes: not hashed, like `trials`
    budget_by: Literal["trials", "seconds", "flops"] = field(default="trials", metadata=INVARIANT)
    # with budget_by seconds or flops: each arm's budget in that unit (null: `trials` x the mean cost of the arms'
    # first trials)
    budget: float | None = field(default=None, metadata={"gt": 0.0, **INVARIANT})
    # independent studies per arm, each of `trials` trials from a seed of its own (`study_seed`): tuning luck
    # measured (the median of the studies' bests and their spread); the grid runs at the median study's values.
    # Not hashed: more studies continue the same ones (study 0 is the single study of studies=1)
    studies: int = field(default=1, metadata={"ge": 1, **INVARIANT})
    # stops a trial early when its study's pruner says so after a holdout evaluation, the same rule and rungs for
    # every arm (training/trial_pruning.py): none, wilcoxon (a paired test over the holdout's examples against the
    # study's best trial: fair across objectives whose losses differ in scale) or asha (successive halving on the
    # holdout metric); a pruned trial counts in the budget. Hashed: a pruned trial trains less
    pruner: Literal["none", "wilcoxon", "asha"] = field(default="none", metadata=IDENTITY | UNHASHED_AT_DEFAULT)

    def validate(self, where: str) -> None:
        for key in self.space or {}:
            why = refused_key(str(key))
            if why:
                raise ConfigError(f"{where}.space.{key}: {why}")
        self._parsed = {key: parse_domain(value, f"{where}.space.{key}") for key, value in (self.space or {}).items()}
        if self.budget is not None and self.budget_by == "trials":
            raise ConfigError(f"{where}.budget={self.budget} with {where}.budget_by=trials: the budget in trials is "
                              f"{where}.trials; set {where}.budget_by=seconds or flops to give it in that unit")
        if self.trials > 0 and not self.space:
            raise ConfigError(f"{where}.trials={self.trials} with an empty {where}.space: name the keys to tune "
                              "(e.g. objective.temperature: {low: 1, high: 8})")

    def domains(self) -> dict[str, Range | list[Any]]:
        """The space as `validate` parsed it: each key's Range or its list of choices."""
        return dict(getattr(self, "_parsed", {}))


# The space may name the keys of the parts that say how the student trains (student, objective, optimizer,
# procedure) and the top-level training keys (epochs, map, ...); sweep/tune.py checks each one's declared kind
# against the job. Groups that are never tuned, and why (a top-level key that is not a group is the run's:
# checked by its kind).
_NOT_TUNED = {
    "teacher": "tuning the teacher is out of scope (every arm distils the same teacher); tune the student's keys",
    "task": "a task key changes the data every arm is compared on (and the teacher fine-tuned on it): the arms of "
            "a comparison share their task; tune the student's keys",
    "corpus": "the corpus is the data every arm is compared on, not a setting of the student's training",
    "logger": "the logger records a job, it does not change what it trains",
    "hydra": "Hydra's settings say where and how jobs launch, not what they train",
}


def refused_key(key: str) -> str | None:
    """Why `tune.space` may not name `key` from its name alone (None: the sweep checks it against each arm's
    config). A seed is the variance the grid's seeds measure, not a setting: a study would pick the luckiest
    draw; the tune block's own keys would change the holdout or the budget the trials are compared on."""
    parts = key.split(".")
    if parts[0] in ("tune", "tune_trial", "tune_study", "tune_journal", "tune_chosen"):
        return ("the tune block's own keys (the holdout, the sampler, the budget) say how every trial is scored "
                "and compared: they cannot vary between trials")
    if any("seed" in part for part in parts):
        return ("a seed is not a setting to tune: the grid's seeds measure the variance the comparison reports, "
                "and a study over seeds would pick the luckiest draw")
    if parts[0] in _NOT_TUNED:
        return _NOT_TUNED[parts[0]]
    if parts[0] in ("student", "objective", "procedure") and parts[1:] == ["name"]:
        return (f"the {parts[0]} is what the arms of a comparison are (choose it in the grid: {parts[0]}=a,b), not "
                "a setting of its training")
    if parts[:2] == ["procedure", "lm_eval"]:
        return ("the lm-eval stage scores the trained student: it changes what is measured after training, not how "
                "the student trains")
    return None


def study_seed(seed: int, study: int) -> int:
    """The seed of study `study` of an arm (tune.studies): a QMC study's scrambling; study 0's is the one a single
    study has. Independent of the arm, so arms whose spaces coincide draw the same points."""
    return derived_seed("tune-qmc", seed, study) % 2**32  # (NumPy's and SciPy's generators take seeds below 2**32)


def trial_seed(seed: int, study: int, number: int) -> int:
    """The seed of trial `number` of study `study` (a TPE or random trial is drawn by a sampler of its own, seeded
    from it): study 0's trials keep the seeds a single study's trials had before there were several."""
    parts = ("tune-trial", seed, number) if study == 0 else ("tune-trial", seed, "study", study, number)
    return derived_seed(*parts) % 2**32


def sampler_seed(tune: TuneSettings, study: int, number: int) -> int:
    """The seed that drew a trial: its study's for qmc (the trial is the sequence's point `number`), its own for
    tpe and random."""
    return study_seed(tune.seed, study) if tune.sampler == "qmc" else trial_seed(tune.seed, study, number)


def trial_label(number: int, budget: int) -> str:
    """How a tuning trial's lines name it: `trial k of N` (k from 1; past the budget where failed trials were asked
    again in their place)."""
    k = number + 1
    return f"trial {k} of {budget}" if k <= budget else f"trial {k} (a budget of {budget}: failed ones asked again)"


def parse_domain(value: Any, where: str) -> Range | list[Any]:
    """One entry of `tune.space`: a list of choices, or a mapping {low, high, log} (ConfigError, one line)."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ConfigError(f"{where}=[]: give at least one choice, or a range {{low, high}}")
        if len(set(map(repr, value))) < len(value):
            raise ConfigError(f"{where}={list(value)}: a choice is listed twice")
        return list(value)
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}={value!r}: expected a range {{low, high, log}} or a list of choices")
    unknown = sorted(str(k) for k in value if k not in ("low", "high", "log"))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown setting (known: low, high, log)")
    for key in ("low", "high"):
        bound = value.get(key)
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound):
            raise ConfigError(f"{where}.{key}={bound!r}: expected a finite number")
    log = value.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"{where}.log={log!r}: expected true or false")
    low, high = value["low"], value["high"]
    if low >= high:
        raise ConfigError(f"{where}: low={low} >= high={high}: a range needs low < high")
    if log and low <= 0:
        raise ConfigError(f"{where}: a log range must stay above 0, got low={low} (use log: false, or low > 0)")
    return Range(float(low), float(high), log, isinstance(low, int) and isinstance(high, int))


__all__ = ["Range", "TuneSettings", "parse_domain", "refused_key", "sampler_seed", "study_seed", "trial_label",
           "trial_seed"]
