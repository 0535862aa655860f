"""The keys of the stores a sweep's jobs share, computed from the typed config (orchestration).

A fine-tuned teacher is cached under a key of what determines it (backbone, task data, recipe, seed); the
teacher-output store is named by that key too. The key's blocks are the typed settings' hashed forms (config/parse.py's
`hashed_form`, job/hashed.py), which are the blocks as configs write them, so teachers cached by earlier versions
keep their key. `job.identity.identify` computes them once per job and hands the parts `TeacherSpec`s: typed
settings plus key.
"""

from __future__ import annotations

from typing import Any

from distill_sweep.config.parse import hashed_form, teacher_form
from distill_sweep.config.schema import TeacherSettings
from distill_sweep.job.config import JobConfig
from distill_sweep.teachers.cache import CACHE_VERSION, RECIPE_KEYS, TeacherSpec, finetune_settings

# Task keys that only exist for pilot runs: left out of the key while unset, so teachers cached before
# these keys existed keep their key (and are not fine-tuned again). (The config hash has them from the task
# presets, which write them.)
_OPTIONAL_TASK_KEYS = ("max_train_samples", "max_dev_samples")


def finetuned_teacher_key(job: JobConfig, teacher: TeacherSettings) -> dict[str, Any]:
    """Everything that determines an encoder's fine-tuned teacher (and nothing about the student): its cache key, from
    the keys declared `TEACHER` (config/parse.py's `teacher_form`) of the teacher block (`teacher`: one member of an
    ensemble, or the whole block), the task as configured (not the one a procedure that reads no task describes: its
    corpus') and the run; the fine-tuning recipe resolved against the task's. A decoder's trained teacher has its own
    key, teachers/decoder.teacher_key."""
    task = job.configured_task
    task_block = teacher_form(task)
    finetune = finetune_settings(teacher.finetune, task.recipe)
    recipe = {k: v for k, v in task_block.pop("recipe", {}).items() if k not in RECIPE_KEYS}  # those: as resolved
    if recipe:
        task_block["recipe"] = recipe  # the toy data's size and seed
    for key in _OPTIONAL_TASK_KEYS:
        if task_block.get(key) is None:
            task_block.pop(key, None)
    if not any(key in task_block for key in _OPTIONAL_TASK_KEYS):
        task_block.pop("subset_seed", None)  # picks a subset only when there is one to pick
    optimizer = hashed_form(teacher.finetune.optimizer())  # the teacher's own, at its defaults the preset's
    return {
        "version": CACHE_VERSION,
        "teacher": teacher_form(teacher),
        "task": task_block,
        "optimizer": {k: optimizer[k] for k in ("betas", "eps", "weight_decay", "max_grad_norm")},
        "finetune": finetune,
        **teacher_form(job.settings.run),  # precision
    }


def teacher_specs(job: JobConfig) -> tuple[TeacherSpec, list[TeacherSpec]]:
    """The job's teacher and, for an ensemble, each member (`job.members`, parsed with the job) as a single teacher
    would be (same key, so a member shares the cache entry of that teacher); [] members for one teacher."""
    teacher = job.settings.teacher
    return (TeacherSpec(teacher, finetuned_teacher_key(job, teacher)),
            [TeacherSpec(settings, finetuned_teacher_key(job, settings)) for settings in job.members])
