"""The result store: one directory and one `result.json` per job.

Layout: `<results_dir>/<task>/<objective>/init-<spec>/seed-<seed>/<config_hash[:10]>/result.json`,
next to the job's checkpoint. The record is the only interface to the report layer; its schema
(version 1) is documented in the README ("Result records"). Metric values are fractions.

The config hash covers the resolved config minus settings that do not change the experiment
(where results and caches live, logging, device, evaluation batch size): re-launching a sweep
finds a completed record by this hash and skips the job.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

SCHEMA_VERSION = 1
RECORD = "result.json"
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
    "checkpoint",
    "guards",
    "hydra",
)
PACKAGES = ("distill_sweep", "torch", "transformers", "datasets", "tokenizers", "hydra-core", "omegaconf",
            "submitit", "wandb", "scikit-learn", "scipy", "numpy")


def hashed_config(cfg: DictConfig) -> dict[str, Any]:
    # Drop the unhashed keys BEFORE resolving: the `hydra` node holds values (hydra.job.num) that only
    # exist inside a running job, and the sweeper hashes configs before launching them.
    out: dict[str, Any] = {}
    for key in cfg:
        if key in NOT_HASHED:
            continue
        node = cfg[key]
        out[str(key)] = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    return out


def config_hash(cfg: DictConfig) -> str:
    blob = json.dumps(hashed_config(cfg), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def job_dir(results_dir: Path, cfg: DictConfig, init_dirname: str, digest: str) -> Path:
    return (
        Path(results_dir) / str(cfg.task.name) / str(cfg.objective.name) / init_dirname
        / f"seed-{cfg.seed}" / digest[:10]
    )


def write_json_atomic(path: Path, data: Any) -> None:
    """Write to a temp file in the same directory, fsync, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_record(path: Path) -> dict[str, Any] | None:
    """The record at `path`, or None if absent or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def completed_record(directory: Path) -> dict[str, Any] | None:
    """The job's record if it completed, else None (read once: the sweeper also needs its contents)."""
    record = read_record(Path(directory) / RECORD)
    return record if record is not None and record.get("status") == "completed" else None


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def git_commit() -> str | None:
    """The commit of the source tree this package runs from (None outside a git checkout)."""
    source = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, timeout=5,
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")
