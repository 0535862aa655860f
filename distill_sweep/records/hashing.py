"""Config hashes and job directories: what of a config makes a job what it is, its digest, and where its record
lives (`<results_dir>/<task>/<objective>/init-<spec>/seed-<seed>/<config_hash[:10]>/`).

The config hash covers the resolved config minus settings that do not change the experiment (where results and
caches live, logging, device, evaluation batch size): re-launching a sweep finds a completed record by this hash
and skips the job."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Top-level keys that do not change what a job computes.
NOT_HASHED = (
    "results_dir",
    "cache_dir",
    "logger",
    "device",
    "eval_batch_size",
    "num_workers",
    "threads",
    "log_every",
    "dry_run",
    "dry_run_list",
    "plan_seeds",
    "prepare_only",
    "finetune_grid",  # the jobs a sweep runs after this one, not this job
    "teacher_outputs",  # store or live: the same numbers (to float tolerance, tested); the record says which
    "checkpoint",
    "fsdp",  # how a sharded job holds its teacher: the same numbers (the teacher's forward, gathered or not)
    "guards",
    "pack",  # a pack's members compute what they would alone (bit-identical, tested)
    "pack_size",
    "pack_file",
    "tune_chosen",  # where the tuned values came from: the values themselves are in the config
    "hydra",
)


def hashed_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a plain config (job.plain_config) that make a job what it is."""
    return {str(k): v for k, v in config.items() if k not in NOT_HASHED}


def digest(data: Any) -> str:
    """sha256 of a JSON-able value, keys sorted (the config hash of a job's hashed config)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


HASH_CHARS = 10  # of a config hash in a job's directory name


def job_dir(results_dir: Path, task: str, part: str, init_label: str, seed: int, config_digest: str) -> Path:
    """`<results_dir>/<task>/<objective or procedure>/<init>/seed-<seed>/<hash10>`."""
    return Path(results_dir) / task / part / init_label / f"seed-{seed}" / config_digest[:HASH_CHARS]


def job_dirs_of(results_dir: Path, config_digest: str) -> list[Path]:
    """The job directories of `job_dir`'s layout named by this config hash (or its first HASH_CHARS+ chars)."""
    return sorted(Path(results_dir).glob(f"*/*/*/seed-*/{config_digest[:HASH_CHARS]}"))


