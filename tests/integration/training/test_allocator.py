"""allocator.keep_freed_memory: a training-like step that frees and re-takes its buffers stops faulting."""

from __future__ import annotations

import subprocess
import sys

import pytest

# A "step" allocates and frees the same mix of tensors (1-64 MiB: attention tiles, gradients, optimizer
# temporaries are of this size); the probe prints the minor page faults of each of 5 steps.
PROBE = """
import resource, sys, torch
from distill_sweep.training.allocator import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
sizes = [2**k for k in (18, 20, 22, 23, 24, 22, 20, 23)]  # float32 elements
per_step = []
for _ in range(5):
    before = faults()
    tensors = [torch.ones(n) for n in sizes]
    del tensors
    per_step.append(faults() - before)
print(applied, *per_step)
"""


def _probe(mode: str) -> tuple[str, list[int]]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                         check=True).stdout.split()
    return out[0], [int(x) for x in out[1:]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc tuning is Linux-only")
def test_kept_memory_is_reused_with_fewer_page_faults() -> None:
    applied, kept = _probe("keep")
    _, default = _probe("default")
    step_pages = sum(4 * 2**k for k in (18, 20, 22, 23, 24, 22, 20, 23)) // 4096
    assert applied == "True"
    # glibc's default unmaps the large blocks on free: every step faults most of its pages again
    assert sum(default[2:]) > 3 * step_pages // 2, default
    # kept: steps after the first are served mostly from pages the process already touched
    assert sum(kept[2:]) < sum(default[2:]) / 2, (kept, default)
