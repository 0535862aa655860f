"""Whether a SLURM launcher can reach its cluster, asked once before anything is submitted.

Without the check, a host that reaches no controller fails at the first `sbatch`, and sbatch writes its own
error lines to the terminal (submitit does not capture them) above the sweep's one line. `scontrol ping`, its
output captured, asks the same question before any job or store build is submitted.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

PING_TIMEOUT_S = 60


def launcher_executor(launcher: Any) -> str | None:
    """"slurm" for Hydra's submitit SLURM launcher ("local" for its local one), None for other launchers."""
    return getattr(launcher, "_EXECUTOR", None)


def unreachable_cluster(launcher: Any) -> str | None:
    """Why the SLURM cluster cannot be reached (scontrol's most telling line), or None: reachable, not a SLURM
    launcher, or no `scontrol` on PATH (then sbatch itself answers)."""
    if launcher_executor(launcher) != "slurm" or shutil.which("scontrol") is None:
        return None
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=PING_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"scontrol ping: no answer in {PING_TIMEOUT_S} s"
    if ping.returncode == 0:
        return None
    lines = [line.strip() for line in (ping.stderr + "\n" + ping.stdout).splitlines() if line.strip()]
    telling = [line for line in lines if "fatal" in line or "DOWN" in line] or lines
    return telling[-1] if telling else f"scontrol ping exited {ping.returncode}"
