"""Every rule about records of the first schema, frozen: used only to find and read old records.

Schema 1 (the tool's first release) knew one procedure (task_specific), one student type (truncated) and the
`init` layer map; its objectives carried `projection`, `shared_projection` and `contrast` at their top level and
term weights only, and its student was named by a preset. Two things still need it:
- **reading** a schema-1 record: its objective config in the checked form jobs record today (`objective_from_v1`);
- **finding** one: the config hashes schema 1 gave a job that today's schema can still express
  (`legacy_hashes`; job.identity lists their directories, job.prepare moves an unfinished job's checkpoint from
  one into today's directory).
Nothing here changes when the schema grows: a rule for a later schema's old records goes in its own section.
"""

from __future__ import annotations

from typing import Any

from distill_sweep.records import hashing

# ------------------------------------------------------------------------------------------ reading
# Schema 1 kept these objective settings at the objective's top level; today each term carries its own.
V1_TERM_SETTINGS = {"hid_cls": ("projection", "shared_projection"), "hid_seq": ("projection", "shared_projection")}
V1_CONTRAST_TERM = "hid_cls_contrast"


def objective_from_v1(objective: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 objective config in the checked form jobs record today: every term with its settings
    (schema 1's YAML files held every setting, so nothing needs a default here)."""
    out = {k: v for k, v in objective.items() if k not in ("projection", "shared_projection", "contrast")}
    terms = {}
    for name, weight in (objective.get("terms") or {}).items():
        term: dict[str, Any] = {"weight": weight}
        for key in V1_TERM_SETTINGS.get(name, ()):
            term[key] = objective.get(key)
        if name == V1_CONTRAST_TERM:
            term.update(objective.get("contrast") or {})
        terms[name] = term
    out["terms"] = terms
    return out


# ------------------------------------------------------------------------------------------ finding
V1_CONTRAST = {"dim": 128, "temperature": 0.07, "momentum": 0.5, "num_negatives": 100, "loss": "nce"}
V1_STUDENT_NAMES = {3: ["default"], 6: ["six_layer", "default"]}  # the presets schema 1 named a student by
NEW_TASK_KEYS = {"max_train_samples": None, "max_dev_samples": None, "subset_seed": 0}  # added after schema 1


def legacy_hashes(hashed: dict[str, Any], *, procedure: str, student: str, student_layers: int | None,
                  objective: Any, map_is_init: bool) -> list[str]:
    """Config hashes the first schema gave this same job, when that schema could express it; [] otherwise.

    `hashed`: the job's hashed config today (job.identity); `objective`: its ObjectiveSettings (None for a
    procedure that does not distil); `map_is_init`: whether its layer map is the init's (schema 1's only one).
    """
    if (procedure != "task_specific" or student != "truncated" or objective is None or "batching" in hashed
            or "seeds" in hashed):
        return []  # (schema 1 drew batches uniformly)
    if objective.kd_loss != "kl":
        return []  # schema 1 knew only the KL term
    if not map_is_init or "combined" in objective.stages:
        return []
    task = dict(hashed["task"])
    for key, default in NEW_TASK_KEYS.items():
        if task.pop(key, default) != default:
            return []
    hidden = {(t.projection, t.shared_projection) for n, t in objective.terms.items() if n in ("hid_cls", "hid_seq")}
    if len(hidden) > 1:
        return []
    projection, shared = hidden.pop() if hidden else ("linear", False)
    contrast = objective.terms.get(V1_CONTRAST_TERM)
    v1_objective = {
        "name": objective.name, "stages": list(objective.stages),
        "terms": {n: t.weight for n, t in objective.terms.items()},
        "alpha": objective.alpha, "temperature": objective.temperature, "projection": projection,
        "shared_projection": shared, "reference_compat": objective.reference_compat,
        "contrast": {k: getattr(contrast, k) for k in V1_CONTRAST} if contrast is not None else dict(V1_CONTRAST),
    }
    base = {k: v for k, v in hashed.items() if k not in ("procedure", "map")}
    base.update(task=task, objective=v1_objective)
    return [hashing.digest({**base, "student": {"name": name, "num_layers": student_layers, "hidden_size": None}})
            for name in V1_STUDENT_NAMES.get(student_layers, ["default"])]
