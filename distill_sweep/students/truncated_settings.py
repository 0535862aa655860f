"""student=truncated, the paper's student: the teacher's architecture with k layers, copied from the teacher
layers the top-level `init` names; the classification head always starts fresh. Its code: students/truncated.py.

Torch-free, like every `students/*_settings.py`: the type's settings (their defaults' one home, composed by
`student=truncated`) and its declaration, checked before torch is imported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distill_sweep.config.parse import IDENTITY, UNHASHED_AT_DEFAULT

from .base import StudentType, register_student


@dataclass
class TruncatedSettings:
    name: str = field(default="truncated", metadata=IDENTITY)  # the student type
    # layers, copied from the teacher layers that init names
    num_layers: int = field(default=3, metadata=IDENTITY | {"ge": 1})
    # recompute each layer's activations in the backward instead of keeping them (transformers'
    # gradient_checkpointing_enable, non-reentrant): the same gradients, about a third more compute, activation
    # memory of one layer instead of all
    gradient_checkpointing: bool = field(default=False, metadata=IDENTITY | UNHASHED_AT_DEFAULT)

    def stated_depth(self) -> int:
        """The student's layers, as describe() makes them (job.identify checks the init with it, before torch)."""
        return self.num_layers


register_student(StudentType("truncated", TruncatedSettings, "distill_sweep.students.truncated",
                             uses_init=True, needs_teacher_weights=True))
