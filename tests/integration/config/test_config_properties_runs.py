"""Tests of the whole config surface, generated from the typed schema itself.

Every key of every settings dataclass (the top level, the groups, and each group option's own settings: the
procedures, the student types, the objective terms, augmentation, the corpus) is found by walking the
dataclasses, so a new key is covered without touching this file. For each key, plain functions of its type and
range (`wrong_values`, `boundary_values`; nothing is sampled) give:
- one wrong value of each kind its type admits (text or a list for a number, a fraction for an integer, an
  infinity for a float whose range leaves that side open, text or a number for a flag, an unknown option, a
  single value or a wrong item for a list, a list for text) and the nearest value outside each bound of its
  range: the job is refused before anything is loaded, with one line naming the key (the CLI prints that line
  and exits 2: tests/e2e/test_bad_inputs.py);
- the boundary values the range allows: the job is accepted (`prepare`, which reads model configs only).
A boundary value that the job then fails on after minutes of work is what `seed=-1` was: those found are
named cases in tests/e2e/test_bad_inputs.py (round two).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from config_keys import BOUNDED, Key, _job, refusal
from helpers import compose_cfg

STEP_PARTS = ("", "optimizer.", "task.", "teacher.finetune.", "checkpoint.", "guards.")
STEPPED = [(k, v) for k, v in BOUNDED if not k.base and k.path.startswith(STEP_PARTS)
           and not k.path.startswith(("task.augment.", "task.num_labels")) and refusal(k, v) is None]


@pytest.mark.parametrize(("key", "value"), STEPPED, ids=lambda x: str(x))
def test_an_accepted_boundary_value_trains_a_step(key: Key, value: str, tmp_path: Path, shared_cache: Path) -> None:
    """The toy job at the edge of a key's range gets through its set-up and one training step (teacher
    fine-tuning included): a value the schema lets through does not fail later."""
    from distill_sweep.cli.run_job import run_job

    cfg = compose_cfg([*_job(key, value), "max_steps_per_epoch=1", "teacher.finetune.max_steps_per_epoch=1",
                       f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}"])
    record = run_job(cfg)  # accepted: the test above shows it is (every refused boundary case is named there)
    assert record["status"] == "completed", record.get("error")
