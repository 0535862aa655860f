"""Writing files on a disk that may fill up or fail: one error naming the file, what was there before kept.

Every store writes a new file beside the old one and renames it into place, so a write that fails leaves the
previous state as it was; `writing` turns the failure (ENOSPC, EIO, EDQUOT, ...) into a `DiskWriteError` that
says which file and what is kept, in place of an OSError that names neither (Python's own write errors carry no
file name). Memory-mapped arrays reserve their blocks first (`reserve`): a page of a sparse file that the full
disk cannot back kills the process with SIGBUS when it is written, with no error to report and nothing
cleaned up.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from distill_sweep.errors import DiskWriteError

# posix_fallocate's answers that mean "this file system cannot reserve", not "no space": the file is then
# written as before, unreserved
_NO_RESERVE = {errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS, errno.ENODEV, errno.ESPIPE}


def problem(err: OSError) -> str:
    """`No space left on device [ENOSPC]`: the OS's words and the errno's name."""
    name = errno.errorcode.get(err.errno or 0)
    words = err.strerror or str(err)
    return f"{words} [{name}]" if name else words


@contextmanager
def writing(path: Path | str, kept: str) -> Iterator[None]:
    """An OSError in the block becomes a DiskWriteError: `cannot write <path>: <problem>; <kept>`."""
    try:
        yield
    except OSError as err:
        raise DiskWriteError(f"cannot write {path}: {problem(err)}; {kept}") from err


@contextmanager
def atomic_file(path: Path, kept: str | None = None, *, binary: bool = False,
                before_replace: Callable[[], None] | None = None) -> Iterator[IO[Any]]:
    """The one temp-file-and-rename write: the block writes to `.<name>.<random>.tmp` beside `path`, which is
    flushed, fsynced and renamed over `path` when the block ends, so readers never see half a file. The file's mode
    is the umask's (0644 under 022, 0600 under 077), as `open` makes it.

    A block that fails leaves `path` as it was and no temp file; an OSError (a full disk) becomes a DiskWriteError
    naming `path` and `kept` (default: its previous content is intact, or nothing was written).
    `before_replace` runs once the new file is on disk, just before the rename (a checkpoint keeps the old one).
    """
    if kept is None:
        kept = "its previous content is intact" if path.exists() else "nothing was written"
    with writing(path, kept):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _new_file(path.parent, f".{path.name}.", ".tmp")
        try:
            with os.fdopen(fd, "wb" if binary else "w") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())  # on disk before it replaces what was there
            if before_replace is not None:
                before_replace()
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _new_file(parent: Path, prefix: str, suffix: str) -> tuple[int, str]:
    """A new, empty file of a random name in `parent`, open for writing: mkstemp's exclusive creation, with the
    mode the umask gives (0666 less the umask), where mkstemp's is always 0600: a lab sharing a results dir or a
    cache, group-readable by its umask, must read each other's records, stores and teachers."""
    for _ in range(100):
        name = str(parent / f"{prefix}{secrets.token_hex(6)}{suffix}")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name in {parent}")


def new_dir(parent: Path, prefix: str) -> Path:
    """A new directory of a random name in `parent` (created), with the mode the umask gives (0777 less it), where
    mkdtemp's is always 0700: a store or a cached tokenizer built in it and renamed into place is read by others."""
    for _ in range(100):
        path = Path(parent) / f"{prefix}{secrets.token_hex(6)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name in {parent}")


def reserve(path: Path | str) -> None:
    """Allocate the disk blocks of the whole file at `path` (its current size) now, so that a full disk is an
    OSError here rather than a SIGBUS when a memory map of it is written."""
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if size:
            os.posix_fallocate(fd, 0, size)
    except OSError as err:
        if err.errno not in _NO_RESERVE:
            raise
    finally:
        os.close(fd)


def room_problem(directory: Path | str, size: int = 64 * 1024) -> str | None:
    """Why `size` bytes cannot be written where `directory` is (or would be created), or None: a file of that
    size is written in its nearest existing folder and removed again. Hydra writes its run directory (config
    copies, the job's log) before any job code runs; on a full disk it stops there with a traceback."""
    probe = Path(directory).expanduser().absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        return None  # not a folder: the job's own checks say so, naming the key
    path = probe / f".distill_sweep-room-{os.getpid()}"
    try:
        with open(path, "wb") as f:
            f.write(b"\0" * size)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        return f"cannot write in {probe}: {problem(err)}"
    finally:
        path.unlink(missing_ok=True)
    return None


def set_aside(path: Path) -> Path:
    """Move a damaged cache entry (file or directory) out of the way so that it is built again; it is kept beside
    its old place, named `<name>.corrupt-<UTC time>`, for whoever wants to look at it. Returns where it went."""
    aside = path.with_name(f"{path.name}.corrupt-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S.%fZ}")
    os.replace(path, aside)
    return aside
