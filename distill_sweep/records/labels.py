"""How a job is named wherever the tool prints one: the sweep's progress lines, `status`, `report.compare` and the
report's lists of runs all say `toy/vanilla_kd init-1 seed 1 (seeds.data_order=2)`, from the job's identity or from
its record, by these functions.

A label names every seed source that makes the job another one (two jobs that differ only in `seeds.data_order`
print two labels), and a job that distils nothing (procedure finetune) is `NO_KD` everywhere: in labels, and as the
report's row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distill_sweep.config.seeds import SOURCES, JobSeeds, hashed_seeds

NO_KD = "no KD (fine-tuning)"  # procedure=finetune: the student trained on the labels alone
# procedure=finetune of a student distilled earlier in the sweep (student=distilled: a `finetune_grid`'s jobs)
FINETUNE_DISTILLED = "fine-tuning of a distilled student"


def distillation(procedure: str, objective: str | None, student: str | None = None) -> str:
    """What a job distils with: its objective; `NO_KD` for procedure finetune (`FINETUNE_DISTILLED` where the
    student was distilled before); the procedure's name where it has no objective (fastbert distils from the model
    it trains)."""
    if procedure == "finetune":
        return FINETUNE_DISTILLED if student == "distilled" else NO_KD
    if objective in (None, "", "none"):
        return procedure
    return str(objective)


def recorded_seeds(seed: int, block: Mapping[str, Any] | None) -> JobSeeds:
    """The seeds a record states: its `seeds` block (read by `Record.from_dict`, which refuses damaged ones), or the
    master seed for every source (records from before the block). A block without `own` (hand-written) counts the
    sources whose seed is not the master's as set on their own."""
    given = dict(block or {})
    values = {s: given[s] if isinstance(given.get(s), int) and not isinstance(given[s], bool) else seed
              for s in SOURCES}
    own = given.get("own")
    named = tuple(s for s in SOURCES if s in own) if isinstance(own, list) else \
        tuple(s for s in SOURCES if values[s] != seed)
    return JobSeeds(**values, own=named)


def seed_text(seed: int, seeds: JobSeeds | None = None) -> str:
    """`seed 1`, and the sources set on their own that make it another job than the master seed alone would:
    `seed 1 (seeds.data_order=2)` (the config hash's rule, config/seeds.hashed_seeds: a data order or sampling seed
    equal to the master seed is the same job)."""
    own = hashed_seeds(seed, {s: getattr(seeds, s) for s in seeds.own}) if seeds is not None else {}
    return f"seed {seed}" + (f" ({', '.join(f'seeds.{s}={v}' for s, v in own.items())})" if own else "")


def job_label(task: str, procedure: str, objective: str | None, init_label: str, seed: int,
              seeds: JobSeeds | None = None, student: str | None = None) -> str:
    """`toy/vanilla_kd init-1 seed 1`, with every seed source that tells the job apart (see `seed_text`)."""
    return f"{task}/{distillation(procedure, objective, student)} {init_label} {seed_text(seed, seeds)}"


def record_label(record: Mapping[str, Any]) -> str:
    """`job_label` of a record as read from result.json (any JSON object: a damaged field reads as it is)."""
    init = record.get("init")
    spec = init.get("spec") if isinstance(init, dict) else init
    # the job directory's init part (models/inits.init_dirname, which this layer cannot import): 1, skip, 1-5-9
    text = "" if spec is None else str(spec).replace(" ", "").strip("[]").replace(",", "-")
    init_label = f"init-{text or 'none'}"
    seed, block, objective = record.get("seed"), record.get("seeds"), record.get("objective")
    objective = objective if isinstance(objective, str) else None
    procedure = str(record.get("procedure") or "task_specific")  # (version 1 records name none)
    student = record["student"].get("name") if isinstance(record.get("student"), dict) else None
    if not isinstance(seed, int) or isinstance(seed, bool):
        return (f"{record.get('task')}/{distillation(procedure, objective, student)} {init_label} "
                f"seed {seed!r}")
    seeds = recorded_seeds(seed, block if isinstance(block, dict) else None)
    return job_label(str(record.get("task")), procedure, objective, init_label, seed, seeds, student)
