"""Reading schema-1 records: their objective config in the checked form jobs record today."""

from __future__ import annotations

from typing import Any

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


