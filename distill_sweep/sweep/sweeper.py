"""Sweep expansion and the skip-completed sweeper.

`python -m distill_sweep ... -m` uses `SkipCompletedSweeper` (conf: hydra/sweeper=skip_completed): it
expands the grid like Hydra's basic sweeper, composes every job's config, validates them all before
launching anything (one bad job = one clear line, nothing submitted), drops jobs whose completed
record already exists, and launches the rest. With `+dry_run=true` it prints the plan and launches nothing.
With `tune.trials` > 0 it first runs each arm's tuning trials, then the grid at each arm's chosen values
(sweep/tune.py).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from distill_sweep.errors import ConfigError, DiskWriteError, NonFiniteLossError, failure_line
from distill_sweep.job.identity import find_completed, identify, identify_plain
from distill_sweep.records import files, locks
from distill_sweep.records.labels import distillation, seed_text
from distill_sweep.records.record import RECORD, completed_record, is_complete
from distill_sweep.sweep import chain, handover, tune, tune_budget
from distill_sweep.sweep import studies as studies_of
from distill_sweep.sweep.compose import JobComposer, split, sweep_composer
from distill_sweep.sweep.cost import estimate_cost, pack_cost
from distill_sweep.sweep.launch import (
    InProcessLauncherImpl,
    one_process_per_job,
    processes_per_job,
    store_builds,
)
from distill_sweep.sweep.packs import PACKS_DIR, PackFailed, plan_packs, write_pack_file
from distill_sweep.sweep.submission import unreachable_cluster
from distill_sweep.training import processes

# Hydra loads this module (through the sweeper plugin) at every start, `--help` and the command line's
# refusals included: prepare.py, which reads the models' configs (transformers, torch), is imported inside
# the sweep that uses it; a job's identity (job/identity.py) needs neither.

log = logging.getLogger("distill_sweep")
PROGRESS_EVERY_S = 5.0


def _count_by_source(chained: Sequence[Any]) -> list[tuple[Any, int]]:
    counts: dict[str, list[Any]] = {}
    for job in chained:
        counts.setdefault(job.source.digest, [job.source, 0])[1] += 1
    return [(source, n) for source, n in counts.values()]


class FinishedJobs:
    """While a sweep runs, one line per job as its record turns completed or failed (read from the store,
    so it works whichever launcher runs the jobs and wherever)."""

    def __init__(self, jobs: Sequence[Any], every_s: float = 2.0, sources: Sequence[Any] | None = None) -> None:
        self.jobs, self.every_s = list(jobs), every_s
        self.sources = list(sources) if sources is not None else [None] * len(self.jobs)  # chained: distillations
        self.reported: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> FinishedJobs:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._poll()  # the last ones, finished between two polls

    def _watch(self) -> None:
        while not self.stop.wait(self.every_s):
            self._poll()

    def _poll(self) -> None:
        for i, ident in enumerate(self.jobs):
            if i in self.reported:
                continue
            record = files.read_record(ident.out_dir / RECORD) or {}
            status = record.get("status")
            if status == "failed" or (status == "completed" and is_complete(record)):
                self.reported.add(i)
                source = self.sources[i]
                what = distillation(ident.procedure.name, ident.objective.name if ident.objective else None,
                                    ident.student_kind.name)
                if source is not None:  # a fine-tune job after a distillation: which student, which grid point
                    opt = ident.settings.optimizer
                    what = (f"finetune of the {source.objective_name} student, lr {opt.lr}, batch "
                            f"{opt.batch_size},")
                print(f"distill_sweep: [{len(self.reported)}/{len(self.jobs)}] {status}: {ident.task}/{what} "
                      f"{ident.init_label} {seed_text(ident.seed, ident.seeds)}", flush=True)


def _submission_failure(err: BaseException) -> str | None:
    """Why a launcher could not submit (the submission command's first error line), or None for any other
    error. submitit raises its FailedJobError from the failed sbatch's CalledProcessError, and a RuntimeError
    where there is no srun."""
    if isinstance(err.__cause__, subprocess.CalledProcessError) or (isinstance(err, RuntimeError) and "srun" in str(err)):
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        return lines[0] if lines else type(err).__name__
    return None


def _member_returns(ret: Any, members: int) -> list[Any]:
    """What each job of a launched process returned: the process's value for one job, a pack's list (or the
    members' returns its PackFailed holds), None where unknown (another failure)."""
    if members == 1:
        return [ret.return_value if ret.status.name == "COMPLETED" else None]
    if ret.status.name == "COMPLETED":
        return list(ret.return_value)
    failure = ret._return_value
    return list(failure.returns) if isinstance(failure, PackFailed) else [None] * members


DRY_RUN_LISTED = 20  # jobs a dry run lists (+dry_run_list=true: every one); the summary above counts them all


@dataclass
class SweepPlan:
    """What a sweep will do: the grid's jobs to run and those already completed, and the fine-tunes after."""

    total: int  # jobs in the expanded grid, duplicates included
    todo: list[list[str]] = field(default_factory=list)  # the overrides of each job to run
    configs: list[Any] = field(default_factory=list)  # their identities (prepared jobs unless a dry run)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # completed records found
    distilled: list[tuple[Any, list[str]]] = field(default_factory=list)  # every job (completed or not), for chains
    then: list[Any] = field(default_factory=list)  # the fine-tune jobs to run after (chain.ChainedJob)
    seen: set[str] = field(default_factory=set)  # config hashes already planned
    duplicates: int = 0  # jobs of the grid that are another job of it (same hash)


class SkipCompletedSweeperImpl(BasicSweeper):
    """Hydra's basic sweeper + up-front validation, skip-completed, and dry run."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        all_jobs = split(parser.parse_overrides(self._parse_config() + arguments))
        # +plan_seeds=true: the dry run, then the seeds each comparison needs from the pilot records (seed_plan)
        plan_seeds = bool(OmegaConf.select(self.config, "plan_seeds", default=False))
        dry_run = plan_seeds or bool(OmegaConf.select(self.config, "dry_run", default=False))
        loader = self.hydra_context.config_loader
        compose = self.composer = sweep_composer(loader, self.config)
        plan = self._plan_grid(all_jobs, compose, dry_run)
        tuning = self._plan_tuning(plan, compose)  # tune.trials > 0: the arms and their budget (sweep/tune.py)
        self._plan_chain(plan, compose)
        if dry_run:
            if tuning is not None:
                print(tune.dry_run_line(studies_of.study_arms(tuning[1], tuning[0]), tuning[0], self._results_dir(),
                                         plan.skipped), flush=True)
                print(tune_budget.dry_run_line(studies_of.study_arms(tuning[1], tuning[0]), tuning[0],
                                               self._results_dir()), flush=True)
            self._print_dry_run(plan, plan_seeds)
            return []
        if plan.todo or plan.then or tuning is not None:
            self._check_cluster()
        if plan.todo or plan.then:  # how long, before it runs (the dry run prints the same line)
            print(estimate_cost([*plan.configs, *(job.ident for job in plan.then)], plan.skipped), flush=True)
        initial_job_idx = self._build_stores(store_builds(plan.configs, plan.todo))
        returns: list[Any] = []
        if tuning is not None:  # the trials first; then the grid runs each arm's chosen values
            returns, initial_job_idx = self._tune(*tuning, compose, initial_job_idx)
            self._replan_tuned(plan, tuning[1], compose)
        more, initial_job_idx = self._launch_all(plan.todo, plan.configs, initial_job_idx, pack=True)
        returns += more
        if plan.then:  # the students exist now (or their distillation failed): prepare, then launch the fine-tunes
            returns += self._launch_chain(plan.then, initial_job_idx)
        self._report_failures(returns, len(plan.todo) + len(plan.then) + self.trials_run)
        return returns

    trials_run = 0  # trial jobs this sweep launched (failures are counted among all its jobs)
    composer: JobComposer | None = None  # each job's config (sweep())

    def _results_dir(self) -> Path:
        assert self.config is not None
        return files.absolute(str(self.config.results_dir))

    def _check(self) -> Callable[[DictConfig], Any]:
        from distill_sweep.job.prepare import prepare  # transformers and torch: only for a sweep that runs

        return prepare

    def _plan_tuning(self, plan: SweepPlan, compose: JobComposer) -> tuple[Any, list[Any]] | None:
        """(the tune block, the arms) when tune.trials > 0, every arm's space checked; a bad one exits 2."""
        assert self.config is not None
        try:
            settings = tune.settings_of(self.config)
            if settings is None:
                return None
            arms = tune.plan_arms(plan.distilled, compose, settings)
        except ConfigError as err:
            print(f"distill_sweep: error: {err}", file=sys.stderr)
            sys.exit(2)
        return settings, arms

    def _tune(self, settings: Any, arms: list[Any], compose: JobComposer, initial_job_idx: int
              ) -> tuple[list[Any], int]:
        """Every arm's trials, in rounds of one trial per study still short of its budget (every study of every arm,
        sweep/studies.py: launched together, so that a SLURM array runs them side by side and trials that share
        batches pack); then each arm's values chosen (its median study's at tune.studies > 1)."""
        results, check, returns = self._results_dir(), self._check(), []
        each = studies_of.study_arms(arms, settings)  # tune.studies per arm (sweep/studies.py)
        studies = {arm.key: tune.open_study(arm, settings, results) for arm in each}
        every = list(studies.values())
        budget = tune_budget.Budget(settings, results)  # in trials, or in measured cost (tune.budget_by)
        said = ""
        while True:
            pending = [p for arm in each for p in tune.next_trials(
                arm, studies[arm.key], budget.trials_for(studies[arm.key], every), settings.parallel,
                settings.trials)]
            if not pending:
                break
            idents = []
            for p in pending:
                try:
                    idents.append(check(compose(p.overrides)))
                except ConfigError as err:
                    print(f"distill_sweep: error in trial [{' '.join(p.overrides)}]: {err}", file=sys.stderr)
                    sys.exit(2)
            todo = [(p, i) for p, i in zip(pending, idents, strict=True) if find_completed(i) is None]
            line = budget.line(every) if budget.by_cost else ""
            if line != said:  # what the arms' equal cost is: before the first round, and once it is fixed
                print(line, flush=True)
                said = line
            print(tune.round_line(pending, studies, settings, len(pending) - len(todo)), flush=True)
            if todo:
                more, initial_job_idx = self._launch_all([p.overrides for p, _ in todo], [i for _, i in todo],
                                                         initial_job_idx, pack=True)
                returns += more
                self.trials_run += len(todo)
            for p, ident in zip(pending, idents, strict=True):  # a failed one (its record says why) is asked again
                tune.tell(studies[p.arm.key], p, tune.trial_score(ident, settings.metric), ident.out_dir, results,
                          tune.trial_pruned(ident))
        grouped = studies_of.by_arm(each, studies)
        for arm in arms:
            spent = [(a, study) for a, study in grouped[arm.digest] if budget.spent_for(study, every)]
            if len(spent) == len(grouped[arm.digest]):
                which = studies_of.choose_over_studies(arm, spent, results, settings)
                print(f"distill_sweep: tuned {arm.name}: trial {(arm.best_trial or 0) + 1}{which} chosen: "
                      + ", ".join(f"{k}={v}" for k, v in (arm.best or {}).items()), flush=True)
            else:  # as many trials failed as the budget: no choice, so no grid (the sweep exits 1 at its end)
                for a, study in grouped[arm.digest]:
                    if not budget.spent_for(study, every):
                        print(f"distill_sweep: {a.name}: {tune.failed_trials(study)} trials failed, "
                              f"{tune.completed(study)} of {settings.trials} completed: its grid jobs are not run",
                              file=sys.stderr)
        return returns, initial_job_idx

    def _replan_tuned(self, plan: SweepPlan, arms: list[Any], compose: JobComposer) -> None:
        """The grid's jobs are the tuned ones: each arm's seeds at its chosen values (completed ones skipped)."""
        results, check = self._results_dir(), self._check()
        plan.todo, plan.configs = [], []
        for arm in arms:
            if arm.best is None:
                continue
            for overrides in tune.tuned_grid(arm, results):
                try:
                    ident = check(compose(overrides))
                except ConfigError as err:
                    print(f"distill_sweep: error in job [{' '.join(overrides)}]: {err}", file=sys.stderr)
                    sys.exit(2)
                if find_completed(ident) is None:
                    plan.todo.append(overrides)
                    plan.configs.append(ident)
        print(f"distill_sweep: the grid at each arm's chosen values: {len(plan.todo)} job(s) to run", flush=True)

    def _plan_grid(self, all_jobs: Sequence[Sequence[str]], compose: JobComposer, dry_run: bool) -> SweepPlan:
        """Every job of the grid identified (checked against the models' configs unless a dry run, which must
        work where the hub cannot be reached), duplicates left out, completed ones found; a bad job exits 2."""
        if dry_run:  # a plan reads no model config: identify is every check it can make, without torch
            check: Callable[[dict[str, Any]], Any] = identify_plain
        else:
            # the first line within a second: importing torch and transformers below takes seconds (minutes on a
            # loaded box) before the grid's own lines
            print(f"distill_sweep: checking the grid's {len(all_jobs)} job(s) before anything runs", flush=True)
            from distill_sweep.job.prepare import (
                complete,  # transformers and torch: only for a sweep that runs
            )

            def check(composed: dict[str, Any]) -> Any:
                return complete(identify_plain(composed))  # job.prepare's `prepare`, of the plain config
        plan = SweepPlan(total=len(all_jobs))
        last_note = time.monotonic()
        # the grid's jobs are checked as the launcher will start them (several processes each on SLURM with
        # tasks_per_node or nodes > 1); the fine-tune jobs that follow run as one process each
        with processes.planned(processes_per_job(self.launcher)):
            for index, overrides in enumerate(all_jobs):
                if time.monotonic() - last_note > PROGRESS_EVERY_S:  # never a silent stretch while planning
                    print(f"distill_sweep: planning: {index}/{len(all_jobs)} jobs checked", file=sys.stderr, flush=True)
                    last_note = time.monotonic()
                composed = compose.plain(overrides)  # the config plain_config(compose(overrides)) would give
                try:
                    ident = check(composed)
                except ConfigError as err:
                    print(f"distill_sweep: error in job [{' '.join(overrides)}]: {err}", file=sys.stderr)
                    sys.exit(2)
                if ident.digest in plan.seen:  # e.g. procedure=finetune swept over objectives it ignores
                    plan.duplicates += 1
                    continue
                plan.seen.add(ident.digest)
                plan.distilled.append((ident, list(overrides)))
                record = find_completed(ident)
                if record is not None:
                    plan.skipped.append(record)
                else:
                    plan.todo.append(list(overrides))
                    plan.configs.append(ident)
        same = f" ({plan.duplicates} duplicate(s) of the same job left out)" if plan.duplicates else ""
        print(f"distill_sweep: {plan.total - plan.duplicates} jobs in the grid, {len(plan.skipped)} already "
              f"completed, {len(plan.todo)} to run{same}", flush=True)
        return plan

    def _plan_chain(self, plan: SweepPlan, compose: JobComposer) -> None:
        """The fine-tune grid after each distillation (finetune_grid): identified now, run after them."""
        try:
            kept = chain.sweeper_kept(OmegaConf.select(self.config, "hydra.sweeper.params"))
            chained = chain.plan(plan.distilled, compose, lambda ov: compose.choice(ov, "teacher"), identify, kept)
        except ConfigError as err:
            print(f"distill_sweep: error: {err}", file=sys.stderr)
            sys.exit(2)
        done = 0
        for job in chained:
            if job.ident.digest in plan.seen:
                continue
            plan.seen.add(job.ident.digest)
            if find_completed(job.ident) is not None:
                done += 1
            else:
                plan.then.append(job)
        if chained:
            sources = len({job.source.digest for job in chained})
            print(f"distill_sweep: then {done + len(plan.then)} fine-tune jobs of {sources} distilled student(s) "
                  f"(finetune_grid), {done} already completed, {len(plan.then)} to run", flush=True)

    def _print_dry_run(self, plan: SweepPlan, plan_seeds: bool) -> None:
        """The summary and the cost first; the jobs after, capped unless asked for every one."""
        assert self.config is not None
        print(estimate_cost([*plan.configs, *(job.ident for job in plan.then)], plan.skipped))
        packs = plan_packs(plan.configs, processes_per_job(self.launcher))
        if len(packs) < len(plan.configs):
            print(pack_cost(plan.configs, packs))
        every = OmegaConf.select(self.config, "dry_run_list", default=False)
        listed = plan.todo if every else plan.todo[:DRY_RUN_LISTED]
        for overrides in listed:
            print("  would run: " + " ".join(overrides))
        if len(listed) < len(plan.todo):
            print(f"  ... and {len(plan.todo) - len(listed)} more (+dry_run_list=true lists every job)")
        for source, n in _count_by_source(plan.then):
            grid = source.settings.run.finetune_grid
            print(f"  then: {n} fine-tune job(s) of the student of [{source.objective_name} {source.init_label} "
                  f"seed {source.seed}]: tasks {','.join(grid.tasks)} x lr {','.join(map(str, grid.lrs))} x "
                  f"batch {','.join(map(str, grid.batch_sizes))} x seed {','.join(map(str, grid.seeds))}")
        planned = [{"task": i.task, "procedure": i.procedure.name, "objective": i.objective_name,
                    "init": i.init_label, "seed": i.seed} for i, _ in plan.distilled]
        results = str(files.absolute(self.config.results_dir))
        if len({(j["procedure"], j["objective"]) for j in planned}) > 1 and len({j["init"] for j in planned}) > 1:
            # Table 3's claim: the interaction this grid can detect (pandas and scipy only for such a grid)
            from distill_sweep.analysis.interaction_power import power_line

            line = power_line(results, planned)
            if line:
                print(line)
        if plan_seeds:
            from distill_sweep.analysis.seed_plan import plan_text  # the pilot records: only when asked

            print(plan_text(results, planned))

    def _build_stores(self, builds: list[list[str]]) -> int:
        """One job per task first, so the grid's jobs find the teacher and its outputs ready; the next job index."""
        if not builds:
            return 0
        print(f"distill_sweep: building the teacher outputs of {len(builds)} task(s) first", flush=True)
        for ret in self._launch(builds, 0, [self._typed(overrides) for overrides in builds]):
            if ret.status.name == "FAILED":
                print("distill_sweep: a teacher-output build failed; nothing else launched", file=sys.stderr)
                _ = ret.return_value  # re-raises: Hydra reports it and exits 1
        return len(builds)

    def _typed(self, overrides: Sequence[str]) -> Any | None:
        """A job the sweeper did not plan (a build job) typed as the planned ones are; None where it is refused:
        the job then says why itself."""
        from distill_sweep.job.prepare import complete  # transformers and torch: only for a sweep that runs

        assert self.composer is not None
        try:
            return complete(identify_plain(self.composer.plain(overrides)))
        except ConfigError:
            return None

    def _launch_chain(self, then: list[Any], initial_job_idx: int) -> list[Any]:
        """The fine-tune jobs whose distillation completed, checked against the saved students, one process each."""
        from distill_sweep.job.prepare import (
            complete,  # transformers and torch: only for the sweep that uses it
        )

        ready = [job for job in then if completed_record(job.source.out_dir) is not None]
        if len(ready) < len(then):
            print(f"distill_sweep: {len(then) - len(ready)} fine-tune job(s) not launched: their distillation "
                  "did not complete", file=sys.stderr, flush=True)
        prepared = []
        for job in ready:
            try:
                prepared.append(complete(job.ident))
            except ConfigError as err:
                print(f"distill_sweep: error in job [{' '.join(job.overrides)}]: {err}", file=sys.stderr)
                sys.exit(2)
        if ready:
            print(f"distill_sweep: fine-tuning the distilled students: {len(ready)} job(s)", flush=True)
        with one_process_per_job(self.launcher):
            more, _ = self._launch_all([job.overrides for job in ready], prepared,
                                       initial_job_idx, sources=[job.source for job in ready])
        return more

    def _packs(self, todo: list[list[str]], idents: list[Any]) -> list[list[int]]:
        """The jobs to launch grouped into packs (indices into `todo`); a line when some share a process."""
        packs = plan_packs(idents, processes_per_job(self.launcher))
        if len(packs) < len(todo):
            print(f"distill_sweep: {len(todo)} jobs in {len(packs)} process(es): "
                  f"{sum(len(p) > 1 for p in packs)} pack(s) trained in lockstep (pack=auto)", flush=True)
        return packs

    def _packs_dir(self) -> Path:
        assert self.config is not None
        return files.absolute(str(self.config.hydra.sweep.dir)) / PACKS_DIR

    @staticmethod
    def _report_failures(returns: list[Any], total: int) -> None:
        """A failed job makes the sweep exit 1: one line for the failures whose one line is known (a full disk, a
        non-finite loss), else Hydra's report of the first."""
        failed = [r for batch in returns for r in batch if r.status.name == "FAILED"]
        if not failed:
            return
        # a pack's members fail alone: its process reports them together (PackFailed)
        errors = [e for r in failed
                  for e in (r._return_value.errors if isinstance(r._return_value, PackFailed) else [r._return_value])]
        summary = f"{len(errors)} of {total} jobs failed (see their result.json)"
        # (Hydra's `return_value` prints its own "Error executing job" line before it re-raises)
        first = errors[0]
        if isinstance(first, ConfigError):  # refused on its input before training: no record (run_job._take_back)
            print(f"distill_sweep: error: {len(errors)} of {total} jobs refused or failed; the first was refused: "
                  f"{failure_line(first)}", file=sys.stderr)
            sys.exit(2 if all(isinstance(e, ConfigError) for e in errors) else 1)
        if isinstance(first, (DiskWriteError, NonFiniteLossError)):  # in one line, as for one job
            print(f"distill_sweep: error: {summary}; the first: {failure_line(first)}", file=sys.stderr)
            sys.exit(1)
        print(f"distill_sweep: {summary}", file=sys.stderr)
        _ = failed[0].return_value  # re-raises the first failure: Hydra reports it and exits 1

    def _check_cluster(self) -> None:
        """A SLURM launcher whose cluster cannot be reached: one line and exit code 1 before anything is
        submitted (sbatch would print its own lines above ours)."""
        why = unreachable_cluster(self.launcher)
        if why is not None:
            print(f"distill_sweep: error: the SLURM cluster cannot be reached: {why}; nothing was submitted: check "
                  "that this host reaches the cluster (sinfo), or run here with hydra/launcher=local", file=sys.stderr)
            sys.exit(1)

    def _launch(self, batch: Sequence[Sequence[str]], initial_job_idx: int, typed: Sequence[Any]) -> Any:
        """The launcher's launch; a launcher that cannot submit (SLURM's sbatch failing: no controller to reach)
        is one line and exit code 1, not the submission tool's traceback. The in-process launcher runs each job
        from the config and the typed job (`typed`, a pack's: a list) the sweeper made (sweep/handover.py)."""
        try:
            if not isinstance(self.launcher, InProcessLauncherImpl):
                return self.launcher.launch(batch, initial_job_idx=initial_job_idx)
            composer, master = self.composer, self.config
            assert composer is not None and master is not None
            with handover.handed_over(batch, initial_job_idx, lambda ov: composer.launch_config(ov, master), typed):
                return self.launcher.launch(batch, initial_job_idx=initial_job_idx)
        except Exception as err:
            why = _submission_failure(err)
            if why is None:
                raise
            before = f"{initial_job_idx} job(s) submitted before it, " if initial_job_idx else ""
            print(f"distill_sweep: error: the launcher could not submit the jobs: {why}; {before}nothing of this batch "
                  "was submitted: check that this host reaches the cluster (sinfo), or run here with "
                  "hydra/launcher=local", file=sys.stderr)
            sys.exit(1)

    def _launch_all(self, todo: list[list[str]], idents: list[Any], initial_job_idx: int,
                    sources: list[Any] | None = None, pack: bool = False) -> tuple[list[Any], int]:
        """Launch `todo` in batches of max_batch_size; (the launchers' returns per batch, the next job index).
        With `pack`, the jobs that can share batches are launched as packs, one process each (sweep/packs.py).

        A job that another process was running (its lock was held: job_lock) returns without running; once the
        batches are done the sweep waits for those jobs' locks, and launches again any that their holder ended
        without completing: the command ends with every job of its grid run, here or elsewhere, never by two
        processes at once."""

        returns = []
        with FinishedJobs(idents, sources=sources):  # launchers that run jobs elsewhere (local_parallel, slurm) say nothing
            while todo:
                units = self._packs(todo, idents) if pack else [[i] for i in range(len(todo))]
                launch = [todo[unit[0]] if len(unit) == 1 else
                          [*todo[unit[0]], f"+pack_file='{write_pack_file(self._packs_dir(), [idents[i] for i in unit])}'"]
                          for unit in units]
                typed = [idents[unit[0]] if len(unit) == 1 else [idents[i] for i in unit] for unit in units]
                self.overrides = list(self.split_overrides_to_chunks(launch, self.max_batch_size))
                self.batch_index = 0
                launched = []
                while not self.is_done():
                    batch = self.get_job_batch()
                    job_returns = self._launch(batch, initial_job_idx, typed[len(launched):len(launched) + len(batch)])
                    # Unlike Hydra's basic sweeper, a failed job does not stop the following batches: its record
                    # says "failed"; the sweep exits 1 at the end if any job failed.
                    returns.append(job_returns)
                    launched += job_returns
                    initial_job_idx += len(batch)
                elsewhere = [i for unit, ret in zip(units, launched, strict=True)
                             for i, value in zip(unit, _member_returns(ret, len(unit)), strict=True)
                             if value == locks.LEFT_TO_HOLDER]
                if not elsewhere:
                    break
                print(f"distill_sweep: {len(elsewhere)} job(s) of this grid are run by another process: waiting "
                      "for them", flush=True)
                for i in elsewhere:
                    locks.wait_for(idents[i].out_dir)
                # one its holder ended without completing (killed, or failed there) runs here, as it would in a
                # sweep started after that process: resumed from its checkpoint, or again after a failure
                again = [i for i in elsewhere if find_completed(idents[i]) is None]
                if again:
                    print(f"distill_sweep: {len(again)} of them ended there without completing: running them here",
                          flush=True)
                todo, idents = [todo[i] for i in again], [idents[i] for i in again]
        return returns, initial_job_idx
