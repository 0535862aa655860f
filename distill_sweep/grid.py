"""Sweep expansion and the skip-completed sweeper.

`python -m distill_sweep ... -m` uses `SkipCompletedSweeper` (conf: hydra/sweeper=skip_completed): it
expands the grid like Hydra's basic sweeper, composes every job's config, validates them all before
launching anything (one bad job = one clear line, nothing submitted), drops jobs whose completed
record already exists, and launches the rest. With `+dry_run=true` it prints the plan and launches nothing.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict

from distill_sweep import chain, job_lock, processes, results
from distill_sweep.augment_settings import samples_for
from distill_sweep.config_space import CONF_DIR, GROUPS, group_options
from distill_sweep.errors import ConfigError, DiskWriteError
from distill_sweep.inits import init_spec
from distill_sweep.job import find_completed, identify
from distill_sweep.outputs_plan import feature_tag, group_id, plan, prepared, stored_cls_layers
from distill_sweep.teacher_cache import META, finetune_settings

# Hydra loads this module (through the sweeper plugin) at every start, `--help` and the command line's
# refusals included: prepare.py, which reads the models' configs (transformers, torch), is imported inside
# the sweep that uses it; a job's identity (job.py) needs neither.

log = logging.getLogger("distill_sweep")
PROGRESS_EVERY_S = 5.0
# The paper's cost of one task-agnostic student: 58 A100-hours for 100k updates of 1024 x 128 tokens
# (BERT-base teacher, 6-layer student): the dry run's anchor for corpus jobs with a step budget.
PAPER_A100_HOURS, PAPER_TOKENS = 58.0, 100_000 * 1024 * 128


def job_identity(cfg: DictConfig) -> dict[str, Any]:
    """Who a job is and where its record lives, without loading anything (works offline)."""
    ident = identify(cfg)
    return {"task": ident.task, "procedure": ident.procedure.name, "objective": ident.objective_name,
            "init_spec": init_spec(cfg.init), "seed": ident.seed, "config_hash": ident.digest, "dir": ident.out_dir}


def expand(params: Sequence[str]) -> list[list[str]]:
    """Hydra override strings (with sweeps like `seed=1,2`) -> one override list per job."""
    overrides = OverridesParser.create().parse_overrides(list(params))
    return BasicSweeper.split_arguments(overrides, None)[0]


def expected_jobs(preset: str, extra_overrides: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The jobs of an experiment preset's grid, for the report: task, procedure, objective, init_spec, seed,
    and `hashes`, the names of the result directories the job's record can be in (today's and the first
    schema's), so that jobs differing only in teacher, student or layer map are told apart."""
    known = group_options("experiment")
    if preset not in known:
        raise ConfigError(f"unknown experiment preset {preset!r} (known: {', '.join(known)})")
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        base = [f"experiment={preset}", *extra_overrides]
        cfg = compose("config", overrides=base, return_hydra_config=True)
        params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.params or {}).items()]
        composer = JobComposer(lambda groups: compose("config", overrides=list(groups), return_hydra_config=True))
        idents, seen = [], set()
        for job in expand(params):
            ident = identify(composer([*base, *job]))
            if ident.digest in seen:  # e.g. procedure=finetune swept over objectives it ignores
                continue
            seen.add(ident.digest)
            idents.append((ident, [*base, *job]))
        # then the fine-tune grid on each distilled student (finetune_grid)
        chained = chain.plan(idents, composer, lambda ov: composer.choice(ov, "teacher"), identify)
        idents += [(job.ident, job.overrides) for job in chained]
    return [{"task": ident.task, "procedure": ident.procedure.name, "objective": ident.objective_name,
             "init_spec": init_spec(ident.settings.run.init), "seed": ident.seed,
             "hashes": [ident.out_dir.name, *(d.name for d in ident.legacy_dirs)]} for ident, _ in idents]


def _passes(size: int, epochs: int, batch_size: int, max_steps: int | None) -> int:
    """Training sample-passes of `epochs` epochs over `size` examples, capped at `max_steps` per epoch."""
    per_epoch = min(size, max_steps * batch_size) if max_steps else size
    return per_epoch * epochs


