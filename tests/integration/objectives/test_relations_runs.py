"""MiniLMv2 relations (`rel_kl`): hand-worked values, MiniLMv2's per-example normalisation, other head counts
and widths, the plain formula's value and gradient, bad relation heads refused before any work, a toy job.

Every expected number is worked from the formula in the test: relation head a of a (S, width) projection X is
its columns a*d_r .. (a+1)*d_r - 1 (d_r = width / A_r), R = softmax(X_a X_a^T / sqrt(d_r)) over the real keys,
L = (1/B) sum_b 1/(A_r n_b) sum_{a, real rows} KL(R_T || R_S), summed over relations and layer pairs.
"""

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
