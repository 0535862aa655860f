"""procedure=finetune: the no-distillation baseline, the student built as the distillation jobs build it, trained on
the task with cross-entropy only (the objective is ignored). Its code: procedures/finetune.py.

    python -m distill_sweep procedure=finetune task=toy teacher=tiny

Torch-free: its declaration; it has no settings but its name (`procedure=finetune` composes it).
"""

from __future__ import annotations

from .base import Procedure, declare

declare(Procedure("finetune", distils=False))
