"""The dry run's cost of generation (sweep/cost.py): on-policy jobs' sampled batches and their student forwards, and
the seq_kd stores of the teacher's generations still to make, worked by hand on the toy instructions."""

from __future__ import annotations

import math
from pathlib import Path

from helpers import compose_cfg

from distill_sweep.job.identity import identify
from distill_sweep.sweep.cost import estimate_cost
from distill_sweep.teachers.output_plan import decoder_group, generations_tag, store_root

# toy instructions: 600 examples, the first 64 held out: 536 training sequences, 33 batches of 16 per epoch
BASE = ["logger=none", "procedure=causal_lm", "teacher=tiny_llama", "procedure.data=instructions", "objective=fkl",
        "procedure.epochs=2", "procedure.generation.max_new_tokens=4"]
STEPS = 2 * (536 // 16)


def jobs(tmp_path: Path, *rows: list[str]) -> list:
    return [identify(compose_cfg([*BASE, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c", *r])) for r in rows]


def test_the_dry_run_counts_sampled_batches_and_the_teachers_generations(tmp_path: Path):
    grid = jobs(tmp_path, ["procedure.on_policy=0.5", "seed=1"], ["procedure.on_policy=0.5", "seed=2"],
                ["procedure.on_policy=1", "seed=1"], ["procedure.seq_kd=true", "seed=1"],
                ["procedure.seq_kd=true", "seed=2"], ["seed=1"])
    line = estimate_cost(grid, [], cache_dir=tmp_path / "c")
    sampled = 0.5 * STEPS * 2 + 1.0 * STEPS  # on_policy x steps, per job
    assert f"6 decoder job(s): {6 * STEPS * 16 * 64:.3g} student training tokens" in line
    assert (f"on-policy generation: ~{sampled:.3g} sampled batches in 3 job(s) (on_policy x steps), up to "
            f"{sampled * 4:.3g} student forwards") in line
    # the two seq_kd jobs share one store: 536 prompts in generate calls of 32, up to 4 forwards each
    assert f"1 seq-KD generation store(s) to make: up to {math.ceil(536 / 32) * 4:.3g} teacher forwards" in line
    assert "at most 1 decoder teacher(s) trained first" in line  # seq_kd distils from the same teacher

    # once the store exists, nothing is left to make
    seq_kd = grid[3]
    group = decoder_group(seq_kd.teacher, seq_kd.procedure_settings)
    made = store_root(tmp_path / "c", seq_kd.task) / f"{group}-{generations_tag(4)}-0123456789abcdef"
    made.mkdir(parents=True)
    (made / "meta.json").write_text("{}")
    assert "seq-KD" not in estimate_cost(grid, [], cache_dir=tmp_path / "c")


def test_jobs_that_generate_nothing_add_no_generation_cost(tmp_path: Path):
    line = estimate_cost(jobs(tmp_path, ["seed=1"], ["seed=2"]), [], cache_dir=tmp_path / "c")
    assert "generation" not in line and f"2 decoder job(s): {2 * STEPS * 16 * 64:.3g}" in line
