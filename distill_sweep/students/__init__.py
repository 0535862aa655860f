"""The student registry: a student is a name plus its own settings, independent of the teacher.

Each student type is one module here registering a `StudentType`: its settings dataclass, `describe`
(the student"s architecture config from its settings and the teacher"s config, without loading any
weights, so an objective that needs what the student lacks is refused before anything is loaded) and
`build` (the model, with a fresh classification head). Adding a student is one module + one YAML.

A student that reads its own ids instead of the teacher"s word pieces (student=bilstm) declares
`tokenizer`: built from the raw training split, its ids travel in the batch next to the teacher"s
(data.STUDENT_IDS columns) and the model names the keys it reads in its `input_keys` attribute.
"""

# The registry is filled here, by the package that owns the student types: each module registers itself.
from . import bilstm, distilled, fresh, pretrained, sps, truncated  # noqa: F401
from .base import (
    QKV_MODEL_TYPES,
    STUDENTS,
    BuildInputs,
    StudentType,
    model_info,
    register_student,
    student_type,
)

__all__ = ["QKV_MODEL_TYPES", "STUDENTS", "BuildInputs", "StudentType", "model_info", "register_student", "student_type"]
