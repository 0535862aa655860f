"""Training checkpoints (atomic, loaded with weights_only=True) and SLURM preemption handling.

A checkpoint holds everything needed to continue a job bit-for-bit on the same device: student,
objective (projections, memory bank), optimizer, scheduler, RNG states, position (stage, epoch,
step within epoch), partial epoch sums, and the record's epoch history.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import torch

log = logging.getLogger(__name__)
CHECKPOINT = "checkpoint.pt"


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """torch.save to a temp file in the same directory, then rename over the old checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path, config_hash: str) -> dict[str, Any] | None:
    """The checkpoint at `path` if it belongs to this config, else None (never executes pickled code)."""
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state.get("config_hash") != config_hash:
        log.warning("ignoring checkpoint %s: it belongs to another config", path)
        return None
    return state


def rng_state() -> dict[str, Any]:
    # numpy's and Python's states are converted to tensors/lists: weights_only loading accepts only those.
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "python": [list(random.getstate()[1]), random.getstate()[0], random.getstate()[2]],
        "numpy": [torch.from_numpy(np_state[1].astype(np.int64)), int(np_state[2]), int(np_state[3]),
                  float(np_state[4])],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    internal, version, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state(("MT19937", keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class PreemptionSignal:
    """Defers SLURM's preemption/timeout signal (USR2 under submitit) to the next step boundary.

    submitit's handler requeues the job and exits at once, mid-step. We note the signal instead,
    let the training loop save a checkpoint at the end of the current step, then hand the signal
    to submitit's handler, which requeues; the requeued job resumes from that checkpoint.
    """

    def __init__(self, signum: int = signal.SIGUSR2) -> None:
        self.signum = signum
        self.received: tuple[int, FrameType | None] | None = None
        self._previous: Any = None

    def __enter__(self) -> PreemptionSignal:
        try:
            self._previous = signal.signal(self.signum, self._note)
        except ValueError:  # not the main thread: nothing to defer
            self._previous = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(self.signum, self._previous)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        log.warning("received signal %d: checkpointing at the end of this step", signum)
        self.received = (signum, frame)

    @property
    def requested(self) -> bool:
        return self.received is not None

    def forward(self) -> None:
        """Pass the signal to the handler that was installed before us (submitit: requeue + exit)."""
        assert self.received is not None
        previous = self._previous
        signal.signal(self.signum, previous if previous is not None else signal.SIG_DFL)
        if callable(previous):
            previous(*self.received)
        else:
            raise SystemExit(f"stopped by signal {self.signum}; checkpoint saved, re-run to resume")
