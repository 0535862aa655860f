"""The keys of the stores a sweep's jobs share, computed from the composed config (orchestration).

A fine-tuned teacher is cached under a key of what determines it (backbone, task data, recipe, seed); the
teacher-output store is named by that key too. The keys are taken from the config blocks as composed (not
from their typed form, which fills in defaults), so teachers cached by earlier versions keep their key.
`job.identity.identify` computes them once per job (from `JobConfig.composed`, job/config.py's one compatibility
shim) and hands the parts `TeacherSpec`s: typed settings plus key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distill_sweep.config.schema import TaskSettings, TeacherSettings, ensemble_members
from distill_sweep.teachers.cache import CACHE_VERSION, TeacherSpec, finetune_settings
from distill_sweep.teachers.engine import ENGINE_KEYS

# Task keys that only exist for pilot runs: left out of the key while unset, so teachers cached before
# these keys existed keep their key (and are not fine-tuned again).
_OPTIONAL_TASK_KEYS = ("max_train_samples", "max_dev_samples")


def finetuned_teacher_key(config: Mapping[str, Any], teacher: TeacherSettings, task: TaskSettings) -> dict[str, Any]:
    """Everything that determines an encoder's fine-tuned teacher (and nothing about the student): its cache key.
    `config`: the job's plain config with the teacher block of this teacher (one member of an ensemble, or the
    whole block). A decoder's trained teacher has its own key, teachers/decoder.teacher_key."""
    # (the engine that does a decoder teacher's bulk work does not change the teacher)
    block = {k: v for k, v in config["teacher"].items() if k not in ("name", "finetuned_path", *ENGINE_KEYS)}
    task_block = {k: v for k, v in config["task"].items() if k not in ("recipe", "augment")}  # the original data
    for key in _OPTIONAL_TASK_KEYS:
        if task_block.get(key) is None:
            task_block.pop(key, None)
    if not any(key in task_block for key in _OPTIONAL_TASK_KEYS):
        task_block.pop("subset_seed", None)  # picks a subset only when there is one to pick
    optimizer = config["optimizer"]
    return {
        "version": CACHE_VERSION,
        "teacher": block,
        "task": task_block,
        "optimizer": {k: optimizer.get(k) for k in ("betas", "eps", "weight_decay", "max_grad_norm")},
        "finetune": finetune_settings(teacher.finetune, task.recipe),
        "precision": config.get("precision"),
    }


def teacher_specs(config: Mapping[str, Any], teacher: TeacherSettings, members: list[TeacherSettings],
                  task: TaskSettings) -> tuple[TeacherSpec, list[TeacherSpec]]:
    """The job's teacher and, for an ensemble, each member (`members`, parsed with the job) as a single teacher
    would be (same key, so a member shares the cache entry of that teacher); [] members for one teacher."""
    whole = TeacherSpec(teacher, finetuned_teacher_key(config, teacher, task))
    blocks = ensemble_members(config["teacher"])
    return whole, [TeacherSpec(settings, finetuned_teacher_key({**config, "teacher": block}, settings, task))
                   for settings, block in zip(members, blocks, strict=True)]
