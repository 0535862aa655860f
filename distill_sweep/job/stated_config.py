"""A teacher's architecture as its config states it, read as JSON: no transformers, so no torch.

job.identify checks the init, the layer map and the sequence length against these numbers before the training
code is imported. Only what the file (or `teacher.config`) states is used: a config class fills the rest with its
defaults (config.json is often saved as a diff against them), which only transformers knows, so a number not
stated here is checked later, from transformers' config (prepare.py), as is everything for a hub id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distill_sweep.config.schema import TeacherSettings

# the keys a depth goes by (GPT-2's config calls it n_layer; transformers maps num_hidden_layers onto it)
DEPTH_KEYS = ("num_hidden_layers", "n_layer")


def stated_teacher_config(teacher: TeacherSettings) -> dict[str, Any] | None:
    """The teacher's config as stated: the config.json of `finetuned_path` or of a local `name_or_path` (the
    same precedence as models.teacher_config), or `teacher.config`; None for a hub id, an ensemble, or a file
    that cannot be read as JSON (prepare.py then says what is wrong with it)."""
    if teacher.ensemble:
        return None
    source = teacher.finetuned_path or teacher.name_or_path
    if source is None:
        return dict(teacher.config or {})
    file = Path(source).expanduser() / "config.json"
    try:
        stated = json.loads(file.read_text())
    except (OSError, ValueError):
        return None
    return stated if isinstance(stated, dict) else None


def stated_int(config: dict[str, Any], *keys: str) -> int | None:
    """The first of `keys` the config states as a positive whole number, else None."""
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    return None
