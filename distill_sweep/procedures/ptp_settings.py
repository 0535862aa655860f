"""procedure=ptp, PEA-KD's PTP: before the objective's stages, the student (body + a temporary 4-class head) learns
with cross-entropy whether the fine-tuned teacher is right or wrong on each training example, and whether
confidently (its max probability above the task's threshold) or not; then a fresh task head and the objective's
stages, as procedure=task_specific. Its code: procedures/ptp.py.

    python -m distill_sweep procedure=ptp objective=pkd student=sps2 task=toy teacher=tiny

Torch-free: the procedure's settings (their defaults' one home: `procedure=ptp` composes them,
procedures/base.declare) and its declaration.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from distill_sweep.config.parse import IDENTITY
from distill_sweep.config.schema import TaskSettings
from distill_sweep.errors import ConfigError

from .base import Procedure, ProcedureSettings, declare


@dataclass
class Thresholds:
    correct: float = field(metadata=IDENTITY | {"gt": 0.5, "lt": 1.0})  # a correct prediction above this is confident
    wrong: float = field(metadata=IDENTITY | {"gt": 0.5, "lt": 1.0})  # a wrong prediction above this is confident


# Per task: confident above `correct` (right predictions) / `wrong` (wrong ones), in (0.5, 1): the paper's code
# (nli_data_processing in its src/utils), and ours for the toy task (all four labels well populated for the tiny
# teacher, 6 or 8 epochs).
THRESHOLDS = {
    "rte": Thresholds(correct=0.8, wrong=0.6),
    "mrpc": Thresholds(correct=0.95, wrong=0.75),
    "sst2": Thresholds(correct=0.98, wrong=0.8),
    "qnli": Thresholds(correct=0.98, wrong=0.7),
    "cola": Thresholds(correct=0.95, wrong=0.7),
    "toy": Thresholds(correct=0.9, wrong=0.65),
}


@dataclass
class PTPSettings(ProcedureSettings):
    thresholds: dict[str, Thresholds] = field(default_factory=lambda: copy.deepcopy(THRESHOLDS), metadata=IDENTITY)  # by task name
    epochs: int | None = field(default=None, metadata=IDENTITY | {"ge": 1})  # of the ptp stage (null: as every stage)

    def pre_stage_epochs(self, stage_epochs: int) -> int:
        """Epochs of the ptp stage, given the epochs every other stage runs (the dry run's cost counts them)."""
        return self.epochs or stage_epochs

    def check_task(self, task: TaskSettings, where: str) -> None:
        """Rules that involve the job's task (job.identify calls this)."""
        if task.is_regression:
            raise ConfigError(f"procedure=ptp labels the teacher's predictions right or wrong: task={task.name} "
                              "is a regression task")
        if task.name not in self.thresholds:
            raise ConfigError(f"{where}.thresholds has no entry for task={task.name} (it has: "
                              f"{', '.join(sorted(self.thresholds)) or 'none'}); add e.g. "
                              f"+{where}.thresholds.{task.name}={{correct:0.95,wrong:0.7}}")


declare(Procedure("ptp", distils=True, settings=PTPSettings, stores_teacher_outputs=True))
