"""`student=distilled`: the student a task-agnostic job of this result store distilled, named by that job's
config hash (`student.source`). The sweeper fills it in for the fine-tune grid that follows a distillation
(`finetune_grid`, distill_sweep/sweep/chain.py); by hand: `student=distilled student.source=<config hash>`.

The config hash, not the directory, is the student's identity: the fine-tune job's own hash stays the same
when the result store moves. The directory is found in `results_dir` when the job is prepared; the student is
loaded like `student=pretrained` (its encoder as saved, a fresh classification head).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from transformers import PretrainedConfig, PreTrainedModel

from distill_sweep.errors import ConfigError
from distill_sweep.models.loading import read_model_config
from distill_sweep.records import files, hashing, record

from .base import BuildInputs
from .distilled_settings import DistilledSettings
from .pretrained import build as build_pretrained
from .pretrained_settings import PretrainedSettings

SOURCE_PROCEDURE = "task_agnostic"  # the procedure that saves a student for others to fine-tune


def find_source(source: str, results_dir: Path) -> tuple[Path, record.Record]:
    """The result directory and record of the task_agnostic job whose config hash starts with `source`."""
    found = []
    for directory in hashing.job_dirs_of(results_dir, source):
        data = files.read_record(directory / record.RECORD)
        if data is None:
            continue
        rec = record.Record.from_dict(data)
        if rec.config_hash.startswith(source) and rec.procedure == SOURCE_PROCEDURE:
            found.append((directory, rec))
    if not found:
        raise ConfigError(f"student.source={source}: no task_agnostic job with that config hash in "
                          f"results_dir={results_dir} (run the distillation first, into the same results_dir)")
    if len(found) > 1:
        raise ConfigError(f"student.source={source}: {len(found)} task_agnostic jobs match; give more of the hash")
    return found[0]


def locate(settings: DistilledSettings, results_dir: Path) -> DistilledSettings:
    """The settings with the saved student's directory and a summary of the job that distilled it."""
    directory, rec = find_source(str(settings.source), results_dir)
    saved = rec.student_dir
    if rec.status != "completed" or not saved:
        raise ConfigError(f"student.source={settings.source}: the distillation in {directory} has not completed "
                          f"(status {rec.status}); its student is not saved yet")
    if not Path(saved).is_dir():
        raise ConfigError(f"student.source={settings.source}: its saved student {saved} is missing")
    corpus = rec.corpus or {}
    summary = {
        "config_hash": rec.config_hash, "path": str(directory), "objective": rec.objective,
        "init": {"name": rec.init.name, "spec": rec.init.spec, "layers": list(rec.init.layers)},
        "student": rec.student.name, "student_layers": rec.student.num_layers,
        "teacher": rec.teacher.name_or_path or rec.teacher.name, "seed": rec.seed,
        "corpus": corpus.get("name") if isinstance(corpus, dict) else None,
    }
    return replace(settings, student_dir=str(saved), distilled_from=summary)


def _as_pretrained(settings: DistilledSettings) -> PretrainedSettings:
    if settings.student_dir is None:  # prepare() locates it before anything is described or built
        raise ConfigError(f"student.source={settings.source}: not located in the result store")
    return PretrainedSettings(name_or_path=settings.student_dir, attn_implementation=settings.attn_implementation)


def describe(settings: DistilledSettings, teacher: PretrainedConfig) -> PretrainedConfig:
    return read_model_config(str(_as_pretrained(settings).name_or_path), "student.source", False)


def build(settings: DistilledSettings, inputs: BuildInputs) -> PreTrainedModel:
    return build_pretrained(_as_pretrained(settings), inputs)
