"""The student types: the one list of them, each declared in its own torch-free module.

A `students/*_settings.py` holds the type's settings dataclass (the one home of its defaults: `student=<type>`
composes them, students/base.register_student) and its declaration (its needs and the module of its code,
students/<type>.py, imported when a job first describes or builds it). Importing it registers the type, so
a job's student settings are checked before torch is imported.
"""

from __future__ import annotations

from . import (
    bilstm_settings,
    distilled_settings,
    fresh_settings,
    pretrained_settings,
    sps_settings,
    truncated_settings,
)

# Each declares the type its name says (tests/unit/students/test_student_options.py checks it).
MODULES = (bilstm_settings, distilled_settings, fresh_settings, pretrained_settings, sps_settings, truncated_settings)
