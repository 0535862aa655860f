"""A record in flat form: nested keys as dotted names, and the labels a tracker's run of the job carries.

The one flattening of a record's nested blocks (its config above all) that the export's tables
(`distill_sweep.export`) and the trackers' params and tags (training/run_log.py) share, so that a column of the
export and a param of an MLflow or Trackio run have the same name: `optimizer.lr`, `teacher.finetune.epochs`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from distill_sweep.records.record import Record

# the config's sources of variance (config/seeds.py's SOURCES): a record from before the `seeds` block used its seed
# for every one of them
SEED_SOURCES = ("init", "data_order", "dropout", "sampling")


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of nested mappings under its dotted name (`{"a": {"b": 1}}` -> `{"a.b": 1}`); lists and other
    values are leaves. An empty mapping is a leaf of its own name (it says the block was there, empty)."""
    if isinstance(value, Mapping) and (value or not prefix):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: value}


def as_text(value: Any) -> str:
    """A leaf as a tracker's param or tag holds it: strings as they are, the rest as JSON (`null`, `[4, 8]`)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def seed_sources(record: Record) -> dict[str, int]:
    """The seed of each source of variance the job ran with: its `seeds` block, or its seed for a source the block
    does not state (records from before the block)."""
    given = record.seeds or {}
    return {s: given[s] if isinstance(given.get(s), int) else record.seed for s in SEED_SOURCES}


def run_labels(record: Record) -> dict[str, str]:
    """What a job's tracker run is labelled with (MLflow's tags; in Trackio's config): the config hash, the job's
    coordinates, the seed of every source, its pack and its tuning (a trial, or the study's choice it ran at), the
    code's commit and the versions of the main packages."""
    labels = {"config_hash": record.config_hash, "task": record.task, "procedure": record.procedure,
              "objective": record.objective, "init": record.init.spec, "seed": str(record.seed),
              "git_commit": as_text(record.git_commit)}
    labels.update({f"versions.{k}": as_text(v) for k, v in record.versions.items()})
    labels.update({f"seeds.{source}": str(seed) for source, seed in seed_sources(record).items()})
    if record.pack is not None:
        labels["pack"] = as_text(record.pack)
    if record.tune_trial is not None:
        labels.update({f"tune_trial.{k}": as_text(v) for k, v in vars(record.tune_trial).items()})
    if record.tuned is not None:
        labels.update({f"tuned.{k}": as_text(v) for k, v in flatten(record.tuned).items()})
    return labels
