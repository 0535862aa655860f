"""Procedures: one short file each, over the shared parts (run context, stage driver, students, objectives).

  task_specific  fine-tune the teacher on the task (cached), then distil it into the student with the
                 objective's stages (the paper's first half)
  finetune       the no-distillation baseline: the student trained on the task with cross-entropy only
  fastbert       FastBERT: early-exit branches self-distilled from the fine-tuned teacher's last classifier
  task_agnostic  distillation during pre-training on a corpus (the paper's second half)
  causal_lm      a decoder LM teacher into a smaller decoder on a corpus or instruction data (next-token terms)
  ptp            PEA-KD's PTP: the student first learns 4 labels from the teacher's predictions (right or
                 wrong x confident or not), then task_specific's stages

The registry below declares each procedure: `distils` says whether it uses an objective and `uses_student`
whether it builds a student (what it ignores is left out of the job's hash); `settings` is its settings
dataclass (conf/procedure/<name>.yaml; settings.py), checked with the job (`ctx.job.procedure_settings`).
Its code is procedures/<name>.py: `run(ctx: RunContext) -> None` builds its models and stages, runs them with
the stage driver and fills the job's record; an optional `check_job(settings, job)` refuses what the models'
configs rule out. Declaring is importing nothing heavy: the config checks read this package before torch.
Several processes (torchrun, SLURM tasks): `shards` runs the student sharded with FSDP2 (training/fsdp.py); the
others run in one process. Adding a procedure: one module with `run`, one line below, one YAML.
"""

from .base import PROCEDURES, Procedure, ProcedureSettings, declare, procedure_named
from .settings import CausalLMSettings, FastBERTSettings, PTPSettings, TaskAgnosticSettings

declare(Procedure("task_specific", distils=True, stores_teacher_outputs=True, shards=True))
declare(Procedure("finetune", distils=False))
declare(Procedure("fastbert", distils=False, settings=FastBERTSettings, uses_student=False))
declare(Procedure("task_agnostic", distils=True, settings=TaskAgnosticSettings, shards=True))
declare(Procedure("causal_lm", distils=True, settings=CausalLMSettings, shards=True))
declare(Procedure("ptp", distils=True, settings=PTPSettings, stores_teacher_outputs=True))

__all__ = ["PROCEDURES", "Procedure", "ProcedureSettings", "procedure_named"]
