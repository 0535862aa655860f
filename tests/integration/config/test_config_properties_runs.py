"""Tests of the whole config surface, generated from the typed schema itself: the tests that run a job, a command
or processes (its fast tests: tests/unit/config/test_config_properties.py)."""

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
