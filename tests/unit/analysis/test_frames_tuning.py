"""The report's reading of a tuned sweep's store (analysis/frames.py): trial records are left out (they are scored
on a holdout of the training split), and a tuned grid job is another row than the configured values'."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import write_record

from distill_sweep.analysis import frames


def _edit(path: Path, **keys) -> None:
    data = json.loads(path.read_text())
    data.update(keys)
    path.write_text(json.dumps(data))


def test_trials_are_not_results_and_tuned_rows_stand_apart(tmp_path: Path) -> None:
    write_record(tmp_path, seed=1, score=0.70)  # the configured values
    tuned = write_record(tmp_path, seed=2, score=0.80)
    _edit(tuned, seed=1, tuned={"study": "toy-vanilla_kd", "trial": 3, "values": {"objective.temperature": 3.0}})
    trial = write_record(tmp_path, seed=3, score=0.99)
    _edit(trial, seed=1, tune_trial={"number": 0, "holdout": 0.1, "seed": 0, "holdout_size": 25})
    records = frames.load_records(tmp_path)
    assert len(records) == 2 and 0.99 not in set(records["primary"])
    assert sorted(records["system"]) == ["vanilla_kd [tuned=None]", "vanilla_kd [tuned=True]"]
