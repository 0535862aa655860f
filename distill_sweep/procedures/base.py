"""The procedure registry and the types every procedure module declares (see the package's docstring)."""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from distill_sweep.errors import ConfigError


@dataclass
class ProcedureSettings:
    """Settings of a procedure that has none but its name; a procedure with settings extends this and
    overrides the hooks below where it differs (job.py, context.py and grid.py call them)."""

    name: str  # the procedure (procedure=NAME sets it)

    reads_task: ClassVar[bool] = True  # its data is the task's (False: task_agnostic reads a corpus)
    prunes_layers: ClassVar[bool] = False  # resolves init=prune when it runs (causal_lm: block importance)
    decoders: ClassVar[bool] = False  # distils decoder-LM teachers (causal_lm); others refuse them

    def reads_corpus(self) -> bool:
        """Whether its data is the corpus group (else the corpus is ignored, and left out of the job's hash)."""
        return not self.reads_task

    def own_task(self, corpus: Any) -> Any:
        """The task settings a procedure that reads no task describes itself with (None: the task's);
        `corpus`: the corpus group as composed (plain containers), None when the config has none."""
        return None

    def check_task(self, task: Any, where: str) -> None:
        """Rules that involve the job's task, checked with the config alone."""

    def check_job(self, job: Any) -> None:
        """Rules over the whole prepared job (model configs read), before any work."""

    def sequences_per_step(self) -> int:
        """Sequences per update over all processes, for a procedure that reads no task (the dry run counts its
        training tokens as steps x this x the sequence length)."""
        raise NotImplementedError(f"procedure {self.name} reads the task: its cost is counted in task examples")

    def pre_stage_epochs(self, stage_epochs: int) -> int:
        """Epochs of a stage the procedure runs before the objective's (the dry run's cost counts them)."""
        return 0


@dataclass(frozen=True)
class Procedure:
    name: str
    run: Callable[[Any], None]
    distils: bool  # uses an objective (else `objective` is ignored, and left out of the job's hash)
    settings: type = ProcedureSettings
    uses_student: bool = True  # builds a student from `student=` (else `student`/`init`/`map` are ignored)
    # distils from a frozen teacher fine-tuned on the task's fixed training split: its logits can come from
    # the teacher-output store (teacher_outputs.py)
    stores_teacher_outputs: bool = False
    data_parallel: bool = False  # runs on several processes (torchrun, SLURM tasks): distributed.py


PROCEDURES: dict[str, Procedure] = {}


def register_procedure(name: str, *, distils: bool, settings: type = ProcedureSettings, uses_student: bool = True,
                       stores_teacher_outputs: bool = False, data_parallel: bool = False
                       ) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    def deco(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        if name in PROCEDURES:
            raise ValueError(f"procedure {name!r} registered twice")
        PROCEDURES[name] = Procedure(name, fn, distils, settings, uses_student, stores_teacher_outputs,
                                     data_parallel)
        return fn

    return deco


def procedure_named(name: str) -> Procedure:
    if name not in PROCEDURES:
        raise ConfigError(f"procedure.name={name!r} is not a procedure (known: {', '.join(sorted(PROCEDURES))})")
    return PROCEDURES[name]
