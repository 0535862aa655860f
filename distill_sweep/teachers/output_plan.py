"""Whether a job reads its teacher's outputs from the store, and where the store is (config alone, no torch).

The sweeper plans the store builds with these before launching, and job.identify refuses
`teacher_outputs=store` where the store would be wrong; teacher_outputs.py builds and reads the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distill_sweep.objectives import TERMS
from distill_sweep.records.record import part_id
from distill_sweep.teachers.cache import TeacherSpec

META = "meta.json"  # a finished store's description, written last


@dataclass(frozen=True)
class Plan:
    """Whether a job reads the teacher's logits from the store, and if not, why."""

    use_store: bool
    reason: str | None  # why not (None when it does)


def plan(setting: str, procedure: Any, objective: Any) -> Plan:
    """`setting`: the job's `teacher_outputs`. The store is exact for procedures that distil from a frozen
    teacher fine-tuned on the task's fixed training split, in stages that read its logits."""
    if setting == "live":
        return Plan(False, "teacher_outputs=live")
    if not procedure.stores_teacher_outputs:
        return Plan(False, f"procedure={procedure.name} does not distil from a frozen task teacher's logits "
                           "on a fixed training split")
    if objective is None or not {"prediction", "combined"} & set(objective.stages):
        return Plan(False, "no stage of the objective reads the teacher's logits")
    return Plan(True, None)


def stored_cls_layers(objective: Any, layer_map: Any) -> list[int]:
    """Teacher layers whose [CLS] states the store also holds for this job (0 = embeddings): those of the
    mapped layers when every term of the objective reads only [CLS] states (Hid-CLS, its contrastive form,
    PKD); then no stage runs the teacher at all. [] when a term reads more (whole sequences, q/k/v)."""
    if objective is None or not objective.terms or not layer_map:
        return []
    if not all(TERMS[name].cls_only for name in objective.terms):
        return []
    return sorted({0, *(int(t) for _, t in layer_map)})


def feature_tag(cls_layers: list[int]) -> str:
    return "logits" if not cls_layers else "logits-cls" + "-".join(map(str, cls_layers))


def group_id(teacher: TeacherSpec) -> str:
    """The store's teacher and data as the config names them (no weights read): stores built from the same
    config share this prefix, so the sweeper can tell which tasks already have one before launching."""
    return part_id({"teacher": teacher.key, "finetuned_path": teacher.settings.finetuned_path})


def prepared(teacher: TeacherSpec, task: str, cache_dir: Path, cls_layers: list[int] | None = None) -> bool:
    """A finished store exists for this teacher and task data with these features (the sweeper skips its
    build job)."""
    where = store_root(cache_dir, task)
    return any(where.glob(f"{group_id(teacher)}-{feature_tag(cls_layers or [])}-*/{META}"))


def store_root(cache_dir: Path, task: str) -> Path:
    return Path(cache_dir) / "teacher_outputs" / task