def estimate_cost(jobs: list[Any], done_records: list[dict[str, Any]], cache_dir: Path | None = None) -> str:
    """Training work in sample-passes (students, and the teachers still to fine-tune), and hours at the
    throughput of records already completed. `jobs` are job identities (distill_sweep.job.identify)."""
    student = teacher = 0
    teachers: set[Path] = set()
    unsized = 0  # jobs whose data size is not known before they read it (a corpus without a step budget)
    corpus_jobs, corpus_tokens = 0, 0
    decoder_jobs, decoder_tokens = 0, 0  # causal-LM students (their teachers' own training is not counted)
    forwards = {"store": 0, "live": 0}  # frozen-teacher forward sample-passes with and without the store
    builds: dict[tuple[str, str], int] = {}  # stores to build: rows each
    for ident in jobs:
        s = ident.settings
        if not ident.procedure_settings.reads_task:
            steps = getattr(ident.procedure_settings, "max_steps", None)
            epochs = min(s.run.epochs or math.inf, getattr(ident.procedure_settings, "epochs", None) or math.inf)
            if s.run.max_steps_per_epoch and epochs < math.inf:  # the smoke-run caps bound it
                steps = min(steps or math.inf, epochs * s.run.max_steps_per_epoch)
            if steps is None:
                unsized += 1
                continue
            tokens = int(steps) * ident.procedure_settings.sequences_per_step() * s.task.max_seq_length
            if ident.procedure_settings.decoders:
                decoder_jobs, decoder_tokens = decoder_jobs + 1, decoder_tokens + tokens
            else:
                corpus_jobs, corpus_tokens = corpus_jobs + 1, corpus_tokens + tokens
            continue
        size = s.task.max_train_samples or s.task.train_size or s.task.recipe.num_train or 0
        size = min(size, s.task.train_size or size)
        if s.task.augment.name != "none":  # counted at its largest: every sample of every field new
            size *= 1 + len(s.task.text_fields) * samples_for(s.task.augment, s.task.name)
        batch = s.optimizer.batch_size or s.task.recipe.batch_size
        n_stages = len(ident.objective.stages) if ident.objective is not None else 1
        epochs = s.run.epochs or s.task.recipe.epochs
        student += _passes(size, epochs, batch, s.run.max_steps_per_epoch) * n_stages
        if ident.objective is not None:  # every stage of a distilling job runs the teacher, unless stored
            logit_stages = sum(k in ("prediction", "combined") for k in ident.objective.stages)
            forwards["live"] += _passes(size, epochs, batch, s.run.max_steps_per_epoch) * n_stages
            uses = plan(s.run.teacher_outputs, ident.procedure, ident.objective).use_store
            only_logits = n_stages - (logit_stages if uses else 0)  # stages that still run it (intermediate)
            forwards["store"] += _passes(size, epochs, batch, s.run.max_steps_per_epoch) * only_logits
            cache = Path(cache_dir or results.absolute(s.run.cache_dir))
            if uses and not prepared(ident.teacher, ident.task, cache):
                builds[(ident.task, group_id(ident.teacher))] = size
        # a stage before the objective's, e.g. PEA-KD's PTP
        student += _passes(size, ident.procedure_settings.pre_stage_epochs(epochs), batch, s.run.max_steps_per_epoch)
        if s.teacher.finetuned_path or (ident.objective is None and not ident.student_kind.needs_teacher_weights):
            continue
        where = ident.teacher.directory(Path(cache_dir or results.absolute(s.run.cache_dir)), ident.task)
        if where in teachers or (where / META).exists():
            continue
        teachers.add(where)
        ft = finetune_settings(s.teacher.finetune, s.task.recipe)
        teacher += _passes(size, ft["epochs"], ft["batch_size"], ft["max_steps_per_epoch"])
    passes = student + teacher
    line = (f"estimated cost: {passes:.3g} training sample-passes ({student:.3g} students, {teacher:.3g} for "
            f"{len(teachers)} teacher(s) to fine-tune)")
    speeds = [r["samples_per_s"] for r in done_records if r.get("samples_per_s")]
    if speeds:
        speed = sorted(speeds)[len(speeds) // 2]
        line += f", ~{passes / speed / 3600:.2f} job-hours at the median {speed:.0f} samples/s of completed jobs"
    else:
        line += " (no completed record yet to convert it to hours)"
    if forwards["live"]:
        built = sum(builds.values())
        line += (f"; frozen-teacher forwards: {forwards['store'] + built:.3g} sample-passes with the teacher-output "
                 f"store ({len(builds)} store(s) to build, {built:.3g} rows), {forwards['live']:.3g} without")
    if corpus_jobs:
        line += (f"; {corpus_jobs} task-agnostic job(s): {corpus_tokens:.3g} training tokens, ~"
                 f"{PAPER_A100_HOURS * corpus_tokens / PAPER_TOKENS:.3g} A100-hours at the paper's 58 per "
                 "student of 100k x 1024 x 128 tokens (BERT-base -> 6 layers; other sizes scale with their FLOPs)")
    if decoder_jobs:
        line += (f"; {decoder_jobs} decoder job(s): {decoder_tokens:.3g} student training tokens (the teachers' "
                 "own training not counted)")
    if unsized:
        line += (f"; {unsized} job(s) on a corpus by epochs not counted (its size is known once it is read; "
                 "procedure.max_steps gives a count)")
    return line


def store_builds(jobs: Sequence[Any], overrides: Sequence[Sequence[str]], cache_dir: Path | None = None
                 ) -> list[list[str]]:
    """The sweeper's build jobs: for each teacher-output store that two or more of `jobs` (identities, with
    their `overrides`) will read and that is not built yet, the first such job's overrides run with
    `prepare_only`: one job fine-tunes the teacher and builds the store while the others are not yet holding
    a GPU each, waiting on its lock."""
    groups: dict[tuple[str, str, str], list[list[str]]] = {}
    for ident, ov in zip(jobs, overrides, strict=True):
        if not plan(ident.settings.run.teacher_outputs, ident.procedure, ident.objective).use_store:
            continue
        where = Path(cache_dir or results.absolute(ident.settings.run.cache_dir))
        cls_layers = stored_cls_layers(ident.objective, getattr(ident, "layer_map", None))
        if prepared(ident.teacher, ident.task, where, cls_layers):
            continue
        groups.setdefault((ident.task, group_id(ident.teacher), feature_tag(cls_layers)), []).append(list(ov))
    return [[*members[0], "+prepare_only=true"] for members in groups.values() if len(members) > 1]


# SLURM launcher keys that start several processes per job: a data-parallel distillation sets them, and the
# fine-tune jobs that follow it run in one process each (their procedure refuses several)
PER_JOB_PROCESSES = ("nodes", "tasks_per_node", "gpus_per_node", "gpus_per_task")


def processes_per_job(launcher: Any) -> int:
    """How many processes a launcher starts for each job: nodes x tasks_per_node (submitit), else 1."""
    params = getattr(launcher, "params", None)
    if not isinstance(params, dict):
        return 1
    return int(params.get("nodes") or 1) * int(params.get("tasks_per_node") or 1)


@contextlib.contextmanager
def one_process_per_job(launcher: Any) -> Iterator[None]:
    """While the block runs, a submitit launcher's jobs get one node, one task and at most one GPU."""
    params = getattr(launcher, "params", None)
    if not isinstance(params, dict):  # the local launchers start one process per job anyway
        yield
        return
    saved = {k: params[k] for k in PER_JOB_PROCESSES if k in params}
    changed = {k: 1 for k, v in saved.items() if isinstance(v, int) and v > 1}
    if changed:
        print("distill_sweep: the fine-tune jobs run as one process each ("
              + ", ".join(f"hydra.launcher.{k}=1" for k in changed) + ")", flush=True)
    params.update(changed)
    try:
        yield
    finally:
        params.update(saved)


def _count_by_source(chained: Sequence[Any]) -> list[tuple[Any, int]]:
    counts: dict[str, list[Any]] = {}
    for job in chained:
        counts.setdefault(job.source.digest, [job.source, 0])[1] += 1
    return [(source, n) for source, n in counts.values()]


class JobComposer:
    """Each job's config, composing once per distinct set of config-group choices.

    Composing through Hydra is the slow part of planning a large grid (Table 3: 504 jobs), and only group
    choices (task=, objective=, ...) change what is composed; value overrides (seed=, init=,
    objective.alpha=) are applied after composition, which is Hydra's own order, so applying them to a
    copy of the composed config gives the same config (without the `hydra` node).
    """

    def __init__(self, load: Callable[[Sequence[str]], DictConfig]) -> None:
        self.load = load
        self.parser = OverridesParser.create()
        self.cache: dict[tuple[str, ...], DictConfig] = {}
        self.choices: dict[tuple[str, ...], dict[str, Any]] = {}  # the config-group options each one chose

    def _composed(self, parsed: Sequence[Any]) -> tuple[str, ...]:
        """The key of the composed config of these parsed overrides' group choices (composed on first use)."""
        groups = tuple(o.input_line for o in parsed if _is_group(o.key_or_group))
        if groups not in self.cache:
            composed = self.load(groups)
            with open_dict(composed):
                hydra = composed.pop("hydra", None)  # jobs are identified without it; it is most of a copy's cost
            choices = OmegaConf.select(hydra, "runtime.choices") if hydra is not None else None
            self.choices[groups] = OmegaConf.to_container(choices) if choices is not None else {}
            self.cache[groups] = composed
        return groups

    def choice(self, overrides: Sequence[str], group: str) -> str:
        """The option of config group `group` a job's config chose (on the command line or in a preset)."""
        return str(self.choices[self._composed(self.parser.parse_overrides(list(overrides)))].get(group))

    def __call__(self, overrides: Sequence[str]) -> DictConfig:
        parsed = self.parser.parse_overrides(list(overrides))
        groups = self._composed(parsed)
        cfg = copy.deepcopy(self.cache[groups])
        with open_dict(cfg):
            for o in parsed:
                if _is_group(o.key_or_group):
                    continue
                if o.is_delete():
                    _delete(cfg, o.key_or_group)
                else:
                    OmegaConf.update(cfg, o.key_or_group, o.value(), merge=False, force_add=True)
        return cfg


def _is_group(key: str) -> bool:
    return "/" in key or key in GROUPS


def _delete(cfg: DictConfig, key: str) -> None:
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    if node is not None and leaf in node:
        del node[leaf]


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
            record = results.read_record(ident.out_dir / results.RECORD) or {}
            status = record.get("status")
            if status == "failed" or (status == "completed" and results.is_complete(record)):
                self.reported.add(i)
                what = ident.objective_name if ident.objective is not None else ident.procedure.name
                source = self.sources[i]
                if source is not None:  # a fine-tune job after a distillation: which student, which grid point
                    opt = ident.settings.optimizer
                    what += f" of the {source.objective_name} student, lr {opt.lr}, batch {opt.batch_size},"
                print(f"distill_sweep: [{len(self.reported)}/{len(self.jobs)}] {status}: {ident.task}/{what} "
                      f"{ident.init_label} seed {ident.seed}", flush=True)


class SkipCompletedSweeperImpl(BasicSweeper):
    """Hydra's basic sweeper + up-front validation, skip-completed, and dry run."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)

    def sweep(self, arguments: list[str]) -> Any:
        from distill_sweep.prepare import complete, prepare

        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        all_jobs = self.split_arguments(parser.parse_overrides(self._parse_config() + arguments), None)[0]
        # +plan_seeds=true: the dry run, then the seeds each comparison needs from the pilot records (seed_plan)
        plan_seeds = bool(OmegaConf.select(self.config, "plan_seeds", default=False))
        dry_run = plan_seeds or bool(OmegaConf.select(self.config, "dry_run", default=False))
        loader = self.hydra_context.config_loader

        compose = JobComposer(lambda ov: loader.load_sweep_config(self.config, list(ov)))
        # the grid's jobs are checked as the launcher will start them (several processes each on SLURM with
        # tasks_per_node or nodes > 1); the fine-tune jobs that follow run as one process each
        with processes.planned(processes_per_job(self.launcher)):
            todo, skipped, configs, seen = [], [], [], set()
            distilled: list[tuple[Any, list[str]]] = []  # every job of the grid (completed or not), for its chain
            duplicates = 0
            last_note = time.monotonic()
            for index, overrides in enumerate(all_jobs):
                if time.monotonic() - last_note > PROGRESS_EVERY_S:  # never a silent stretch while planning
                    print(f"distill_sweep: planning: {index}/{len(all_jobs)} jobs checked", file=sys.stderr, flush=True)
                    last_note = time.monotonic()
                cfg = compose(overrides)
                try:
                    # the dry run reads no model config: it must work where the hub cannot be reached
                    ident = identify(cfg) if dry_run else prepare(cfg)
                except ConfigError as err:
                    print(f"distill_sweep: error in job [{' '.join(overrides)}]: {err}", file=sys.stderr)
                    sys.exit(2)
                if ident.digest in seen:  # e.g. procedure=finetune swept over objectives it ignores
                    duplicates += 1
                    continue
                seen.add(ident.digest)
                distilled.append((ident, list(overrides)))
                record = find_completed(ident)
                if record is not None:
                    skipped.append(record)
                else:
                    todo.append(overrides)
                    configs.append(ident)

        same = f" ({duplicates} duplicate(s) of the same job left out)" if duplicates else ""
        print(f"distill_sweep: {len(all_jobs) - duplicates} jobs in the grid, {len(skipped)} already completed, "
              f"{len(todo)} to run{same}", flush=True)
        try:  # the fine-tune grid after each distillation (finetune_grid): identified now, run after them
            chained = chain.plan(distilled, compose, lambda ov: compose.choice(ov, "teacher"), identify)
        except ConfigError as err:
            print(f"distill_sweep: error: {err}", file=sys.stderr)
            sys.exit(2)
        then, then_done = [], 0
        for job in chained:
            if job.ident.digest in seen:
                continue
            seen.add(job.ident.digest)
            if find_completed(job.ident) is not None:
                then_done += 1
            else:
                then.append(job)
        if chained:
            sources = len({job.source.digest for job in chained})
            print(f"distill_sweep: then {then_done + len(then)} fine-tune jobs of {sources} distilled student(s) "
                  f"(finetune_grid), {then_done} already completed, {len(then)} to run", flush=True)
        builds = store_builds(configs, todo)
        if dry_run:
            for overrides in todo:
                print("  would run: " + " ".join(overrides))
            for source, n in _count_by_source(then):
                grid = source.settings.run.finetune_grid
                print(f"  then: {n} fine-tune job(s) of the student of [{source.objective_name} {source.init_label} "
                      f"seed {source.seed}]: tasks {','.join(grid.tasks)} x lr {','.join(map(str, grid.lrs))} x "
                      f"batch {','.join(map(str, grid.batch_sizes))} x seed {','.join(map(str, grid.seeds))}")
            print(estimate_cost([*configs, *(job.ident for job in then)], skipped))
            if plan_seeds:
                from distill_sweep.seed_plan import plan_text

                planned = [{"task": i.task, "procedure": i.procedure.name, "objective": i.objective_name,
                            "init": i.init_label, "seed": i.seed} for i, _ in distilled]
                print(plan_text(self.config.results_dir, planned))
            return []

        initial_job_idx = 0
        if builds:  # one job per task first: the grid's jobs then find the teacher and its outputs ready
            print(f"distill_sweep: building the teacher outputs of {len(builds)} task(s) first", flush=True)
            build_returns = self.launcher.launch(builds, initial_job_idx=initial_job_idx)
            initial_job_idx += len(builds)
            for ret in build_returns:
                if ret.status.name == "FAILED":
                    print("distill_sweep: a teacher-output build failed; nothing else launched", file=sys.stderr)
                    _ = ret.return_value  # re-raises: Hydra reports it and exits 1
        returns, initial_job_idx = self._launch_all(todo, configs, initial_job_idx)
        if then:  # the students exist now (or their distillation failed): prepare, then launch the fine-tunes
            ready = [job for job in then if results.completed_record(job.source.out_dir) is not None]
            if len(ready) < len(then):
                print(f"distill_sweep: {len(then) - len(ready)} fine-tune job(s) not launched: their distillation "
                      "did not complete", file=sys.stderr, flush=True)
            for job in ready:
                try:
                    complete(job.ident)
                except ConfigError as err:
                    print(f"distill_sweep: error in job [{' '.join(job.overrides)}]: {err}", file=sys.stderr)
                    sys.exit(2)
            if ready:
                print(f"distill_sweep: fine-tuning the distilled students: {len(ready)} job(s)", flush=True)
            with one_process_per_job(self.launcher):
                more, _ = self._launch_all([job.overrides for job in ready], [job.ident for job in ready],
                                           initial_job_idx, sources=[job.source for job in ready])
            returns += more
        failed = [r for batch in returns for r in batch if r.status.name == "FAILED"]
        if failed:
            summary = f"{len(failed)} of {len(todo) + len(then)} jobs failed (see their result.json)"
            # (Hydra's `return_value` prints its own "Error executing job" line before it re-raises)
            first = failed[0]._return_value
            if isinstance(first, DiskWriteError):  # a full disk: the file, in one line (as for one job)
                print(f"distill_sweep: error: {summary}; the first: {first}", file=sys.stderr)
                sys.exit(1)
            print(f"distill_sweep: {summary}", file=sys.stderr)
            _ = failed[0].return_value  # re-raises the first failure: Hydra reports it and exits 1
        return returns

    def _launch_all(self, todo: list[list[str]], idents: list[Any], initial_job_idx: int,
                    sources: list[Any] | None = None) -> tuple[list[Any], int]:
        """Launch `todo` in batches of max_batch_size; (the launchers' returns per batch, the next job index).

        A job that another process was running (its lock was held: job_lock) returns without running; once the
        batches are done the sweep waits for those jobs' locks, and launches again any that their holder ended
        without completing: the command ends with every job of its grid run, here or elsewhere, never by two
        processes at once."""

        returns = []
        with FinishedJobs(idents, sources=sources):  # launchers that run jobs elsewhere (local_parallel, slurm) say nothing
            while todo:
                self.overrides = list(self.split_overrides_to_chunks(todo, self.max_batch_size))
                self.batch_index = 0
                launched = []
                while not self.is_done():
                    batch = self.get_job_batch()
                    job_returns = self.launcher.launch(batch, initial_job_idx=initial_job_idx)
                    # Unlike Hydra's basic sweeper, a failed job does not stop the following batches: its record
                    # says "failed"; the sweep exits 1 at the end if any job failed.
                    returns.append(job_returns)
                    launched += job_returns
                    initial_job_idx += len(batch)
                elsewhere = [i for i, ret in enumerate(launched)
                             if ret.status.name == "COMPLETED" and ret.return_value == job_lock.LEFT_TO_HOLDER]
                if not elsewhere:
                    break
                print(f"distill_sweep: {len(elsewhere)} job(s) of this grid are run by another process: waiting "
                      "for them", flush=True)
                for i in elsewhere:
                    job_lock.wait_for(idents[i].out_dir)
                # one its holder ended without completing (killed, or failed there) runs here, as it would in a
                # sweep started after that process: resumed from its checkpoint, or again after a failure
                again = [i for i in elsewhere if find_completed(idents[i]) is None]
                if again:
                    print(f"distill_sweep: {len(again)} of them ended there without completing: running them here",
                          flush=True)
                todo, idents = [todo[i] for i in again], [idents[i] for i in again]
        return returns, initial_job_idx
