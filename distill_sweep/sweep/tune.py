"""The tuning phase of a sweep (`tune.trials` > 0): every arm gets the same budget of trials, then the grid runs
each arm's best values over its seeds.

An *arm* is one cell of the grid without its seed. Each arm has an Optuna study (ask/tell) in a journal file under
the results directory (`<results_dir>/tuning/<arm>.journal`, a file lock shared by every process that opens it),
named from the arm's identity. A trial is a job like any other, launched by the same launcher (packs, store,
records): the arm's first grid job with the trial's values and `+tune_trial=<number>`, which trains without the
holdout and is scored on it (data/holdout.py). Its record is the trial's: a trial whose process was killed is
still RUNNING in the study and is run again at the next sweep (resumed from its checkpoint), never asked anew,
and a re-run sweep asks only the trials its budget still lacks (COMPLETE ones are counted from the study). The
journal, its sampler (each trial seeded from tune.seed and its number; qmc: point k of a Sobol sequence seeded per
study, the same for arms with one space) and the paths it stores: sweep/journal.py. Several independent studies
per arm (tune.studies) and the median study's choice: sweep/studies.py. A trial stopped by tune.pruner
(training/trial_pruning.py, reporting from inside its job) is told PRUNED and counts in the budget.

Before any work, every arm's space is checked against the arm's own config (`plan_arms`): a key whose declared
kind is not identity (config/parse.py: the teacher's, a result-invariant or non-deterministic key), a key no job's
config has, a bound its part refuses, a key that changes the teacher, and a key that no arm reads (no value of it changes
the arm's jobs) are one line each; a key that some arms lack or do not read is left out of theirs (and said so).
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from distill_sweep.config.tune import Range, TuneSettings
from distill_sweep.data.holdout import holdout_size
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import JobIdentity, identify
from distill_sweep.records import files
from distill_sweep.records.record import best_epoch, completed_record
from distill_sweep.sweep.cost import hours_text, student_passes, task_rows
from distill_sweep.sweep.journal import mend_journal, read_storage, stored_at, stored_path, trial_sampler

TUNING_DIR = "tuning"  # under results_dir: one journal per arm, and the values each arm chose
_MISSING = object()


@dataclass
class Arm:
    """One cell of the grid without its seed, and its study."""

    digest: str  # the identity of its jobs with the seed left out
    name: str  # the study's name: task, objective, init and the digest's first characters
    overrides: list[str]  # its first grid job's: the trials run as that job
    ident: JobIdentity  # that job's identity
    space: dict[str, Range | list[Any]]  # the keys this arm reads
    left_out: list[str]  # the space's keys this arm does not read
    grid: list[list[str]] = field(default_factory=list)  # every grid job of the arm (its seeds)
    best: dict[str, Any] | None = None  # the chosen values, once its budget is spent
    best_trial: int | None = None
    study: int = 0  # which of the arm's tune.studies this is (sweep/studies.py); 0: the only one at studies=1
    pruner: str = "none"  # tune.pruner: its trials report to the journal (`+tune_journal`) unless none

    @property
    def key(self) -> str:
        """The arm's study among all of a sweep's (the arm's digest for study 0)."""
        return self.digest if self.study == 0 else f"{self.digest}-s{self.study}"

    def journal(self, results_dir: Path) -> Path:
        suffix = "" if self.study == 0 else f".s{self.study}"  # (study 0 keeps the single study's file)
        return results_dir / TUNING_DIR / f"{self.digest[:10]}{suffix}.journal"


def settings_of(config: DictConfig) -> TuneSettings | None:
    """The sweep's tune block when tuning is on (tune.trials > 0), else None (as the jobs check it)."""
    from distill_sweep.config.parse import parse

    node = OmegaConf.select(config, "tune", default=None)
    plain = OmegaConf.to_container(node, resolve=True) if node is not None else None
    tune = parse(TuneSettings, plain, "tune")
    return tune if tune.trials > 0 else None


def _select(cfg: DictConfig, key: str) -> Any:
    return OmegaConf.select(cfg, key, default=_MISSING, throw_on_missing=False)


def _probe_values(domain: Range | list[Any]) -> list[Any]:
    if isinstance(domain, list):
        return list(domain)
    return [int(domain.low), int(domain.high)] if domain.integer else [domain.low, domain.high]


def _with(cfg: DictConfig, values: dict[str, Any]) -> DictConfig:
    out = copy.deepcopy(cfg)
    for key, value in values.items():
        OmegaConf.update(out, key, value, merge=False)
    return out


def _reads(cfg: DictConfig, ident: JobIdentity, key: str, domain: Range | list[Any]) -> bool:
    """Whether the arm of `cfg` reads `key`: its bounds (or choices) make different jobs. A bound the key's part
    refuses, or a key that changes the teacher, is a ConfigError."""
    digests = set()
    for value in _probe_values(domain):
        try:
            probe = identify(_with(cfg, {key: value}))
        except ConfigError as err:
            raise ConfigError(f"tune.space.{key}: the value {value!r} is refused: {err}") from None
        if probe.teacher.key != ident.teacher.key:
            raise ConfigError(f"tune.space.{key} changes the teacher (its fine-tuning or outputs): tuning the "
                              "teacher is out of scope, every arm distils the same teacher; tune the student's keys")
        digests.add(probe.digest)
    return len(digests) > 1


def _declared_kind(ident: JobIdentity, key: str) -> str:
    """The kind `key` declares in the job's typed settings (config/parse.py's kinds): the first kind other than
    identity on its path (a field inside an invariant block is invariant), identity where nothing else is
    declared (the hash's own rule for an undeclared field)."""
    from distill_sweep.config.parse import key_kind

    parts = key.split(".")
    roots = {"student": ident.student, "objective": ident.objective, "optimizer": ident.settings.optimizer,
             "procedure": ident.procedure_settings}
    node: Any = roots[parts[0]] if parts[0] in roots else ident.settings.run
    path = parts[1:] if parts[0] in roots else parts
    for part in path:
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            fields = {f.name: f for f in dataclasses.fields(node)}
            if part not in fields:
                break
            kind = key_kind(fields[part]) or "identity"
            if kind != "identity":
                return kind
            node = getattr(node, part)
        elif isinstance(node, Mapping):
            node = node.get(part)
        else:
            break
    return "identity"


_KIND_REFUSED = {
    "teacher": "it changes the teacher (its fine-tuning or outputs): tuning the teacher is out of scope, every arm "
               "distils the same teacher; tune the student's keys",
    "invariant": "it says where or how a job runs, not what it trains (no number of a record depends on it): "
                 "there is nothing to tune",
    "nondeterministic": "no score depends on it beyond run-to-run noise (declared non-deterministic): a study "
                        "would fit that noise",
}


def _check_kind(ident: JobIdentity, key: str) -> None:
    """Only identity keys that change how the student trains may be tuned (config/tune.py refuses the rest by name)."""
    kind = _declared_kind(ident, key)
    if kind != "identity":
        raise ConfigError(f"tune.space.{key}: {_KIND_REFUSED.get(kind, f'a key of kind {kind} is not tuned')}")


def _check_holdout(tune: TuneSettings, ident: JobIdentity) -> None:
    """The holdout must leave the trials at least one training batch, and hold at least one example."""
    settings = ident.settings
    rows = task_rows(settings)
    if not rows:
        return  # the training split's size is not stated (a hub task without train_size): the trial checks it
    batch = settings.optimizer.batch_size or settings.task.recipe.batch_size
    space_batch = tune.domains().get("optimizer.batch_size")
    if space_batch is not None:
        batch = max(int(v) for v in _probe_values(space_batch))
    held = holdout_size(rows, tune.holdout)
    if held < 1 or rows - held < batch:
        raise ConfigError(f"tune.holdout={tune.holdout}: of the {rows} training examples of task "
                          f"{settings.task.name} it holds out {held} and leaves {rows - held}; a trial needs at least "
                          f"one example to score and a batch ({batch}) to train on")


def plan_arms(distilled: Sequence[tuple[JobIdentity, list[str]]], compose: Callable[[Sequence[str]], DictConfig],
              tune: TuneSettings) -> list[Arm]:
    """The sweep's arms, each with the part of the space it reads; ConfigError (one line) for a bad space."""
    domains = tune.domains()
    arms: dict[str, Arm] = {}
    present: set[str] = set()
    swept: dict[str, set[str]] = {key: set() for key in domains}  # each key's values in the grid's overrides
    for ident, overrides in distilled:
        cfg = compose(overrides)
        given = dict(o.lstrip("+~").split("=", 1) for o in overrides if "=" in o)
        for key in domains:
            swept[key].add(given.get(key, ""))
        seedless = _with(cfg, {"seed": 0})
        digest = identify(seedless).digest
        if digest in arms:
            arms[digest].grid.append(list(overrides))
            continue
        if not ident.procedure_settings.reads_task:
            raise ConfigError(f"tune with procedure={ident.procedure.name}: a trial holds out part of the task's "
                              "training split, and this procedure reads none (tuning is for the task's jobs)")
        augment = getattr(ident.settings.task.augment, "name", ident.settings.task.augment)  # parsed by identify
        if augment not in ("none", None):
            raise ConfigError(f"tune with task.augment={augment}: a trial's holdout is taken "
                              "from the original training split, which augmentation would leak into training")
        space, left_out = {}, []
        for key, domain in domains.items():
            _check_kind(ident, key)
            if _select(cfg, key) is not _MISSING and _reads(cfg, ident, key, domain):
                space[key] = domain
            else:  # not in this arm's config (another objective's term), or no value of it changes its jobs
                left_out.append(key)
        _check_holdout(tune, ident)
        name = f"{ident.task}-{ident.objective_name}-{ident.init_label}-{digest[:10]}"
        arms[digest] = Arm(digest, name, list(overrides), ident, space, left_out, [list(overrides)])
        present.update(key for key in domains if _select(cfg, key) is not _MISSING)
    both = [key for key, values in swept.items() if len(values) > 1]
    if both:  # each cell's value would be overridden by its arm's choice: the cells would no longer differ in it
        # (the overrides, not the composed values: two objectives' presets may differ in a key the grid leaves alone)
        raise ConfigError(f"tune.space.{both[0]}: the grid sweeps it too (its jobs take {len(swept[both[0]])} values): "
                          "a study would override each cell's value with its arm's choice; sweep it or tune it")
    unknown = [key for key in domains if key not in present]
    if unknown:
        raise ConfigError(f"tune.space.{unknown[0]}: no such key in the config of any job of this sweep")
    unread = [key for key in domains if all(key in arm.left_out for arm in arms.values())]
    if unread:
        raise ConfigError(f"tune.space.{unread[0]}: no arm of this sweep reads it (no value of it changes their "
                          "jobs): leave it out of the space")
    return list(arms.values())


# ------------------------------------------------------------------------------------------- studies
def open_study(arm: Arm, tune: TuneSettings, results_dir: Path) -> Any:
    """The arm's study in its journal (created on first use; a damaged journal mended first, `mend_journal`), its
    trials drawn by `trial_sampler`: each from tune.seed and its own number."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    path = arm.journal(results_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    mend_journal(path)
    return optuna.create_study(study_name=arm.name, storage=read_storage(path),
                               sampler=trial_sampler(tune, arm.space, arm.study), direction="maximize",
                               load_if_exists=True)


def completed_trials(arm: Arm, results_dir: Path) -> int:
    """COMPLETE trials of the arm's study so far (0 where it has no journal yet): the dry run's count."""
    return len(_completed(arm, results_dir))


def _spent_states() -> tuple[Any, ...]:
    import optuna

    return (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


def _completed(arm: Arm, results_dir: Path) -> list[Any]:
    if not arm.journal(results_dir).exists():
        return []
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:  # (read only, as the dry run is: a damaged journal is mended by the sweep that runs, open_study)
        study = optuna.load_study(study_name=arm.name, storage=read_storage(arm.journal(results_dir)))
    except Exception:  # noqa: BLE001 - a journal Optuna cannot replay, or without this study: nothing completed
        print(f"distill_sweep: warning: the tuning journal {arm.journal(results_dir)} cannot be read: the sweep will "
              "set it aside and ask its trials again", file=sys.stderr, flush=True)
        return []
    return study.get_trials(deepcopy=False, states=_spent_states())  # (a pruned trial is spent budget)


def _trial_records(trials: Sequence[Any], results_dir: Path) -> list[dict[str, Any]]:
    """The completed records of an arm's COMPLETE trials (their throughput prices the trials still to run)."""
    found = (completed_record(stored_at(str(t.user_attrs["record"]), results_dir)) for t in trials
             if "record" in t.user_attrs)
    return [r for r in found if r]


def _suggest(trial: Any, space: dict[str, Range | list[Any]]) -> dict[str, Any]:
    values = {}
    for key, domain in space.items():
        if isinstance(domain, list):
            values[key] = trial.suggest_categorical(key, domain)
        elif domain.integer:
            values[key] = trial.suggest_int(key, int(domain.low), int(domain.high), log=domain.log)
        else:
            values[key] = trial.suggest_float(key, domain.low, domain.high, log=domain.log)
    return values


def override(key: str, value: Any) -> str:
    """`key=value` as a Hydra override (strings quoted, so that a value is never read as another type)."""
    if value is None:
        return f"{key}=null"
    if isinstance(value, bool):
        return f"{key}={'true' if value else 'false'}"
    if isinstance(value, (int, float)):
        return f"{key}={value!r}"
    return f"{key}='{value}'"


@dataclass
class PendingTrial:
    arm: Arm
    number: int
    values: dict[str, Any]
    overrides: list[str]


def trial_overrides(arm: Arm, number: int, values: dict[str, Any]) -> list[str]:
    study = [f"+tune_study={arm.study}"] if arm.study else []  # (study 0's jobs are the single study's)
    # a pruned trial reports to its study's journal (training/trial_pruning.py), named relative to results_dir
    journal = [f"+tune_journal='{arm.journal(Path())}'"] if arm.pruner != "none" else []
    return [*arm.overrides, *(override(k, v) for k, v in values.items()), f"+tune_trial={number}", *study, *journal]


def next_trials(arm: Arm, study: Any, budget: int, parallel: int = 1, failed_cap: int | None = None
                ) -> list[PendingTrial]:
    """The trials to run now for one arm: those left RUNNING (by a killed sweep: run again, same number and values;
    by another sweep running now: its job's lock makes this one wait for it), else up to `parallel` new trials
    while the arm's COMPLETE trials are short of the budget ([] once it is spent). Two sweeps asking at once: a
    trial with the budget already filled by lower-numbered ones gives way, so the COMPLETE trials never pass it."""
    import optuna

    states = optuna.trial.TrialState
    trials = study.get_trials(deepcopy=False)
    half = [t for t in trials if t.state == states.RUNNING and set(t.params) != set(arm.space)]
    for t in half:  # asked, then stopped (a kill, or a journal mended back to before its values): run as it is,
        # its job would train other values than the study holds
        _abandon(study, t, "asked, but its values were not all drawn (its sweep stopped in between)")
    trials = study.get_trials(deepcopy=False) if half else trials
    done = sum(t.state in _spent_states() for t in trials)
    # (a failed trial is asked again, up to a budget of them: `failed_cap` where the budget is in cost, tune_budget.py)
    if done >= budget or failed_trials(study) >= (failed_cap or budget):
        return []
    running = [t for t in trials if t.state == states.RUNNING][: budget - done]
    if running:
        return [PendingTrial(arm, t.number, dict(t.params), trial_overrides(arm, t.number, dict(t.params)))
                for t in running]
    asked: list[PendingTrial] = []
    for _ in range(min(parallel, budget - done)):
        trial = study.ask()  # TPE's constant liar sees the ones asked before it as pending (open_study)
        ahead = sum(t.state in (*_spent_states(), states.RUNNING) for t in study.get_trials(deepcopy=False)
                    if t.number < trial.number)
        if ahead >= budget:  # another sweep on this study asked at the same moment: its trials fill the budget
            _abandon(study, study.get_trials(deepcopy=False)[trial.number], "another sweep's trial fills the budget")
            break
        try:
            values = _suggest(trial, arm.space)
        except optuna.exceptions.UpdateFinishedTrialError:
            break  # another sweep, seeing it without all its values, gave it up in between: ask again
        asked.append(PendingTrial(arm, trial.number, values, trial_overrides(arm, trial.number, values)))
    # nothing asked here: the other sweep's trials, run here too (their locks make this sweep wait for them)
    return asked or next_trials(arm, study, budget, parallel, failed_cap)


def round_line(pending: Sequence[PendingTrial], studies: dict[str, Any], tune: TuneSettings, before: int) -> str:
    """The line before a round of trials: `round k of N` (N: the budget in rounds of tune.parallel; k from the
    trials the arms have completed), the trials and the arms, and how many completed before (found on disk)."""
    rounds = -(-tune.trials // tune.parallel)
    k = min(completed(studies[p.arm.key]) for p in pending) // tune.parallel + 1
    which = f"round {k} of {rounds}" if k <= rounds else f"round {k} ({rounds} planned: failed trials asked again)"
    if tune.budget_by != "trials":  # as many rounds as the arms' costs take (sweep/tune_budget.py)
        which = f"round {k} (a budget in {tune.budget_by})"
    numbers = sorted({p.number + 1 for p in pending})  # (each arm's study numbers its own trials)
    studies = len({p.arm.study for p in pending})
    each = f" x {studies} studies" if studies > 1 else ""
    return (f"distill_sweep: tuning, {which}: {len(pending)} trial(s) ({'trial' if len(numbers) == 1 else 'trials'} "
            f"{', '.join(map(str, numbers))}) of {len({p.arm.digest for p in pending})} arm(s){each}, {before} of "
            "them completed before")


def _abandon(study: Any, trial: Any, why: str) -> None:
    """A trial given up without a job (`abandoned`: not a failure of the arm's, asked again in its place); left as
    it is where another sweep finished it first."""
    import optuna

    try:
        study._storage.set_trial_user_attr(trial._trial_id, "abandoned", why)  # (Optuna has no public setter)
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
    except optuna.exceptions.UpdateFinishedTrialError:
        pass


def failed_trials(study: Any) -> int:
    """Trials whose job failed (a diverging learning rate: a non-finite loss), not those that gave way."""
    import optuna

    return sum(t.state == optuna.trial.TrialState.FAIL and "abandoned" not in t.user_attrs
               for t in study.get_trials(deepcopy=False))


def completed(study: Any) -> int:
    """The trials of the study's budget spent: COMPLETE ones and those its pruner stopped (PRUNED)."""
    return len(study.get_trials(deepcopy=False, states=_spent_states()))


def spent(study: Any, budget: int) -> bool:
    """Whether the study has spent its budget with a trial to choose (one COMPLETE at least: a study whose trials
    were all pruned or failed has none)."""
    import optuna

    return completed(study) >= budget and any(t.state == optuna.trial.TrialState.COMPLETE
                                              for t in study.get_trials(deepcopy=False))


def trial_pruned(ident: JobIdentity) -> bool:
    """Whether a trial's completed record says its pruner stopped it (training/trial_pruning.py)."""
    record = completed_record(ident.out_dir)
    return bool(((record or {}).get("tune_trial") or {}).get("pruned"))


def trial_score(ident: JobIdentity, metric: str | None) -> float | None:
    """A trial's holdout score from its completed record (the best epoch's), None where it did not complete."""
    record = completed_record(ident.out_dir)
    if record is None:
        return None
    metric = metric or ident.settings.task.primary_metric
    best = best_epoch(record.get("epochs") or [], metric)
    return None if best is None else float(best["dev"][metric])


def tell(study: Any, pending: PendingTrial, score: float | None, record_dir: Path | None = None,
         results_dir: Path | None = None, pruned: bool = False) -> None:
    """The trial's result into the study, with where its record is (relative to `results_dir`: the checklist sums
    its compute, in this results directory or a copy of it). A trial another process already told (two sweeps
    on one study run its job once, both tell it) is left as it is, also when that process tells it between this
    one's look and its write."""
    import optuna

    states = optuna.trial.TrialState
    frozen = study.get_trials(deepcopy=False)[pending.number]
    if frozen.state != states.RUNNING:
        return
    try:
        if record_dir is not None:  # (Optuna has no public setter for it)
            study._storage.set_trial_user_attr(frozen._trial_id, "record", stored_path(record_dir, results_dir))
        if pruned:  # (its last reported value stands: counted in the budget, never chosen)
            study.tell(pending.number, state=states.PRUNED, skip_if_finished=True)
        elif score is None:
            study.tell(pending.number, state=states.FAIL, skip_if_finished=True)
        else:
            study.tell(pending.number, score, skip_if_finished=True)
    except optuna.exceptions.UpdateFinishedTrialError:
        pass  # told by the other sweep in between: the same job's record, the same score


def choose(arm: Arm, study: Any, results_dir: Path, tune: TuneSettings, more: dict[str, Any] | None = None) -> None:
    """The arm's best trial (by holdout score), kept as its chosen values and written next to its journal with how
    they were chosen (the reporting checklist's source); `more`: what else chosen.json holds (the studies of
    tune.studies > 1, sweep/studies.py)."""
    best = study.best_trial
    arm.best, arm.best_trial = dict(best.params), best.number
    metric = tune.metric or arm.ident.settings.task.primary_metric
    chosen = {"study": arm.name, "journal": stored_path(arm.journal(results_dir), results_dir), "trial": best.number,
              "score": best.value, "values": arm.best, "left_out": arm.left_out,
              "space": {k: v for k, v in (tune.space or {}).items() if k in arm.space}, "trials": tune.trials,
              "sampler": tune.sampler, "seed": tune.seed, "holdout": tune.holdout, "metric": metric,
              "budget_by": tune.budget_by, "budget": tune.budget,
              "task": arm.ident.task, "objective": arm.ident.objective_name, "init": arm.ident.init_label,
              **(more or {})}
    files.write_json_atomic(chosen_path(arm, results_dir), chosen)


def chosen_path(arm: Arm, results_dir: Path) -> Path:
    return results_dir / TUNING_DIR / f"{arm.digest[:10]}.chosen.json"


def tuned_grid(arm: Arm, results_dir: Path) -> list[list[str]]:
    """The arm's grid jobs with its chosen values, each pointing at the arm's choice (`+tune_chosen`, relative to
    the results directory)."""
    assert arm.best is not None
    pointer = f"+tune_chosen='{stored_path(chosen_path(arm, results_dir), results_dir)}'"
    return [[*overrides, *(override(k, v) for k, v in arm.best.items()), pointer] for overrides in arm.grid]


def dry_run_line(arms: Sequence[Arm], tune: TuneSettings, results_dir: Path,
                 done_records: Sequence[dict[str, Any]] = ()) -> str:
    """What the tuning phase will run: trials per arm (`arms`: every study of every arm, sweep/studies.py), those
    its studies already hold, what is left, and its cost in hours at the throughput of `done_records` (the grid's
    completed records)."""
    trials = [_completed(arm, results_dir) for arm in arms]
    done = [min(len(t), tune.trials) for t in trials]
    done_records = [*done_records, *(r for t in trials for r in _trial_records(t, results_dir))]
    passes = sum(student_passes(arm.ident) * (tune.trials - n) for arm, n in zip(arms, done, strict=True))
    n_arms = len({arm.digest for arm in arms})
    studies = f" x {tune.studies} independent studies" if tune.studies > 1 else ""
    chosen = "median study's" if studies else "best"
    lines = [f"distill_sweep: tuning first: {n_arms} arm(s){studies} x {tune.trials} trial(s) ({tune.sampler}, "
             f"seed {tune.seed}, holdout {tune.holdout} of the training split) = {len(arms) * tune.trials} trial "
             f"jobs, {sum(done)} already completed, {len(arms) * tune.trials - sum(done)} to run (at most "
             f"{passes:.3g} student sample-passes{hours_text(passes, list(done_records))}: each trial trains at most "
             f"as long as its arm's grid job); {len(arms) * tune.parallel} trial(s) at a time ({tune.parallel} per "
             f"{'study' if studies else 'arm'}); then the grid with each arm's {chosen} values"]
    for arm in arms:
        if arm.left_out and arm.study == 0:
            lines.append(f"  arm {arm.name}: {', '.join(arm.left_out)} left out of its space (it does not read them)")
    return "\n".join(lines)


__all__ = ["TUNING_DIR", "Arm", "choose", "dry_run_line", "next_trials", "open_study", "override", "plan_arms",
           "settings_of", "tell", "trial_score", "tuned_grid"]
