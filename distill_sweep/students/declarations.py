"""The student types: the one list of their names, settings and needs, with the module of each one's code.

Torch-free, so a job's student settings are checked before torch is imported; a type's code (students/<type>.py)
is imported when a job first describes or builds it.
"""

from __future__ import annotations

from .base import StudentType, register_student
from .settings import (
    BiLSTMSettings,
    DistilledSettings,
    FreshSettings,
    PretrainedSettings,
    SPSSettings,
    TruncatedSettings,
)

register_student(StudentType("truncated", TruncatedSettings, "distill_sweep.students.truncated",
                             uses_init=True, needs_teacher_weights=True))
register_student(StudentType("fresh", FreshSettings, "distill_sweep.students.fresh",
                             uses_init=False, needs_teacher_weights=True))
register_student(StudentType("sps", SPSSettings, "distill_sweep.students.sps",
                             uses_init=True, needs_teacher_weights=True))
register_student(StudentType("pretrained", PretrainedSettings, "distill_sweep.students.pretrained",
                             uses_init=False, needs_teacher_weights=False))
register_student(StudentType("distilled", DistilledSettings, "distill_sweep.students.distilled",
                             uses_init=False, needs_teacher_weights=False, has_locate=True))
register_student(StudentType("bilstm", BiLSTMSettings, "distill_sweep.students.bilstm",
                             uses_init=False, needs_teacher_weights=False, has_tokenizer=True, has_layers=False,
                             procedures=("task_specific", "finetune")))
