"""student=pretrained: any hub id or local directory as the student (a pre-distilled model, e.g. a task-agnostic
result); a classification head for the task is added. Its code: students/pretrained.py.

    python -m distill_sweep student=pretrained student.name_or_path=/path/to/model

Torch-free: the type's settings (their defaults' one home) and its declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distill_sweep.config.parse import IDENTITY
from distill_sweep.errors import ConfigError

from .base import StudentType, register_student


@dataclass
class PretrainedSettings:
    name: str = field(default="pretrained", metadata=IDENTITY)  # the student type
    name_or_path: str | None = field(default=None, metadata=IDENTITY)  # hub id or local directory (required)
    trust_remote_code: bool = field(default=False, metadata=IDENTITY)  # let transformers run code from the model's repository
    attn_implementation: str = field(default="sdpa", metadata=IDENTITY)  # transformers' attention implementation

    def validate(self, where: str) -> None:
        if not self.name_or_path:
            raise ConfigError(f"{where}.name_or_path is required for student=pretrained (a hub id or a directory)")


register_student(StudentType("pretrained", PretrainedSettings, "distill_sweep.students.pretrained",
                             uses_init=False, needs_teacher_weights=False))
