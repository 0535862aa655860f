"""The layer mapping: which teacher layer each student layer learns from (`map=`), separate from `init`.

  init      each student layer learns from the teacher layer it was copied from (the paper's rule;
            a student copied from no layer uses `skip`)
  skip      every (L/k)-th teacher layer, ending at L (models.skip_layers)
  last      the last k teacher layers, L-k+1..L (PKD-Last)
  uniform   student layer i <-> teacher layer floor(i * L / k) (TinyBERT)
  top       only the last student layer <-> the last teacher layer
  [4,8,12]  an explicit list: one 1-based teacher layer per student layer
  [[1,4],[3,12]]  explicit (student layer, teacher layer) pairs
"""

from __future__ import annotations

from typing import Any

from distill_sweep.errors import ConfigError
from distill_sweep.models.inits import StudentInit, skip_layers

MAP_RULES = ("init", "skip", "last", "uniform", "top")


def map_spec(spec: Any) -> str:
    """`map` as text, for records and directory names."""
    if isinstance(spec, (list, tuple)):
        return "[" + ",".join(map_spec(x) for x in spec) + "]"
    return str(spec).strip().replace(" ", "")


def resolve_map(spec: Any, init: StudentInit, teacher_layers: int, student_layers: int) -> list[tuple[int, int]]:
    """(student layer, teacher layer) pairs, 1-based, for `map=spec`."""
    k, n = student_layers, teacher_layers
    if isinstance(spec, (list, tuple)):
        return _explicit(list(spec), n, k)
    rule = map_spec(spec)
    if rule == "init":
        return list(init.layer_map)
    if rule == "skip":
        layers = skip_layers(n, k)
    elif rule == "last":
        layers = list(range(n - k + 1, n + 1))
    elif rule == "uniform":
        layers = [max(1, (i * n) // k) for i in range(1, k + 1)]
    elif rule == "top":
        return [(k, n)]
    else:
        raise ConfigError(f"map={rule!r} is not valid: use one of {', '.join(MAP_RULES)}, a list of {k} "
                          "teacher layers like [4,8,12], or (student, teacher) pairs like [[1,4],[3,12]]")
    return list(zip(range(1, k + 1), layers))


def _layer(x: Any, top: int, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int) and not (isinstance(x, str) and x.strip().isdigit()):
        raise ConfigError(f"map entries must be 1-based layer numbers, got {x!r}")
    layer = int(x)
    if not 1 <= layer <= top:
        raise ConfigError(f"map: {what} layer {layer} is out of range 1..{top}")
    return layer


def _explicit(items: list[Any], n: int, k: int) -> list[tuple[int, int]]:
    if not items:
        raise ConfigError("map=[] names no layers")
    if all(isinstance(x, (list, tuple)) for x in items):
        pairs = []
        for pair in items:
            if len(pair) != 2:
                raise ConfigError(f"map pairs must be [student layer, teacher layer], got {list(pair)}")
            pairs.append((_layer(pair[0], k, "student"), _layer(pair[1], n, "teacher")))
        if len({s for s, _ in pairs}) != len(pairs):
            raise ConfigError(f"map={[list(p) for p in pairs]} pairs a student layer twice")
        return pairs
    if len(items) != k:
        raise ConfigError(f"map={items} names {len(items)} teacher layers but the student has {k}")
    return list(zip(range(1, k + 1), (_layer(x, n, "teacher") for x in items)))
