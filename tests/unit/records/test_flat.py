"""A record in flat form: dotted names for nested keys, and the labels of a tracker's run (seeds, pack, tuning)."""

from __future__ import annotations

from distill_sweep.records.blocks import TuneTrial
from distill_sweep.records.flat import as_text, flatten, run_labels
from distill_sweep.records.record import Record


def test_nested_keys_get_dotted_names_and_lists_stay_leaves() -> None:
    assert flatten({"optimizer": {"lr": 1e-4, "betas": [0.9, 0.98]}, "task": {"recipe": {}}, "seed": 1}) == \
        {"optimizer.lr": 1e-4, "optimizer.betas": [0.9, 0.98], "task.recipe": {}, "seed": 1}
    assert flatten({}) == {}
    assert [as_text(v) for v in ("x", None, [4, 8], 0.5, True)] == ["x", "null", "[4, 8]", "0.5", "true"]


def test_labels_name_every_seed_source_the_pack_and_the_tuning() -> None:
    record = Record(task="toy", objective="vanilla_kd", seed=2, config_hash="abc", pack="pack-1",
                    seeds={"init": 2, "data_order": 5, "dropout": 2, "sampling": 2, "own": ["data_order"]},
                    tune_trial=TuneTrial(number=3, holdout=0.1, seed=0, holdout_size=25),
                    tuned={"chosen": {"optimizer": {"lr": 3e-4}}}, git_commit="abc123", versions={"torch": "2.13"})
    labels = run_labels(record)
    assert labels["config_hash"] == "abc" and labels["pack"] == "pack-1" and labels["seed"] == "2"
    assert [labels[f"seeds.{s}"] for s in ("init", "data_order", "dropout", "sampling")] == ["2", "5", "2", "2"]
    assert labels["tune_trial.number"] == "3" and labels["tune_trial.holdout"] == "0.1"
    assert labels["tuned.chosen.optimizer.lr"] == "0.0003"
    assert labels["git_commit"] == "abc123" and labels["versions.torch"] == "2.13"
    assert all(isinstance(v, str) for v in labels.values())
    old = run_labels(Record(task="toy", objective="vanilla_kd", seed=4))  # before the seeds block: the seed
    assert {old[f"seeds.{s}"] for s in ("init", "data_order", "dropout", "sampling")} == {"4"}
    assert "pack" not in old and not any(k.startswith(("tune_trial", "tuned")) for k in old)
    assert old["git_commit"] == "null"  # (a record written outside a git checkout)
