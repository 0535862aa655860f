"""Paired step timings, shared by the step benchmarks (bench.step, bench.decoder_step, bench.agnostic).

Every measurement of a row is paired with a baseline measurement taken right before it, the rows' order
rotated per repeat; a row's figure is the median over repeats of (row step time / baseline step time), which
keeps the ratio meaningful on a machine whose load changes while the benchmark runs.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from distill_sweep.training.loop import build_optimizer, linear_schedule, update_step

Step = Callable[[dict[str, Tensor]], None]


def bf16_autocast(device: str, enabled: bool) -> Callable[[], Any]:
    """A context-manager factory: bf16 autocast on `device`'s type when enabled, else a no-op."""
    if not enabled:
        return contextlib.nullcontext
    return lambda: torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)


def choose_clock(mode: str, device: str) -> tuple[Callable[[], float], str]:
    """(clock, its name): `cpu` = this process's CPU time, immune to being descheduled on a shared machine
    (exact for one thread); `wall` = elapsed time; `auto` = cpu with one CPU thread, else wall."""
    cpu = mode == "cpu" or (mode == "auto" and device == "cpu" and torch.get_num_threads() == 1)
    return (time.process_time, "process CPU time") if cpu else (time.perf_counter, "wall-clock time")


def training_step(loss_fn: Callable[..., Any], params: list[nn.Parameter], opt_cfg: Any,
                  autocast: Callable[[], Any]) -> Step:
    """One training step as train_epoch does it: loss under autocast, update_step, scheduler step."""
    optimizer = build_optimizer(params, opt_cfg, lr=1e-5)
    scheduler = linear_schedule(optimizer, total_steps=10**9, warmup_ratio=0.0)

    def step(batch: dict[str, Tensor]) -> None:
        with autocast():
            loss, _ = loss_fn(batch)
        update_step(loss, params, optimizer, float(opt_cfg.max_grad_norm))
        scheduler.step()

    return step


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_steps(fn: Step, batches: Iterator[dict[str, Tensor]], steps: int, device: str,
               clock: Callable[[], float]) -> float:
    """Seconds per step of `steps` steps of `fn`."""
    sync(device)
    t0 = clock()
    for _ in range(steps):
        fn(next(batches))
    sync(device)
    return (clock() - t0) / steps


def cycle(batches: Sequence[dict[str, Tensor]]) -> Iterator[dict[str, Tensor]]:
    while True:
        yield from batches


@dataclass
class Paired:
    """The times of every paired repeat: the baseline's, and each row's with its ratio to the baseline."""

    base: list[float] = field(default_factory=list)
    times: dict[str, list[float]] = field(default_factory=dict)
    ratios: dict[str, list[float]] = field(default_factory=dict)

    def median_ratio(self, name: str) -> float:
        return statistics.median(self.ratios[name])

    def ratio_range(self, name: str) -> str:
        return f"{min(self.ratios[name]):.3f}-{max(self.ratios[name]):.3f}"


def paired_repeats(baseline: Step, steps: dict[str, Step], batches: Iterator[dict[str, Tensor]], *, repeats: int,
                   steps_per: int, device: str, clock: Callable[[], float],
                   after: Callable[[str], None] | None = None, progress: bool = True) -> Paired:
    """Warm-up (the allocator, Adam's state, first-call overheads), then `repeats` rounds of (baseline, row)
    pairs over the rows in rotated order; `after(name)` runs after each pair (a row's extra measurement)."""
    for _ in range(2):
        baseline(next(batches))
    for fn in steps.values():
        fn(next(batches))
    names = list(steps)
    out = Paired(times={n: [] for n in names}, ratios={n: [] for n in names})
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            tb = time_steps(baseline, batches, steps_per, device, clock)
            to = time_steps(steps[name], batches, steps_per, device, clock)
            out.base.append(tb)
            out.times[name].append(to)
            out.ratios[name].append(to / tb)
            if after is not None:
                after(name)
        if progress:
            print(f"  repeat {r + 1}/{repeats} done", file=sys.stderr)
    return out
