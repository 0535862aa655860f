"""The student registry: a student is a name plus its own settings, independent of the teacher.

Each student type is declared in its own torch-free students/*_settings.py (its settings dataclass, the one
home of its defaults, its flags, and the module of its code), listed in students/declarations.py, so a job's
student settings are checked before torch is imported. Declaring a type also makes `student=<type>` a config
option holding its settings' defaults (base.register_student): conf/student/ holds only presets. Its code module
(students/<type>.py) gives `describe` (the student's architecture config from its settings and the teacher's
config, without loading any weights, so an objective that needs what the student lacks is refused before
anything is loaded) and `build` (the model, with a fresh classification head). Adding a student is one code
module, one settings module and a line in declarations.py.

A student that reads its own ids instead of the teacher's word pieces (student=bilstm) declares
`has_tokenizer`: its module's `tokenizer` is built from the raw training split, its ids travel in the batch next
to the teacher's (data.STUDENT_IDS columns) and the model names the keys it reads in its `input_keys` attribute.

students/early_exit.py is the student side of procedure=fastbert, not a registered type: FastBERT's exit
branches on the fine-tuned teacher's layers, trained by self-distillation.
"""

# The registry is filled here, by the package that owns the student types: one list declares them all.
from . import declarations  # noqa: F401
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
