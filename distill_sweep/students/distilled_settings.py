"""student=distilled: the student a task-agnostic job of this result store saved, named by that job's config
hash (its result.json `config_hash`); a classification head for the task is added. The sweeper fills it in for
the fine-tune grid after a distillation (`finetune_grid`). Its code: students/distilled.py. By hand:

    python -m distill_sweep procedure=finetune student=distilled student.source=<config hash> task=toy teacher=tiny_mlm

Torch-free: the type's settings (their defaults' one home) and its declaration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from distill_sweep.config.parse import IDENTITY
from distill_sweep.errors import ConfigError
from distill_sweep.records import hashing

from .base import FILLED_IN, StudentType, register_student

MIN_HASH_CHARS = hashing.HASH_CHARS  # student.source: as many as a result directory's name holds


@dataclass
class DistilledSettings:
    name: str = field(default="distilled", metadata=IDENTITY)  # the student type
    source: str | None = field(default=None, metadata=IDENTITY)  # config hash of a completed task_agnostic job (its first >= 10 characters do)
    attn_implementation: str = field(default="sdpa", metadata=IDENTITY)  # transformers' attention implementation
    # filled in from `source` when the job is prepared (not settings: the config hash covers `source`)
    student_dir: str | None = field(default=None, metadata=IDENTITY | FILLED_IN)
    # filled in: the distillation's objective, init, teacher, corpus and result directory
    distilled_from: dict[str, Any] | None = field(default=None, metadata=IDENTITY | FILLED_IN)

    def validate(self, where: str) -> None:
        if not self.source or not re.fullmatch(f"[0-9a-f]{{{MIN_HASH_CHARS},64}}", str(self.source)):
            raise ConfigError(f"{where}.source={self.source!r}: expected the config hash of a completed "
                              f"task_agnostic job ({MIN_HASH_CHARS} to 64 hex characters, as its result.json says)")
        if self.student_dir is not None or self.distilled_from is not None:
            raise ConfigError(f"{where}.student_dir and {where}.distilled_from are filled in from {where}.source: "
                              "leave them unset")


register_student(StudentType("distilled", DistilledSettings, "distill_sweep.students.distilled",
                             uses_init=False, needs_teacher_weights=False, has_locate=True))
