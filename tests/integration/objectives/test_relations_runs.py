"""MiniLMv2 relations (`rel_kl`): the tests that run a job, a command or processes (its fast tests:
tests/unit/objectives/test_relations.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import FAST, compose_cfg

from distill_sweep.cli.run_job import run_job

pytestmark = pytest.mark.usefixtures("one_thread")


def test_rel_kl_job_on_the_toy_task_with_other_heads_and_width(tmp_path: Path, shared_cache: Path) -> None:
    """experiment=relations: a 32-wide 2-head student learns from the 64-wide 4-head teacher's last layer."""
    cfg = compose_cfg([*FAST, "experiment=relations", "max_steps_per_epoch=3", f"results_dir={tmp_path}",
                       f"cache_dir={shared_cache}"])
    record = run_job(cfg)
    assert record["status"] == "completed" and record["objective"] == "rel_kl"
    assert (record["student"]["hidden_size"], record["student"]["num_heads"]) == (32, 2)
    assert record["teacher"]["hidden_size"] == 64 and record["student"]["layer_map"] == [[3, 6]]
    inter = record["epochs"][0]
    assert inter["stage"] == "intermediate" and math.isfinite(inter["loss_rel_kl"]) and inter["loss_rel_kl"] > 0
    assert record["config"]["objective"]["terms"]["rel_kl"] == {"weight": 1.0, "relation_heads": 4,
                                                                "relations": ["qq", "kk", "vv"]}
