"""The procedures: the one list of them, each declared in its own torch-free module.

A `procedures/*_settings.py` holds the procedure's settings dataclass (the one home of its defaults:
`procedure=<name>` composes them, procedures/base.declare) and its declaration (its flags; its code is
procedures/<name>.py, imported when a job first runs or is prepared). Importing it registers the procedure, so a
job's procedure settings are checked before torch is imported.
"""

from __future__ import annotations

from . import (
    causal_lm_settings,
    fastbert_settings,
    finetune_settings,
    ptp_settings,
    task_agnostic_settings,
    task_specific_settings,
)

# Each declares the procedure its name says (tests/unit/procedures/test_procedure_options.py checks it).
MODULES = (task_specific_settings, finetune_settings, fastbert_settings, task_agnostic_settings, causal_lm_settings,
           ptp_settings)
