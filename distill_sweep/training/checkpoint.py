"""Training checkpoints (atomic, loaded with weights_only=True) and SLURM preemption handling.

A checkpoint holds everything needed to continue a job bit-for-bit on the same device: student,
objective (projections, memory bank), optimizer, scheduler, RNG states, position (stage, epoch,
step within epoch), partial epoch sums, and the record's epoch history.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import signal
import zipfile
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import torch

from distill_sweep.records.disk import atomic_file
from distill_sweep.training.checkpoint_files import previous_path
from distill_sweep.training.processes import EVERY_RANK

log = logging.getLogger(__name__)

def save_checkpoint(path: Path, state: dict[str, Any], *, keep_previous: bool = False) -> None:
    """torch.save to a temp file in the same directory, then rename over the old checkpoint.

    keep_previous: keep the checkpoint being replaced as `checkpoint.prev.pt`, so a newest file that
    later proves unreadable costs one checkpoint interval instead of the whole job. It doubles the disk
    used, and whoever deletes the checkpoint should use `remove_checkpoint` so no `.prev` is left behind.
    A write that fails (a full disk, an I/O error) raises DiskWriteError naming `path`; the checkpoint already
    there is left as it was.
    """
    kept = f"the previous {path.name} is intact" if path.exists() else "no checkpoint was written"
    keep = (lambda: _keep_as_previous(path)) if keep_previous and path.exists() else None
    with atomic_file(path, kept, binary=True, before_replace=keep) as raw:
        f = _KeepsWriteError(raw)
        try:
            torch.save(state, f)  # type: ignore[arg-type]
        except RuntimeError as err:
            # torch reports its file's write error as "unexpected pos ...": the OSError is the news
            raise (f.error or err) from err


class _KeepsWriteError:
    """A file for torch.save that remembers the OSError of a failed write (torch turns it into a RuntimeError)."""

    def __init__(self, f: Any) -> None:
        self.f, self.error = f, None

    def write(self, data: bytes) -> int:
        try:
            return self.f.write(data)
        except OSError as err:
            self.error = err
            raise

    def flush(self) -> None:
        self.f.flush()


def _keep_as_previous(path: Path) -> None:
    # A hard link, then a rename over the old `.prev`: `path` itself stays in place throughout, so a
    # crash at any moment leaves a loadable checkpoint.pt (the link costs no copy).
    prev = previous_path(path)
    link = prev.with_name(f".{prev.name}.link")
    link.unlink(missing_ok=True)
    try:
        os.link(path, link)
        os.replace(link, prev)
    except OSError as err:  # a filesystem without hard links: go on without a previous checkpoint
        link.unlink(missing_ok=True)
        log.debug("cannot keep %s as %s: %s", path, prev, err)


def load_checkpoint(
    path: Path, config_hash: str, *, required: tuple[str, ...] = ()
) -> dict[str, Any] | None:
    """The checkpoint at `path` if it belongs to this config, else None (never executes pickled code).

    A file that cannot be read (truncated, garbage, bytes changed in place that fail its zip CRC-32, not a dict,
    lacking `config_hash` or a `required` key) is moved aside to `<name>.corrupt-<UTC time>` and the previous
    checkpoint (`checkpoint.prev.pt`, when one was kept) is tried instead; with none readable the job starts over rather than failing the
    same way on every re-run.
    """
    if not path.exists():
        return None
    state = _read_or_set_aside(path, required)
    if state is None:
        prev = previous_path(path)
        state = _read_or_set_aside(prev, required) if prev.exists() else None
        if state is None:
            log.warning("no readable checkpoint in %s: starting from the beginning", path.parent)
            return None
        log.warning("using the previous checkpoint %s instead", prev)
    if state.get("config_hash") != config_hash:
        log.warning("ignoring checkpoint %s: it belongs to another config", path)
        return None
    return state


def changed_member(path: Path) -> str | None:
    """The first member of a checkpoint (torch.save's zip file) whose bytes fail the CRC-32 torch.save wrote for
    them: bytes changed in place at the file's length, which torch.load reads without a word (a weight changed
    silently); None when every member checks, or the file is no zip (torch.load then says what is wrong). A member
    stored with CRC 0 is not checked: torch.save writes 0 when told not to compute them (its config's
    `save.compute_crc32`), and every checkpoint would then read as damaged."""
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.CRC == 0:
                    continue
                try:
                    with archive.open(info) as member:
                        while member.read(1 << 24):  # (the reader checks the CRC-32 at the member's end)
                            pass
                except zipfile.BadZipFile:
                    return info.filename
    except Exception:  # noqa: BLE001 - whatever the zip reader raises: torch.load then judges the file
        return None
    return None


def _read_or_set_aside(path: Path, required: tuple[str, ...]) -> dict[str, Any] | None:
    state: Any = None
    changed = changed_member(path)
    try:
        if changed is None:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (MemoryError, PermissionError):
        raise  # the file may be fine: not a reason to throw it away
    except Exception as err:  # noqa: BLE001 - torch reports corruption as RuntimeError/EOFError/OSError/pickle errors
        first = str(err).strip().splitlines()[0][:160] if str(err).strip() else "no detail"
        problem = f"{type(err).__name__}: {first}"
    else:
        problem = f"its {changed} fails its CRC-32 check: bytes changed in place" if changed is not None else ""
    if not problem:
        if not isinstance(state, dict):
            problem = f"holds a {type(state).__name__}, not a dict"
        else:
            missing = [k for k in ("config_hash", *required) if k not in state]
            if not missing:
                return state
            problem = f"lacks {missing}"
    aside = path.with_name(f"{path.name}.corrupt-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S.%fZ}")
    try:
        os.replace(path, aside)
    except OSError as err:
        log.warning("unreadable checkpoint %s (%s); it cannot be moved aside either (%s)", path, problem, err)
        return None
    log.warning("unreadable checkpoint %s (%s): moved it to %s", path, problem, aside)
    return None


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
        self._forwarded = False

    def __enter__(self) -> PreemptionSignal:
        try:
            self._previous = signal.signal(self.signum, self._note)
        except ValueError:  # not the main thread: nothing to defer
            self._previous = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None and not self._forwarded:  # forwarded: the job is on its way out
            signal.signal(self.signum, self._previous)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        log.warning("received signal %d: checkpointing at the end of this step", signum, extra=EVERY_RANK)
        self.received = (signum, frame)

    @property
    def requested(self) -> bool:
        return self.received is not None

    def forward(self) -> None:
        """Pass the signal to the handler that was installed before us (submitit: requeue + exit). On rank 0 of
        several it may not have arrived here yet (another rank had it): rank 0 passes it on all the same."""
        received = self.received if self.received is not None else (self.signum, None)
        previous, self._forwarded = self._previous, True
        # the job stops now: a copy of the signal arriving later (rank 0, when another rank had it first) must
        # not run submitit's requeue a second time from inside the first one
        signal.signal(self.signum, signal.SIG_IGN if callable(previous) else
                      previous if previous is not None else signal.SIG_DFL)
        if callable(previous):
            previous(*received)
        else:
            raise SystemExit(f"stopped by signal {self.signum}; checkpoint saved, re-run to resume")
