"""Parts declared by name before their code is loaded.

A registry entry (a procedure, a student type, a loss term) says, without importing torch, what the config
checks need: its settings dataclass and its flags. Its code is named by `target`, "module:attribute", and
imported when a job first uses it. So `python -m distill_sweep objective.alpha=7` is refused in a fraction of
a second instead of after the seconds torch and transformers take to import (tests/e2e/test_pipeline.py's
before-torch test; each package's declarations are tested in tests/unit/*/test_*_declarations.py).
"""

from __future__ import annotations

import importlib
from typing import Any


def load(target: str) -> Any:
    """The object `target` ("package.module:attribute") names, its module imported if it was not yet."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def find(target: str) -> Any | None:
    """As `load`, or None where the module has no such attribute (an optional hook)."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute, None)


def add(registry: dict[str, Any], name: str, entry: Any, kind: str) -> None:
    """`entry` under `name` in `registry`; a name declared twice is a programming error, refused."""
    if name in registry:
        raise ValueError(f"{kind} {name!r} declared twice")
    registry[name] = entry
