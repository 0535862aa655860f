"""A job's config, typed in one pass: every group's settings, each part's own settings through its registry.

`parse_job` is where the composed config becomes typed settings, and the only place that parses it: the run,
optimizer, task (its augmentation included), teacher and logger groups, an ensemble's members, the procedure,
the student and the objective. A procedure whose data is not the task (a corpus) describes its own task here.

The config as composed (`JobConfig.composed`, read-only) is kept beside the typed settings for what must see the
config as the user wrote it: the check for settings a procedure ignores (job/identity.py) and the record's config.
The config hash and the teacher cache keys are taken from the typed settings (job/hashed.py, job/teacher_keys.py).
Nothing below the job reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from omegaconf import DictConfig

from distill_sweep.config.parse import parse
from distill_sweep.config.schema import (
    ConfigSettings,
    TaskSettings,
    TeacherSettings,
    check_config,
)
from distill_sweep.data.augment_settings import parse_augment
from distill_sweep.errors import ConfigError
from distill_sweep.job.plain_config import plain_config
from distill_sweep.objectives import ObjectiveSettings, parse_objective
from distill_sweep.procedures import Procedure, procedure_named
from distill_sweep.students import StudentType, student_type


@dataclass(frozen=True)
class JobConfig:
    """Every group's typed settings of one job."""

    settings: ConfigSettings  # run, optimizer, task (its augment typed: AugmentSettings), teacher, logger
    members: list[TeacherSettings]  # an ensemble's members, each as that single teacher ([] for one teacher)
    procedure: Procedure  # the procedure's declaration
    procedure_settings: Any  # its settings dataclass
    student_kind: StudentType  # the student type's declaration
    student: Any  # its settings dataclass
    objective: ObjectiveSettings | None  # None for procedures that do not distil
    # the task as configured: settings.task unless the procedure reads a corpus and describes its own task
    # (teachers are fine-tuned on, and keyed by, the configured one)
    configured_task: TaskSettings
    composed: Mapping[str, Any]  # the config as composed, read-only (module docstring says who reads it)


def parse_job(cfg: DictConfig) -> JobConfig:
    """The composed config as typed settings (ConfigError, one line, naming the first bad key)."""
    return parse_plain(plain_config(cfg))


def _check_preset_package(composed: Mapping[str, Any]) -> None:
    """An experiment preset's keys are the whole config's: a preset file (one of the user's, `--config-dir`)
    without `# @package _global_` as its first line is composed under `experiment.` instead, where nothing reads
    it (`seed: 5` ran at seed 1, silently). One line, before any work."""
    node = composed.get("experiment")
    if isinstance(node, Mapping) and node:
        keys = sorted(str(k) for k in node)
        shown = ", ".join(f"experiment.{k}" for k in keys[:3]) + (", ..." if len(keys) > 3 else "")
        raise ConfigError(f"the experiment preset's keys were composed as {shown}, where nothing reads them: its "
                          "file's first line must be `# @package _global_` (as in every preset of conf/experiment/), "
                          "else the preset is ignored")


def parse_plain(composed: dict[str, Any]) -> JobConfig:
    """`parse_job` of a config already made plain (job.plain_config's form: the sweeper makes a grid's configs
    that way, sweep/plain_overrides.py); the dict becomes the job's, read-only."""
    _check_preset_package(composed)
    settings = check_config(composed)
    members = settings.teacher.member_settings()  # parsed when the teacher block was
    procedure = procedure_named(str(composed["procedure"]["name"]))
    procedure_settings = parse(procedure.settings, composed["procedure"], "procedure")
    configured_task = settings.task
    own_task = procedure_settings.own_task(composed.get("corpus"))
    if own_task is not None:  # a procedure whose data is not the task (task_agnostic: a corpus) describes its own
        settings.task = own_task
    settings.task.augment = parse_augment(settings.task.augment, "task.augment")  # the augment part's settings
    procedure_settings.check_task(settings.task, "procedure")  # e.g. ptp: class labels
    kind = student_type(str(composed["student"].get("name")))
    student = parse(kind.settings, composed["student"], "student")
    objective = parse_objective(composed.get("objective")) if procedure.distils else None
    return JobConfig(settings, members, procedure, procedure_settings, kind, student, objective, configured_task,
                     MappingProxyType(composed))
