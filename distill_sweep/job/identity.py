"""A job's identity, decided from the config alone, before torch or any data or model is loaded.

This is where the composed config ends: `identify` types it in one pass (job/config.py's `parse_job`), applies
the rules between the parts and derives the keys of the shared stores (teacher_keys.py) and the config hash
(hashed.py) from the typed settings; every module below receives typed settings only. The config as composed
(`JobConfig.composed`) is read here only to tell which settings the user chose (`_ignored`).

`identify` reads the config alone (typed settings with every part's own settings, the rules between the
parts, config hash, result directory): the command line calls it before the training code is imported, so a
config error is refused in well under a second; the sweeper calls it for every job of a grid, also in a dry
run. prepare.py adds what needs the models' configs. Each raises `ConfigError` with one line.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from omegaconf import DictConfig

from distill_sweep.config.schema import ConfigSettings
from distill_sweep.config.seeds import JobSeeds, job_seeds
from distill_sweep.config.space import default_choices, option_defaults
from distill_sweep.data.task_files import check_files
from distill_sweep.errors import ConfigError
from distill_sweep.job.config import JobConfig, parse_plain
from distill_sweep.job.hashed import hashed_config, map_is_init, samples
from distill_sweep.job.plain_config import plain_config
from distill_sweep.job.stated_config import DEPTH_KEYS, stated_int, stated_teacher_config
from distill_sweep.job.teacher_keys import teacher_specs
from distill_sweep.models.inits import StudentInit, init_dirname, init_spec, resolve_init, skip_layers
from distill_sweep.models.layer_map import map_spec, resolve_map
from distill_sweep.models.model_info import check_positions
from distill_sweep.objectives import ObjectiveSettings
from distill_sweep.procedures import PROCEDURES, Procedure
from distill_sweep.records import files, hashing
from distill_sweep.records.legacy import legacy_hashes
from distill_sweep.records.record import completed_record
from distill_sweep.students import StudentType
from distill_sweep.teachers.cache import TeacherSpec
from distill_sweep.teachers.engine import HF, unused_reason
from distill_sweep.teachers.output_plan import plan
from distill_sweep.training.processes import requested_size

DEFAULT_INIT = 1  # conf/config.yaml's `init`; students not copied from teacher layers must leave it so


@dataclass(frozen=True)
class JobIdentity:
    """Who a job is and where its record lives (config alone): its typed config and what is derived from it."""

    config: JobConfig  # every group's typed settings (job/config.py)
    init_label: str  # directory part: init spec for truncated students, else the student type
    digest: str
    out_dir: Path
    legacy_dirs: list[Path]  # where records of the first schema for this same job would be
    teacher: TeacherSpec  # the teacher block (an ensemble: the whole block) and its cache key
    members: list[TeacherSpec]  # an ensemble's members, each as that single teacher ([] for one teacher)
    # settings the user chose (not the defaults) that this job's procedure does not read: a job on its own
    # is refused (cli/run_job.run_job); in a sweep's cross product such jobs are one job, run once (sweep/sweeper.py)
    ignored: list[str]

    # the typed config's parts, read where the job is used
    @property
    def settings(self) -> ConfigSettings:
        return self.config.settings

    @property
    def procedure(self) -> Procedure:
        return self.config.procedure

    @property
    def procedure_settings(self) -> Any:  # the procedure's settings dataclass
        return self.config.procedure_settings

    @property
    def student_kind(self) -> StudentType:
        return self.config.student_kind

    @property
    def student(self) -> Any:  # the student's settings dataclass
        return self.config.student

    @property
    def objective(self) -> ObjectiveSettings | None:  # None for procedures that do not distil
        return self.config.objective

    @property
    def composed(self) -> Mapping[str, Any]:  # the config as composed (job/config.py): the record keeps it
        return self.config.composed

    @property
    def objective_name(self) -> str:
        return self.objective.name if self.objective is not None else "none"

    @property
    def task(self) -> str:
        return self.settings.task.name

    @property
    def seed(self) -> int:
        return self.settings.run.seed

    @property
    def seeds(self) -> JobSeeds:
        """The seed of each source of variance (config/seeds.py)."""
        return job_seeds(self.settings.run.seed, self.settings.run.seeds)

    def check_used(self) -> None:
        """Refuse a job on its own that sets something its procedure would ignore (ConfigError, one line)."""
        run = self.settings.run
        if run.tune.trials > 0 and run.tune_trial is None and run.tune_chosen is None:
            raise ConfigError(f"tune.trials={run.tune.trials} tunes the arms of a sweep: run it with -m (a job on its "
                              "own runs no trials)")
        if self.ignored:
            raise ConfigError(f"{self.ignored[0].replace(' (', ' is ignored: ', 1).rstrip(')')}; leave it out (or at "
                              "its default) or choose a procedure that uses it")


def identify(cfg: DictConfig) -> JobIdentity:
    return identify_plain(plain_config(cfg))


def identify_plain(composed: dict[str, Any]) -> JobIdentity:
    """`identify` of a config already made plain (job.plain_config's form); every check is the same."""
    job = parse_plain(composed)
    settings, procedure, procedure_settings = job.settings, job.procedure, job.procedure_settings
    kind, student, objective = job.student_kind, job.student, job.objective
    teacher, members = teacher_specs(job)
    init = settings.run.init
    if procedure.uses_student and not kind.uses_init and init_spec(init) != str(DEFAULT_INIT):
        hint = " (choose its layer map with map=)" if kind.has_layers else ""
        raise ConfigError(f"init={init_spec(init)} applies to student=truncated only: student={kind.name} is "
                          f"not initialised from teacher layers{hint}")
    processes = requested_size()
    if processes > 1 and not procedure.shards:
        several = ", ".join(sorted(p.name for p in PROCEDURES.values() if p.shards))
        raise ConfigError(f"procedure={procedure.name} runs in one process; {processes} would be started per job "
                          f"(several processes run procedure={several}; for a sweep, the launcher's nodes x "
                          "tasks_per_node)")
    if processes <= 1 and settings.run.fsdp.teacher != "replicate":  # (what a sharded job does with its teacher)
        raise ConfigError(f"fsdp.teacher={settings.run.fsdp.teacher} shards the teacher over several processes, and "
                          "this job runs in one: start it with torchrun --nproc_per_node=N (or a launcher's "
                          "tasks_per_node), or leave fsdp.teacher out")
    batch = settings.optimizer.batch_size or settings.task.recipe.batch_size
    if processes > 1 and procedure.shards and procedure_settings.reads_task and batch % processes:
        raise ConfigError(f"optimizer.batch_size={batch} is not a multiple of the {processes} processes (each takes "
                          "an equal slice of every batch)")
    if procedure.uses_student and kind.procedures is not None and procedure.name not in kind.procedures:
        raise ConfigError(f"student={kind.name} runs under procedure={' or '.join(kind.procedures)} only, "
                          f"not procedure={procedure.name}")
    own_tokenizer = getattr(student, "tokenizer", None)
    if own_tokenizer is not None and not procedure_settings.decoders:
        raise ConfigError(f"student.tokenizer={own_tokenizer} gives a decoder LM's student its own vocabulary "
                          f"(procedure=causal_lm); procedure={procedure.name} feeds the student the teacher's tokens "
                          "and would ignore it: leave student.tokenizer null")
    if procedure.uses_student and not kind.has_layers and objective is not None and objective.terms:
        raise ConfigError(f"objective={objective.name} has intermediate-layer terms ({', '.join(objective.terms)}): "
                          f"student={kind.name} has no transformer layers to map them to; use an objective with a "
                          "prediction stage only (vanilla_kd, logit_mse)")
    if not procedure.uses_student:
        init_label = "init-none"
    else:
        init_label = init_dirname(init) if kind.uses_init else f"init-{kind.name}"
    if settings.run.teacher_outputs == "store":
        decision = plan("store", procedure, objective)
        if not decision.use_store:
            raise ConfigError(f"teacher_outputs=store: {decision.reason}, so stored teacher outputs would be "
                              "wrong or unused; use teacher_outputs=auto (the store where exact) or live")
    hashed = hashed_config(job)
    digest = hashing.digest(hashed)
    base = Path(files.absolute(settings.run.results_dir))
    part = objective.name if objective is not None else procedure.name
    out_dir = hashing.job_dir(base, settings.task.name, part, init_label, settings.run.seed, digest)
    legacy = [hashing.job_dir(base, settings.task.name, part, init_label, settings.run.seed, h)
              for h in legacy_hashes(hashed, procedure=procedure.name, student=kind.name,
                                     student_layers=getattr(student, "num_layers", None), objective=objective,
                                     map_is_init=map_is_init(hashed))]
    ident = JobIdentity(job, init_label, digest, out_dir, legacy, teacher, members,
                        _ignored(job.composed, procedure, procedure_settings))
    _check_stated_shapes(ident)
    return ident


def layer_plan(ident: JobIdentity, depth: int, k: int) -> tuple[StudentInit, list[tuple[int, int]]]:
    """The student's init and layer map, for a teacher of `depth` layers and a student of `k` (ConfigError)."""
    if ident.student_kind.uses_init:
        init = resolve_init(ident.settings.run.init, depth, k)
        if init.name == "prune" and not ident.procedure_settings.prunes_layers:
            raise ConfigError(f"init=prune chooses decoder layers by block importance when the job runs: "
                              f"procedure=causal_lm only, not procedure={ident.procedure.name}")
    else:  # copied from no teacher layer: learns from the skip layers (the paper's rule for random init)
        pairs = list(zip(range(1, k + 1), skip_layers(depth, k))) if k <= depth else []
        init = StudentInit(ident.student_kind.name, ident.student_kind.name, [], pairs)
    spec = ident.settings.run.map
    if map_spec(spec) == "init" and getattr(ident.procedure_settings, "map", None) is not None:
        spec = ident.procedure_settings.map  # the procedure's own default map (task_agnostic: top)
    if ident.objective is not None and not init.layer_map and map_spec(spec) == "init":
        raise ConfigError(f"the student has {k} layers and the teacher {depth}: choose a layer map (map=...)")
    return init, resolve_map(spec, init, depth, k)


def _check_stated_shapes(ident: JobIdentity) -> None:
    """The rules on the models' shapes (the init, the layer map, the sequence length), where the teacher's
    config states the numbers (stated_config.py): refused here, before torch; prepare.complete checks them again
    from transformers' configs, and everything a config does not state."""
    teacher = stated_teacher_config(ident.settings.teacher)
    if teacher is None:
        return
    length_key = "task" if ident.procedure_settings.reads_task else "corpus"
    stated = SimpleNamespace(max_position_embeddings=stated_int(teacher, "max_position_embeddings"),
                             model_type=teacher.get("model_type", ""))
    # the student types stating their depth copy the teacher's positions (students/*_settings.py)
    check_positions(ident.settings.task.max_seq_length, {"teacher": stated}, length_key)
    depth = stated_int(teacher, *DEPTH_KEYS)
    student_depth = getattr(ident.student, "stated_depth", None)
    if ident.procedure.uses_student and depth is not None and student_depth is not None:
        layer_plan(ident, depth, student_depth())


def check_paths(ident: JobIdentity) -> None:
    """Refused before any work: a task's TSV that is missing, binary or lacks a column (from its first bytes), a
    malformed file of the procedure's own (instruction data, read whole), and a results or cache directory that
    cannot be made."""
    task = ident.settings.task
    if task.data_dir and not Path(task.data_dir).expanduser().is_dir():
        raise ConfigError(f"task.data_dir={task.data_dir!r} is not a directory")
    if ident.procedure_settings.reads_task:
        check_files(task)
    ident.procedure_settings.check_files()  # its own files (causal_lm's instructions)
    for key in ("results_dir", "cache_dir"):
        check_writable(files.absolute(getattr(ident.settings.run, key)), key)


def check_writable(path: Path, key: str) -> None:
    """`path` is, or can be made, a writable directory: a directory is created in it, or in its nearest
    existing ancestor, and removed again (a read-only or virtual file system such as /proc refuses that,
    where permission bits alone would not tell)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{key}={str(path)!r}: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}={str(path)!r}: {probe} is not writable")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".distill_sweep-probe-", dir=probe))
    except OSError as err:
        raise ConfigError(f"{key}={str(path)!r}: cannot create directories in {probe} ({err.strerror})") from None


def _ignored(config: Mapping[str, Any], procedure: Procedure, procedure_settings: Any) -> list[str]:
    """The chosen settings (other than the defaults) that `procedure` does not read, each with why."""
    defaults, out = default_choices(), []
    objective = (config.get("objective") or {}).get("name")
    if not procedure.distils and objective not in (None, defaults["objective"]):
        out.append(f"objective={objective} (procedure={procedure.name} does not distil)")
    if not procedure.uses_student:
        student = (config.get("student") or {}).get("name")
        if student not in (None, defaults["student"]):
            out.append(f"student={student} (procedure={procedure.name} trains no student)")
        for key, default in (("init", DEFAULT_INIT), ("map", "init")):
            if init_spec(config.get(key, default)) != init_spec(default):
                out.append(f"{key}={init_spec(config[key])} (procedure={procedure.name} trains no student)")
    if (config.get("seeds") or {}).get("sampling") is not None and not samples(procedure_settings):
        out.append(f"seeds.sampling={config['seeds']['sampling']} (procedure={procedure.name} with these settings "
                   "draws no samples from the student)")
    engine = (config.get("teacher") or {}).get("engine", HF)
    why = unused_reason(procedure.name, procedure_settings) if engine != HF else None
    if why is not None:
        out.append(f"teacher.engine={engine} ({why})")
    corpus = (config.get("corpus") or {}).get("name")
    if procedure_settings.reads_task and corpus is not None:
        out.append(f"corpus={corpus} (procedure={procedure.name} reads the task, not a corpus)")
    elif (corpus is not None and not procedure_settings.reads_corpus()
          and corpus != option_defaults("procedure", procedure.name).get("corpus")):
        out.append(f"corpus={corpus} (procedure={procedure.name} reads no corpus with these procedure settings)")
    return out


def find_completed(ident: JobIdentity) -> dict[str, Any] | None:
    """The job's completed record, in its own directory or where the first schema put it."""
    for directory in (ident.out_dir, *ident.legacy_dirs):
        record = completed_record(directory)
        if record is not None:
            return record
    return None


__all__ = ["JobIdentity", "check_paths", "check_writable", "find_completed", "identify", "identify_plain", "layer_plan"]
