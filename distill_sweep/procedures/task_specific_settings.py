"""procedure=task_specific: task-specific distillation (the paper's first half), the teacher fine-tuned on the task
(cached), then distilled into the student with the objective's stages. Its code: procedures/task_specific.py.

Torch-free: its declaration; it has no settings but its name (`procedure=task_specific` composes it).
"""

from __future__ import annotations

from .base import Procedure, declare

declare(Procedure("task_specific", distils=True, stores_teacher_outputs=True, shards=True))
