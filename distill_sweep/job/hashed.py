"""What of a job's typed config makes it the job it is: its hashed config, whose digest names its record's directory.

Each part says what of it is hashed in its fields' metadata (config/parse.py's `hashed_form`: each key's kind,
`UNHASHED_AT_DEFAULT`, `unhashed_at`). The rules that metadata cannot say, because whether a setting counts
depends on another part or on the rest of its block, are here and nowhere else:

- a procedure's data: the task is hashed only where the procedure reads it, the corpus only where it reads one;
- a procedure that trains no student ignores the student, `init` and `map`; one that does not distil ignores
  the objective; a procedure's own settings the objective gives nothing to read (`ProcedureSettings.unread_keys`)
  are left out;
- the layer map counts only where an intermediate term reads it (else `init`, as it was hashed before);
- `seeds`: the sources set on their own (config/seeds.hashed_seeds), the sampling seed only where the procedure
  draws samples from the student;
- `tune`: only while tuning is on (trials > 0), which the metadata leaves out of it (its trial count);
- `task.augment`: none is left out (the jobs from before the key); a method alone is its name, otherwise its method
  and the settings not at their default (as configs wrote it);
- `teacher.engine`: only where a vLLM engine does some of the job's work (its numbers differ from transformers'
  within a tolerance: another job);
- `procedure.lm_eval`: with its tasks, how the stage draws its responses (`LM_EVAL_DRAWS`: the jobs scored before
  the draws stopped depending on the eval batch size are other jobs).

The parts hashed from their config as composed before they were typed (run, optimizer, task, teacher, procedure,
corpus) keep their numbers as written (`hashed_form`'s `written_numbers`), the student and the objective their typed
values: so every config hash of earlier versions is still the job's. The hashes of the first schema are
records/legacy.py's.
"""

from __future__ import annotations

from typing import Any

from distill_sweep.config.parse import hashed_form
from distill_sweep.config.seeds import hashed_seeds
from distill_sweep.data.augment_settings import AugmentSettings
from distill_sweep.job.config import JobConfig
from distill_sweep.models.layer_map import map_spec
from distill_sweep.procedures.causal_lm_settings import LM_EVAL_DRAWS
from distill_sweep.teachers.engine import HF, unused_reason


def hashed_config(job: JobConfig) -> dict[str, Any]:
    """The job's hashed config: its top-level settings, and each part it reads in its hashed form."""
    settings, procedure, procedure_settings = job.settings, job.procedure, job.procedure_settings
    hashed = hashed_form(settings.run)  # the top-level keys
    hashed["optimizer"] = hashed_form(settings.optimizer)
    hashed["teacher"] = teacher_form(job)
    unread = procedure_settings.unread_keys(job.objective)
    hashed["procedure"] = {k: v for k, v in hashed_form(procedure_settings).items() if k not in unread}
    if isinstance(hashed["procedure"].get("lm_eval"), dict):  # an lm-eval stage: how its responses are drawn
        hashed["procedure"]["lm_eval"]["draws"] = LM_EVAL_DRAWS
    if procedure_settings.reads_task:
        hashed["task"] = task_form(job)
    if procedure_settings.reads_corpus():
        hashed["corpus"] = hashed_form(procedure_settings.corpus)  # parsed by its own_task
    if procedure.uses_student:
        hashed["student"] = hashed_form(job.student, written_numbers=False)
        if job.objective is None or not job.objective.terms:
            hashed["map"] = "init"  # no intermediate term reads the layer map: it does not make another job
    else:
        for key in ("init", "map"):
            hashed.pop(key)
    if job.objective is not None:
        hashed["objective"] = hashed_form(job.objective, written_numbers=False)
    seeds = hashed_seeds(settings.run.seed, hashed.pop("seeds"))
    if not samples(procedure_settings):
        seeds.pop("sampling", None)  # a job that draws no samples: the same job whatever its sampling seed
    if seeds:  # none set on their own (the default): left out, the hash of before the key
        hashed["seeds"] = seeds
    tune = hashed.pop("tune")
    if settings.run.tune.trials > 0:
        hashed["tune"] = tune
    return hashed


def task_form(job: JobConfig) -> dict[str, Any]:
    """The task as configured (the one a procedure that reads no task describes is not: it reads the corpus)."""
    task = job.configured_task
    out = hashed_form(task)
    augment = task.augment
    if not isinstance(augment, AugmentSettings):  # a task built in code, its augment never parsed
        return out if augment not in ("none", None) else {k: v for k, v in out.items() if k != "augment"}
    out.pop("augment")
    if augment.name != "none":
        out["augment"] = augment_form(augment)
    return out


def augment_form(augment: AugmentSettings) -> Any:
    """`task.augment` as a config writes it: the method's name, or the method and its settings not at default."""
    form, defaults = hashed_form(augment), hashed_form(AugmentSettings(name=augment.name))
    changed = {k: v for k, v in form.items() if k == "name" or v != defaults[k]}
    return augment.name if len(changed) == 1 else changed


def teacher_form(job: JobConfig) -> dict[str, Any]:
    """The teacher block, its engine only where one other than transformers' does some of the job's work."""
    teacher = job.settings.teacher
    out = hashed_form(teacher)
    if teacher.engine == HF or unused_reason(job.procedure.name, job.procedure_settings) is not None:
        out.pop("engine")  # transformers' (the default, the jobs hashed before the key) or an engine nothing uses
    return out


def samples(procedure_settings: Any) -> bool:
    """Whether the procedure draws samples from the student (the `sampling` seed's stream)."""
    generates = getattr(procedure_settings, "generates", None)
    return bool(generates()) if callable(generates) else False


def map_is_init(hashed: dict[str, Any]) -> bool:
    """Whether the hashed config's layer map is the init's (the first schema's only one: records/legacy.py)."""
    return map_spec(hashed.get("map", "init")) == "init"


__all__ = ["augment_form", "hashed_config", "map_is_init", "samples", "task_form", "teacher_form"]
