"""Keep freed CPU memory in the process between training steps (glibc malloc only).

A distillation step allocates and frees the same few hundred MB every step (attention score tiles,
gradients, optimizer temporaries).  glibc's default malloc hands large freed blocks back to the kernel
(``munmap`` / heap trimming) and the next step takes them again as fresh zeroed pages, page-faulting
every time and spending part of the step in the kernel (docs/benchmarks has the figures).  Serving every
block from the heap and never trimming it makes steady-state steps fault-free.  The cost is that
the process keeps its peak footprint until it exits, which is what a training job does anyway.

Users who preload another allocator (jemalloc, tcmalloc) or set ``MALLOC_*_`` variables keep their own
choice: nothing is changed then.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

__all__ = ["keep_freed_memory"]

# mallopt parameters from <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_INT_MAX = 2**31 - 1
_done: bool | None = None


def keep_freed_memory() -> bool:
    """Tell glibc malloc to keep freed memory for reuse; True if applied (once per process)."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ) or os.environ.get("LD_PRELOAD"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        # no mmap'd blocks (they are unmapped on free), and never trim the heap's free top
        _done = bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, _INT_MAX))
    except (OSError, AttributeError):
        return False
    return _done
