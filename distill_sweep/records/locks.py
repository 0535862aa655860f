"""One process per job: a lock file in the job's directory, held while the job runs.

Two commands whose grids overlap (the same sweep started again in a second terminal, two SLURM arrays) would
otherwise both run a job, each writing its record and checkpoint over the other's. The lock is `fcntl.flock` on
`<job dir>/.lock`: the kernel releases it when the holder ends, however it ends (an exception, kill -9, SLURM's
preemption), so a re-run or requeued job takes it again and resumes from the checkpoint; nothing is left to
clean up by hand. The file itself is never deleted (deleting a lock file races with a process about to lock it).
It holds the holder's host and process id, for a user who wonders who has it.

Shared entries built once (a cached teacher, a teacher-output store, an augmented split, a word vocabulary) are
guarded by `waiting_lock`, a `filelock` lock beside the entry that says once what a waiting job waits for.

A job of a sweep that finds the lock taken leaves the job to its holder (its sweeper waits for it at the end,
see distill_sweep.sweep.sweeper); a job run on its own waits for it. Locks on a shared file system need `flock` to
work across nodes there, as the teacher cache's locks already do.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from distill_sweep.records.disk import set_aside

log = logging.getLogger("distill_sweep")
LOCK = ".lock"
LOCK_NOTICE_AFTER_S = 2.0  # a job still waiting for a shared entry's lock after this says what it waits for
LEFT_TO_HOLDER = "left to the process holding the job's lock"  # what a job of a sweep returns when it ran elsewhere


class JobLock:
    """The lock of the job whose directory is `directory` (created if missing)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK
        self._fd: int | None = None

    def acquire(self, wait: bool, mend: bool = True) -> bool:
        """Take the lock: at once, or else (with `wait`) once its holder ends, saying once what it waits for.
        False when it is held elsewhere and `wait` is False. `mend`: a `.lock` that is no file (a directory) is set
        aside in one line, else (a read-only caller's) opening it raises OSError."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if mend and (self.path.exists() and not self.path.is_file()):  # no lock file can be taken there, and no
            # process holds one: set aside (kept to look at) for a lock file of its own
            moved = set_aside(self.path)
            log.warning("%s is not a lock file (a %s): set it aside as %s and took the job's lock", self.path,
                        "directory" if moved.is_dir() else "special file", moved.name)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)  # the umask's: a group taking it too
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    os.close(fd)
                    return False
                log.info("waiting for %s: another process is running this job (%s)", self.path, holder(self.path))
                fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        try:  # who holds it (a full disk only loses this note)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{socket.gethostname()} pid {os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor releases the flock
            self._fd = None

    def __enter__(self) -> JobLock:
        self.acquire(wait=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def held_elsewhere(directory: Path) -> bool:
    """True while another process holds the job's lock (a job directory without a lock file: False)."""
    if not (Path(directory) / LOCK).exists():
        return False
    lock = JobLock(directory)
    if lock.acquire(wait=False, mend=False):  # (read only: a `.lock` that is a directory raises, for the caller)
        lock.release()
        return False
    return True


def wait_for(directory: Path) -> None:
    """Return once no other process holds the job's lock."""
    with JobLock(directory):
        pass


def holder(path: Path) -> str:
    """What the lock file says about its holder ("unknown holder" when it says nothing readable)."""
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        text = ""
    return text or "unknown holder"


@contextmanager
def waiting_lock(path: Path, why: str) -> Iterator[None]:
    """Hold a shared entry's file lock; a job that has to wait says once what it is waiting for (`why`)."""
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=LOCK_NOTICE_AFTER_S)
    except Timeout:
        log.info("waiting for the lock %s (%s)", path, why)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
