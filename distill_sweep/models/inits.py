"""A student's `init`: which teacher layers its layers are copied from (the paper's Table 3 rules, a list).

Config alone, no model: the job's identity (its directory name) and the checks before any import of torch
read it; the student types apply it (students/truncated.py, students/sps.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from distill_sweep.errors import ConfigError

# The paper's Table 3 initialisations, in its order.
PAPER_INITS = {1: "skip", 2: "mixed", 3: "bottom"}
NAMED_INITS = ("skip", "mixed", "bottom", "first", "random", "prune")


@dataclass(frozen=True)
class StudentInit:
    """A resolved `init`: what the user wrote, the rule it names, and the 1-based teacher layers."""

    spec: str
    name: str  # skip | mixed | bottom | random | prune | custom
    layers: list[int]  # teacher layers copied into student layers 1..k (random: [] copied)
    layer_map: list[tuple[int, int]]  # (student layer, teacher layer) pairs the objectives use



def init_spec(spec: Any) -> str:
    """`init` as text: "1", "mixed", or "[1,5,9]" for a list (also accepts the text of a list)."""
    if isinstance(spec, (list, tuple)):
        return "[" + ",".join(str(x).strip() for x in spec) + "]"
    return str(spec).strip().replace(" ", "")


def init_dirname(spec: Any) -> str:
    return "init-" + init_spec(spec).strip("[]").replace(",", "-")


def skip_layers(teacher_layers: int, student_layers: int) -> list[int]:
    """Every (L/k)-th teacher layer, ending at L (rounded half up when k does not divide L)."""
    step = teacher_layers / student_layers
    return [math.floor((i + 1) * step + 0.5) for i in range(student_layers)]


def resolve_init(spec: Any, teacher_layers: int, student_layers: int) -> StudentInit:
    """Turn `init=` (1|2|3, a rule name, or an explicit 1-based list) into teacher layers."""
    if student_layers < 1:
        raise ConfigError(f"student.num_layers must be >= 1, got {student_layers}")
    if student_layers > teacher_layers:
        raise ConfigError(
            f"student.num_layers={student_layers} is deeper than the teacher ({teacher_layers} layers)"
        )
    if isinstance(spec, (list, tuple)):
        layers = [_as_layer(x, teacher_layers) for x in spec]
        if len(layers) != student_layers:
            raise ConfigError(
                f"init={list(spec)} names {len(layers)} teacher layers but the student has "
                f"{student_layers} (student.num_layers)"
            )
        return StudentInit(init_spec(layers), "custom", layers, list(zip(range(1, student_layers + 1), layers)))

    text = init_spec(spec)
    name = PAPER_INITS.get(int(text), None) if text.isdigit() else text
    if name is None or name not in NAMED_INITS:
        raise ConfigError(
            f"init={text!r} is not valid: use 1, 2, 3 (the paper's skip/mixed/bottom), one of "
            f"{', '.join(NAMED_INITS)}, or a list of {student_layers} teacher layers like [1,5,9]"
        )
    skip = skip_layers(teacher_layers, student_layers)
    if name == "skip":
        layers = skip
    elif name == "mixed":
        layers = [1] + skip[1:]
    elif name in ("bottom", "first"):
        name, layers = "bottom", list(range(1, student_layers + 1))
    elif name == "prune":  # chosen by block importance when the job runs (students/prune.py): skip stands in
        layers = skip
    else:  # random: nothing copied but the embeddings; learns from the skip layers (the paper's rule)
        return StudentInit(text, "random", [], list(zip(range(1, student_layers + 1), skip)))
    return StudentInit(text, name, layers, list(zip(range(1, student_layers + 1), layers)))


def _as_layer(x: Any, teacher_layers: int) -> int:
    # int() alone would take 3.5 as layer 3 and `true` as layer 1: only whole numbers are layer numbers
    whole = (isinstance(x, int) or (isinstance(x, float) and x.is_integer())
             or (isinstance(x, str) and x.strip().isdigit()))
    if isinstance(x, bool) or not whole:
        raise ConfigError(f"init list entries must be 1-based layer numbers, got {x!r}")
    layer = int(x)
    if not 1 <= layer <= teacher_layers:
        raise ConfigError(f"init layer {layer} is out of range: the teacher has layers 1..{teacher_layers}")
    return layer
