"""What a record says of the environment that ran the job: package versions, the source commit, the time."""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGES = ("distill_sweep", "torch", "transformers", "datasets", "tokenizers", "hydra-core", "omegaconf",
            "submitit", "wandb", "scikit-learn", "scipy", "numpy")


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


