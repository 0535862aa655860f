"""procedure=fastbert, FastBERT (Liu et al. 2020): early-exit branches after every layer of the fine-tuned teacher,
trained by self-distillation from its last classifier; the record holds the speed-accuracy curve. Its code:
procedures/fastbert.py.

    python -m distill_sweep procedure=fastbert task=toy teacher=tiny

Torch-free: the procedure's settings (their defaults' one home: `procedure=fastbert` composes them,
procedures/base.declare) and its declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from distill_sweep.config.parse import IDENTITY, UNHASHED_AT_DEFAULT
from distill_sweep.errors import ConfigError

from .base import Procedure, ProcedureSettings, declare


@dataclass
class FastBERTSettings(ProcedureSettings):
    branch_width: int = field(default=128, metadata=IDENTITY | {"ge": 1})  # width of each branch classifier
    branch_heads: int = field(default=2, metadata=IDENTITY | {"ge": 1})  # self-attention heads of each branch
    epochs: int = field(default=10, metadata=IDENTITY | {"ge": 1})  # of self-distillation (`epochs=` caps it for smoke runs)
    lr_scale: float = field(default=10.0, metadata=IDENTITY | {"gt": 0.0})  # x the task's learning rate
    # the speeds evaluated: entropy thresholds in [0, 1], 0 = the full model
    speeds: list[float] = field(default_factory=lambda: [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], metadata=IDENTITY)
    eval_speed: float = field(default=0.5, metadata=IDENTITY | {"ge": 0.0, "le": 1.0})  # the epochs' dev metrics
    # the last layer's classifier, which teaches the branches: the model's own (model) or, as in FastBERT, one
    # like the branches (fastbert), fitted to the labels on the frozen backbone first
    teacher_head: Literal["model", "fastbert"] = field(default="model", metadata=IDENTITY | UNHASHED_AT_DEFAULT)
    # dropout while the branches learn: off, or as FastBERT's code trains (the frozen backbone in train mode,
    # the branches' attention weights dropped at the backbone's attention_probs_dropout_prob)
    dropout: bool = field(default=False, metadata=IDENTITY | UNHASHED_AT_DEFAULT)

    def validate(self, where: str) -> None:
        if self.branch_width % self.branch_heads:
            raise ConfigError(f"{where}.branch_width={self.branch_width} is not a multiple of "
                              f"{where}.branch_heads={self.branch_heads}")
        bad = [s for s in self.speeds if not 0.0 <= s <= 1.0]
        if bad or not self.speeds:
            raise ConfigError(f"{where}.speeds={self.speeds}: every speed must be in [0, 1] (and at least one)")

    def check_task(self, task: Any, where: str) -> None:
        if task.is_regression:  # one output: no entropy to exit on, nothing for the branches to learn
            raise ConfigError(f"procedure=fastbert exits on the entropy of class probabilities: task={task.name} "
                              "is a regression task")


declare(Procedure("fastbert", distils=False, settings=FastBERTSettings, uses_student=False))
