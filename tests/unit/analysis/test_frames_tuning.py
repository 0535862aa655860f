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
    assert sorted(records["system"]) == ["vanilla_kd [default]", "vanilla_kd [tuned]"]


def test_tuned_and_default_rows_are_named_so_not_by_the_chosen_values(tmp_path: Path) -> None:
    """The study's values differ from the configured ones in the objective and optimizer blocks: the label says
    tuned or default; a setup difference of another kind is still named."""
    for seed in (1, 2):
        write_record(tmp_path, seed=seed, score=0.70)
        tuned = write_record(tmp_path, seed=seed + 10, score=0.80)
        _edit(tuned, seed=seed, tuned={"study": "s", "trial": 0, "values": {"objective.temperature": 3.0}},
              config={**json.loads(tuned.read_text())["config"], "objective": {"temperature": 3.0},
                      "optimizer": {"lr": 1e-3}})
    records = frames.load_records(tmp_path)
    assert sorted(set(records["system"])) == ["vanilla_kd [default]", "vanilla_kd [tuned]"]
    assert records.groupby("system").size().to_dict() == {"vanilla_kd [default]": 2, "vanilla_kd [tuned]": 2}
    longer = write_record(tmp_path, seed=1, score=0.75)
    _edit(longer, config={**json.loads(longer.read_text())["config"], "task": {"max_train_samples": 100}})
    labels = set(frames.load_records(tmp_path)["system"])
    assert len(labels) == 3 and not any("objective" in label or "optimizer" in label for label in labels)
    assert any(label.startswith("vanilla_kd [tuned, task.max_train_samples=None") for label in labels)
    assert any(label.startswith("vanilla_kd [default, task.max_train_samples=100") for label in labels)
    # a key a study may tune (epochs) on a default row: the short tags would merge it, so the long form stands
    _edit(longer, config={**json.loads(longer.read_text())["config"], "epochs": 3})
    assert len(set(frames.load_records(tmp_path)["system"])) == 3
