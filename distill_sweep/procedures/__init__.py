"""Procedures: one short file each, over the shared parts (run context, stage driver, students, objectives).

  task_specific  fine-tune the teacher on the task (cached), then distil it into the student with the
                 objective's stages (the paper's first half)
  finetune       the no-distillation baseline: the student trained on the task with cross-entropy only

A procedure is `run(ctx: RunContext) -> None`: it builds its models and stages, runs them with the stage
driver and fills the job's record. `distils` says whether it uses an objective (part of the job's hash).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from distill_sweep.errors import ConfigError


@dataclass(frozen=True)
class Procedure:
    name: str
    run: Callable[[Any], None]
    distils: bool


PROCEDURES: dict[str, Procedure] = {}


def register_procedure(name: str, *, distils: bool) -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
    def deco(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        if name in PROCEDURES:
            raise ValueError(f"procedure {name!r} registered twice")
        PROCEDURES[name] = Procedure(name, fn, distils)
        return fn

    return deco


def procedure_named(name: str) -> Procedure:
    if name not in PROCEDURES:
        raise ConfigError(f"procedure.name={name!r} is not a procedure (known: {', '.join(sorted(PROCEDURES))})")
    return PROCEDURES[name]


from . import finetune, task_specific  # noqa: E402,F401  (import registers the procedures)
