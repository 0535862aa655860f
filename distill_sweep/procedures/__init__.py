"""Procedures: one short file each, over the shared parts (run context, stage driver, students, objectives).

  task_specific  fine-tune the teacher on the task (cached), then distil it into the student with the
                 objective's stages (the paper's first half)
  finetune       the no-distillation baseline: the student trained on the task with cross-entropy only
  fastbert       FastBERT: early-exit branches self-distilled from the fine-tuned teacher's last classifier
  task_agnostic  distillation during pre-training on a corpus (the paper's second half)
  causal_lm      a decoder LM teacher into a smaller decoder on a corpus or instruction data (next-token terms)
  ptp            PEA-KD's PTP: the student first learns 4 labels from the teacher's predictions (right or
                 wrong x confident or not), then task_specific's stages

Each procedure is declared in its own torch-free procedures/*_settings.py (listed in declarations.py): its
settings dataclass, the one home of their defaults (`procedure=<name>` composes them: conf/ has no procedure
YAML), checked with the job (`ctx.job.procedure_settings`), and its `Procedure`: `distils` says whether it uses an
objective and `uses_student` whether it builds a student (what it ignores is left out of the job's hash), `corpus`
the corpus option it composes. Its code is procedures/<name>.py: `run(ctx: RunContext) -> None` builds its models
and stages, runs them with the stage driver and fills the job's record; an optional `check_job(settings, job)`
refuses what the models' configs rule out. Declaring is importing nothing heavy: the config checks read this
package before torch. Several processes (torchrun, SLURM tasks): `shards` runs the student sharded with FSDP2
(training/fsdp.py); the others run in one process. Adding a procedure: one module with `run`, one settings
module, its name added to declarations.py (docs/guide/add-procedure.md).
"""

from . import declarations  # noqa: F401 - declares every procedure
from .base import PROCEDURES, Procedure, ProcedureSettings, declare, procedure_named

__all__ = ["PROCEDURES", "Procedure", "ProcedureSettings", "declare", "procedure_named"]
