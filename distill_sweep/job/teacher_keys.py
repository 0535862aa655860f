"""The keys of the stores a sweep's jobs share, computed from the typed config (orchestration).

A fine-tuned teacher is cached under a key of what determines it (backbone, task data, recipe, seed); the
teacher-output store is named by that key too. The key's blocks are the typed settings' hashed forms (config/parse.py's
`hashed_form`, job/hashed.py), which are the blocks as configs write them, so teachers cached by earlier versions
keep their key. `job.identity.identify` computes them once per job and hands the parts `TeacherSpec`s: typed
settings plus key.
"""

from __future__ import annotations

from typing import Any

from distill_sweep.config.parse import hashed_form
from distill_sweep.config.schema import TeacherSettings, ensemble_members
from distill_sweep.job.config import JobConfig
from distill_sweep.teachers.cache import CACHE_VERSION, TeacherSpec, finetune_settings
from distill_sweep.teachers.engine import ENGINE_KEYS

# Task keys that only exist for pilot runs: left out of the key while unset, so teachers cached before
# these keys existed keep their key (and are not fine-tuned again). (The config hash has them from the task
# presets, which write them.)
_OPTIONAL_TASK_KEYS = ("max_train_samples", "max_dev_samples")


def finetuned_teacher_key(job: JobConfig, block: dict[str, Any], teacher: TeacherSettings) -> dict[str, Any]:
    """Everything that determines an encoder's fine-tuned teacher (and nothing about the student): its cache key.
    `block`: the hashed form of this teacher's block (one member of an ensemble, or the whole block), `teacher`
    its settings. Keyed by the task as configured, not the one a procedure that reads no task describes (its
    corpus'). A decoder's trained teacher has its own key, teachers/decoder.teacher_key."""
    task = job.configured_task
    # (the engine that does a decoder teacher's bulk work does not change the teacher)
    teacher_block = {k: v for k, v in block.items() if k not in ("name", "finetuned_path", *ENGINE_KEYS)}
    task_block = {k: v for k, v in hashed_form(task).items() if k not in ("recipe", "augment")}  # the original data
    for key in _OPTIONAL_TASK_KEYS:
        if task_block.get(key) is None:
            task_block.pop(key, None)
    if not any(key in task_block for key in _OPTIONAL_TASK_KEYS):
        task_block.pop("subset_seed", None)  # picks a subset only when there is one to pick
    optimizer = hashed_form(job.settings.optimizer)
    return {
        "version": CACHE_VERSION,
        "teacher": teacher_block,
        "task": task_block,
        "optimizer": {k: optimizer.get(k) for k in ("betas", "eps", "weight_decay", "max_grad_norm")},
        "finetune": finetune_settings(teacher.finetune, task.recipe),
        "precision": job.settings.run.precision,
    }


def teacher_specs(job: JobConfig) -> tuple[TeacherSpec, list[TeacherSpec]]:
    """The job's teacher and, for an ensemble, each member (`job.members`, parsed with the job) as a single teacher
    would be (same key, so a member shares the cache entry of that teacher); [] members for one teacher."""
    teacher = job.settings.teacher
    block = hashed_form(teacher)
    whole = TeacherSpec(teacher, finetuned_teacher_key(job, block, teacher))
    return whole, [TeacherSpec(settings, finetuned_teacher_key(job, member, settings))
                   for settings, member in zip(job.members, ensemble_members(block), strict=True)]
