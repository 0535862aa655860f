"""A job validated against its models' configs (config.json files, never weights), before any work.

job.identify reads the config alone; `complete` adds what needs the models' configs: depths, widths and head
counts, the init and the layer map, and whether the objective can run on this student and teacher; `prepare`
is both. Each raises `ConfigError` with one line. Reading a model's config imports transformers (and torch),
so this module is apart from job/identity.py, which the command line's checks import before torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch
from omegaconf import DictConfig
from transformers import PretrainedConfig

from distill_sweep.data.augment import check as check_augment
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import JobIdentity, check_paths, identify, layer_plan
from distill_sweep.job.machine import check_threads
from distill_sweep.models.families import is_causal_type
from distill_sweep.models.inits import StudentInit
from distill_sweep.models.loading import check_attention, teacher_config, tokenizer_source
from distill_sweep.models.model_info import ModelInfo, check_heads, check_positions
from distill_sweep.objectives import check_compatible
from distill_sweep.records import files, record
from distill_sweep.students import model_info
from distill_sweep.teachers.finetuned import check_ensemble
from distill_sweep.training.checkpoint import save_checkpoint
from distill_sweep.training.checkpoint_files import CHECKPOINT


@dataclass(frozen=True)
class Job(JobIdentity):
    """A validated job: its identity, and what the models' configs add."""

    teacher_arch: PretrainedConfig  # transformers' config of the teacher
    student_arch: PretrainedConfig  # and of the student (the teacher's, for a procedure that trains none)
    init: StudentInit  # which teacher layers the student starts from
    layer_map: list[tuple[int, int]]  # (student layer, teacher layer) pairs the intermediate terms read

    @property
    def teacher_info(self) -> ModelInfo:
        return model_info(self.teacher_arch)

    @property
    def student_info(self) -> ModelInfo:
        return model_info(self.student_arch)


def prepare(cfg: DictConfig) -> Job:
    """Validate the whole job (config.json files are read, weights never). Raises ConfigError."""
    return complete(identify(cfg))


def complete(ident: JobIdentity) -> Job:
    """The identified job validated against the models' configs (config.json files, never weights)."""
    task, teacher = ident.settings.task, ident.settings.teacher
    check_paths(ident)
    check_attention(teacher.attn_implementation, "teacher.attn_implementation")
    student_attention = getattr(ident.student, "attn_implementation", None)
    if ident.procedure.uses_student and student_attention is not None:
        check_attention(student_attention, "student.attn_implementation")
    teacher_arch = teacher_config(teacher, task.num_labels)
    if is_causal_type(str(getattr(teacher_arch, "model_type", ""))) and not ident.procedure_settings.decoders:
        raise ConfigError(f"teacher={teacher.name} is a decoder LM ({teacher_arch.model_type}): "
                          f"procedure={ident.procedure.name} distils encoders; use procedure=causal_lm")
    tokenizer_source(teacher)
    check_ensemble(teacher, ident.members, task, ident.procedure, ident.objective, teacher_arch)
    if task.augment.name != "none":
        if not ident.procedure_settings.reads_task or not ident.procedure.uses_student:
            raise ConfigError(f"task.augment={task.augment.name} augments the training split a student distils on: "
                              f"procedure={ident.procedure.name} trains no student on it")
        check_augment(task.augment, teacher)
    check_heads({"teacher": teacher_arch}, "teacher")
    if not ident.procedure.uses_student:  # the procedure's model is the teacher itself (e.g. early exit)
        check_positions(task.max_seq_length, {"teacher": teacher_arch})
        return Job(**vars(ident), teacher_arch=teacher_arch, student_arch=teacher_arch,
                   init=StudentInit("none", "none", [], []), layer_map=[])
    if ident.student_kind.locate is not None:  # e.g. a distilled student, saved by another job of this store
        located = ident.student_kind.locate(ident.student, Path(files.absolute(ident.settings.run.results_dir)))
        ident = replace(ident, config=replace(ident.config, student=located))
    student_arch = ident.student_kind.describe(ident.student, teacher_arch)
    check_heads({"student": student_arch}, "student")
    depth, k = int(teacher_arch.num_hidden_layers), int(student_arch.num_hidden_layers)
    init, layer_map = layer_plan(ident, depth, k)
    length_key = "task" if ident.procedure_settings.reads_task else "corpus"
    check_positions(task.max_seq_length, {"teacher": teacher_arch, "student": student_arch}, length_key)
    if ident.objective is not None:
        check_compatible(ident.objective, model_info(student_arch), model_info(teacher_arch), layer_map)
    job = Job(**vars(ident), teacher_arch=teacher_arch, student_arch=student_arch, init=init, layer_map=layer_map)
    ident.procedure.check_job(ident.procedure_settings, job)  # e.g. task_agnostic: an MLM head, the corpus, the vocabulary
    return job


def check_machine(job: JobIdentity) -> None:
    """What the job asks of the machine it runs on, where it runs (the sweeper's host may not be the job's):
    `threads` within the CPUs this process may use, and a CUDA device that exists (`device=auto` takes the CPU
    where there is none; `cuda` would silently train on the CPU). ConfigError, one line."""
    check_threads(job.settings.run)
    device = job.settings.run.device
    if not device.startswith("cuda"):
        return
    if not torch.cuda.is_available():
        raise ConfigError(f"device={device}: CUDA is not available on this machine (torch {torch.__version__}"
                          f"{', a CPU-only build' if torch.version.cuda is None else ''}); use device=auto (CUDA "
                          "where there is one, else the CPU) or device=cpu")
    index = int(device[5:]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise ConfigError(f"device={device}: this machine has {torch.cuda.device_count()} CUDA device(s) "
                          f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})")


def adopt_legacy_checkpoint(job: JobIdentity) -> Path | None:
    """An unfinished job of the first schema continues here: its checkpoint moves into the job's directory
    (re-keyed to today's config hash); its record and checkpoint there are renamed `*.migrated`."""
    if (job.out_dir / CHECKPOINT).exists():
        return None
    for directory in job.legacy_dirs:
        old = directory / CHECKPOINT
        if not old.exists():
            continue
        try:
            state = torch.load(old, map_location="cpu", weights_only=True)
        except Exception:  # unreadable: leave it where it is, the job starts afresh
            continue
        if not str(state.get("config_hash", "")).startswith(directory.name):
            continue
        state["config_hash"] = job.digest
        save_checkpoint(job.out_dir / CHECKPOINT, state)
        for name in (CHECKPOINT, record.RECORD):
            if (directory / name).exists():
                (directory / name).rename(directory / f"{name}.migrated")
        return directory
    return None
