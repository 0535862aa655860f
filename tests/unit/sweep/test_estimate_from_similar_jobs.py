"""The estimate before a grid runs (sweep/cost.py): where none of the grid's own jobs is completed, the hours come from
the results dir's completed records of the same task and teacher (another objective, init or seed), damaged records
left out; the line says which it used."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import FAST, compose_cfg, write_record

from distill_sweep.job.identity import identify
from distill_sweep.sweep.cost import estimate_cost


def _with_speed(path: Path, speed: float) -> None:
    record = json.loads(path.read_text())
    record["samples_per_s"] = speed
    path.write_text(json.dumps(record))


def test_a_grid_with_no_completed_job_is_estimated_from_the_results_dirs_jobs_of_its_shape(tmp_path: Path) -> None:
    results = tmp_path / "r"
    grid = [identify(compose_cfg([*FAST, "objective=att_mse", f"init={i}", f"results_dir={results}",
                                  f"cache_dir={tmp_path / 'c'}"])) for i in (1, 2)]
    passes = 2 * 2 * 256  # two jobs of two stages (intermediate, prediction), one epoch of FAST's 256 examples each
    line = estimate_cost(grid, [], cache_dir=tmp_path / "c")
    assert "(no completed record yet to convert it to hours)" in line
    # three records of the toy task and the tiny teacher (speeds 100, 300, 200: median 200), one of another teacher,
    # one torn
    for seed, speed in ((1, 100.0), (2, 300.0), (3, 200.0)):
        _with_speed(write_record(results, objective="hid_seq", seed=seed, teacher="tiny"), speed)
    _with_speed(write_record(results, objective="hid_seq", seed=4, teacher="roberta_base"), 1.0)
    torn = write_record(results, objective="vanilla_kd", seed=5, teacher="tiny")
    torn.write_text(torn.read_text()[:40])
    line = estimate_cost(grid, [], cache_dir=tmp_path / "c")
    total = float(line.split("estimated cost: ")[1].split(" training")[0])  # students and the teacher to fine-tune
    assert line.split("(")[1].split(" students")[0] == f"{passes:.3g}"
    assert f"~{total / 200 / 3600:.3g} job-hours at the median 200 samples/s of 3 completed job(s) of the same task " \
           "and teacher" in line
