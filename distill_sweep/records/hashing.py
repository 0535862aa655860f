"""Config hashes and job directories: what of a config makes a job what it is, its digest, and where its record
lives (`<results_dir>/<task>/<objective>/init-<spec>/seed-<seed>/<config_hash[:10]>/`).

The config hash is the digest of a job's hashed config (job/hashed.py: its typed settings less those that do not
change the experiment, such as where results and caches live, logging, device, evaluation batch size, each marked
on its field): re-launching a sweep finds a completed record by this hash and skips the job."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


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


