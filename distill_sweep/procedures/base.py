"""The procedure registry and the types every procedure module declares (see the package's docstring)."""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from distill_sweep.config import space
from distill_sweep.config.declared import add, find, load
from distill_sweep.config.parse import IDENTITY
from distill_sweep.errors import ConfigError


@dataclass
class ProcedureSettings:
    """Settings of a procedure that has none but its name; a procedure with settings extends this (in its
    procedures/*_settings.py) and overrides the hooks below where it differs (job/identity.py, job/config.py and
    sweep/cost.py call them)."""

    name: str = field(metadata=IDENTITY)  # the procedure (procedure=NAME sets it)

    reads_task: ClassVar[bool] = True  # its data is the task's (False: task_agnostic reads a corpus)
    prunes_layers: ClassVar[bool] = False  # resolves init=prune when it runs (causal_lm: block importance)
    decoders: ClassVar[bool] = False  # distils decoder-LM teachers (causal_lm); others refuse them

    def reads_corpus(self) -> bool:
        """Whether its data is the corpus group (else the corpus is ignored, and left out of the job's hash)."""
        return not self.reads_task

    def unread_keys(self, objective: Any) -> set[str]:
        """Its settings that `objective` (checked settings, None for none) gives nothing to read: left out of
        the job's hash, so setting them makes no other job."""
        return set()

    def own_task(self, corpus: Any) -> Any:
        """The task settings a procedure that reads no task describes itself with (None: the task's);
        `corpus`: the corpus group as composed (plain containers), None when the config has none."""
        return None

    def check_task(self, task: Any, where: str) -> None:
        """Rules that involve the job's task, checked with the config alone."""

    def check_files(self) -> None:
        """Its own data files, read and checked before any job starts (job.check_paths: a run, not a dry run);
        DataError, one line naming the file."""

    def sequences_per_step(self) -> int:
        """Sequences per update over all processes, for a procedure that reads no task (the dry run counts its
        training tokens as steps x this x the sequence length)."""
        raise NotImplementedError(f"procedure {self.name} reads the task: its cost is counted in task examples")

    def pre_stage_epochs(self, stage_epochs: int) -> int:
        """Epochs of a stage the procedure runs before the objective's (the dry run's cost counts them)."""
        return 0


@dataclass(frozen=True)
class Procedure:
    """A procedure as the registry declares it: its name, flags and settings; its code is
    `distill_sweep.procedures.<name>`'s `run(ctx)` and optional `check_job(settings, job)`, imported when a job
    first runs or is prepared (declared.py says why)."""

    name: str
    distils: bool  # uses an objective (else `objective` is ignored, and left out of the job's hash)
    settings: type = ProcedureSettings
    uses_student: bool = True  # builds a student from `student=` (else `student`/`init`/`map` are ignored)
    # distils from a frozen teacher fine-tuned on the task's fixed training split: its logits can come from
    # the teacher-output store (teachers/output_store.py)
    stores_teacher_outputs: bool = False
    # runs on several processes (torchrun, SLURM tasks) with its student sharded (FSDP2: training/fsdp.py), its
    # checkpoints too
    shards: bool = False
    # the corpus option `procedure=<name>` composes with it (the top-level `corpus` group: its data when it reads
    # a corpus; `corpus=...` chooses another); None: none
    corpus: str | None = None

    @property
    def module(self) -> str:
        return f"distill_sweep.procedures.{self.name}"

    @property
    def run(self) -> Callable[[Any], None]:
        return load(f"{self.module}:run")

    def check_job(self, settings: Any, job: Any) -> None:
        """The procedure's rules over the whole prepared job (model configs read), where it has any."""
        check = find(f"{self.module}:check_job")
        if check is not None:
            check(settings, job)

    @property
    def prepare_outputs(self) -> Callable[[Any], None] | None:
        """The procedure's own build job (`prepare_only`: its teacher and stored teacher outputs made, no student),
        where its module defines `prepare_outputs(ctx)`; None: the fine-tuned teacher and its logits store."""
        return find(f"{self.module}:prepare_outputs")


PROCEDURES: dict[str, Procedure] = {}


def declare(procedure: Procedure) -> Procedure:
    """Add `procedure` to the registry (procedures/declarations.py lists the package's own, their code unloaded)
    and make `procedure=<name>` an option of the config group: its name and its settings at their dataclass
    defaults, their one home, with the corpus it composes."""
    add(PROCEDURES, procedure.name, procedure, "procedure")
    space.register_option("procedure", procedure.name,
                          {"name": procedure.name, **space.config_defaults(procedure.settings)},
                          choose={"corpus": procedure.corpus} if procedure.corpus is not None else None)
    return procedure


def procedure_named(name: str) -> Procedure:
    if name not in PROCEDURES:
        raise ConfigError(f"procedure.name={name!r} is not a procedure (known: {', '.join(sorted(PROCEDURES))})")
    return PROCEDURES[name]
