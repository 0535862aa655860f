"""Procedures: one short file each, over the shared parts (run context, stage driver, students, objectives).

  task_specific  fine-tune the teacher on the task (cached), then distil it into the student with the
                 objective"s stages (the paper"s first half)
  finetune       the no-distillation baseline: the student trained on the task with cross-entropy only
  fastbert       FastBERT: early-exit branches self-distilled from the fine-tuned teacher"s last classifier
  causal_lm      a decoder LM teacher into a smaller decoder on a corpus or instruction data (next-token terms)
  ptp            PEA-KD"s PTP: the student first learns 4 labels from the teacher"s predictions (right or
                 wrong x confident or not), then task_specific"s stages

A procedure is `run(ctx: RunContext) -> None`: it builds its models and stages, runs them with the stage
driver and fills the job"s record. `distils` says whether it uses an objective and `uses_student` whether it
builds a student (what it ignores is left out of the job"s hash); `settings` is its settings dataclass
(conf/procedure/<name>.yaml), checked with the job (`ctx.job.procedure_settings`).
"""

# The registry is filled here, by the package that owns the procedures: each module registers itself.
from . import causal_lm, fastbert, finetune, ptp, task_agnostic, task_specific  # noqa: F401
from .base import PROCEDURES, Procedure, ProcedureSettings, procedure_named, register_procedure

__all__ = ["PROCEDURES", "Procedure", "ProcedureSettings", "procedure_named", "register_procedure"]
