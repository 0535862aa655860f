"""What a job's training cost, measured: the record's `cost` block (records/blocks.py's `Cost`).

- CPU-seconds: the process's CPU time (`time.process_time`: every thread of the process, torch's intra-op threads
  included; DataLoader worker processes are not) over each training step, summed over the student's stages, over
  the ranks of a job run in several processes, and over the attempts of a resumed job (the stage driver's position,
  which its checkpoint holds). Evaluation, loading and set-up are not training and are left out.
- GPU-seconds (a job on CUDA): the wall seconds of those steps. Each step ends by reading its loss back to the host
  (loop.train_epoch), a synchronisation, so the time is the device's while the step ran: the time it was held,
  not its utilisation.
- FLOPs: `torch.utils.flop_counter`'s formulas (FlopCounterMode's registry) over the first training step of each
  stage this process runs (the matrix products, convolutions and attention of everything the step runs: the
  student's forward and backward, and the teacher's forward where the job computes it; none where its outputs come
  from a teacher-output store), times the stage's steps. With batches of varying length the first step stands for
  all of them. The counter only watches the step's operations, each run as it is (`_counter`: FlopCounterMode
  itself would decompose some, and round differently): it draws no random number and changes no state, so the
  trained numbers are those of a job without it (tests/integration/training/test_cost_measured.py checks it bit
  for bit).

A pack (training/pack.py) runs its members one step at a time in one process: each member's steps are its own
CPU time, but the teacher's forward, shared, falls in the member that asked for it first. The pack's CPU-seconds
(the sum over its members) are therefore split over the members in proportion to their own FLOPs
(`split_by_flops`), each member counted as alone (a forward the pack served from another member's is credited
to it, `SharedForward`), and the record says it holds a share.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from collections.abc import Iterator, Sequence
from typing import Any

# what the FLOPs of a record count, said in its cost block
FLOPS_COUNTED = ("torch.utils.flop_counter's formulas over the first training step of each stage (the "
                 "student's forward and backward, the teacher's forward where the job runs it), times the stage's "
                 "steps")
CPU_MEASURED = "process CPU-seconds (every thread) of the training steps, over every attempt and rank"
GPU_MEASURED = "wall seconds of the training steps on CUDA, each ended by reading its loss back (a synchronisation)"

_active = threading.local()  # the counter of the step this thread is counting now (SharedForward credits it)


class StepFlops:
    """Counts the FLOPs of the first step of each stage: `step(stage)` is the context manager one training step
    runs in (a FLOP counter the first time for that stage in this process, else nothing); `per_step` holds the
    counts."""

    def __init__(self, per_step: dict[str, float] | None = None) -> None:
        self.per_step: dict[str, float] = dict(per_step or {})
        self.credited = 0.0  # FLOPs of shared forwards another member ran for the step being counted

    @contextlib.contextmanager
    def step(self, stage: str) -> Iterator[None]:
        if stage in self.per_step:
            yield
            return
        counter = _counter()
        self.credited = 0.0
        _active.counter = (self, counter)
        try:
            with counter:
                yield
        finally:
            _active.counter = None
        self.per_step[stage] = float(counter.get_total_flops()) + self.credited


def _counter() -> Any:
    """A dispatch mode that counts FLOPs by torch.utils.flop_counter's formulas (FlopCounterMode's registry: matrix
    products, convolutions, attention; CPU's fused attention as the benchmarks count it, `cpu_attention_flops`) and
    runs every operation exactly as it is. FlopCounterMode itself decomposes
    an operation its registry lacks into smaller ones, which rounds a backward differently (a decoder's SiLU-gated
    MLP), and its module tracker's backward hooks fail under torch.autograd.grad (a chunked decoder loss): either
    would change or stop the training it measures."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry, shape_wrapper

    registry = {**flop_registry, **{op: shape_wrapper(f) for op, f in cpu_attention_flops().items()}}

    class Counter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.total = 0

        def get_total_flops(self) -> int:
            return self.total

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            formula = registry.get(getattr(func, "_overloadpacket", None))
            if formula is not None:
                self.total += int(formula(*args, **(kwargs or {}), out_val=out))
            return out

    return Counter()


def cpu_attention_flops() -> dict[Any, Any]:
    """FlopCounterMode's registry has the CUDA attention kernels, not CPU's fused one: count it as SDPA (formulas
    of the tensors' shapes, as `custom_mapping` takes them)."""
    import torch

    try:
        from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count
    except ImportError:  # another torch: its own registry only
        return {}

    ops = torch.ops.aten
    out: dict[Any, Any] = {}
    if hasattr(ops, "_scaled_dot_product_flash_attention_for_cpu"):
        out[ops._scaled_dot_product_flash_attention_for_cpu] = (
            lambda query, key, value, *args, out_val=None, **kwargs: sdpa_flop_count(query, key, value))
    if hasattr(ops, "_scaled_dot_product_flash_attention_for_cpu_backward"):
        out[ops._scaled_dot_product_flash_attention_for_cpu_backward] = (
            lambda grad_out, query, key, value, *args, out_val=None, **kwargs:
            sdpa_backward_flop_count(grad_out, query, key, value))
    return out


def counting() -> Any:
    """The counter of this thread's step now (its `get_total_flops()`), or None."""
    active = getattr(_active, "counter", None)
    return None if active is None else active[1]


def credit(flops: float) -> None:
    """Add to this thread's counted step the FLOPs of work another member ran for it (a shared teacher forward)."""
    active = getattr(_active, "counter", None)
    if active is not None:
        active[0].credited += float(flops)


def split_by_flops(total: float, flops: Sequence[float | None]) -> list[float | None]:
    """`total` (a pack's CPU-seconds) split over its members in proportion to their FLOPs: shares that add up to
    `total`. A member whose FLOPs are unknown gets None, and the known ones share `total` among themselves; where
    no member has a positive count, equal shares."""
    known = [i for i, f in enumerate(flops) if _count(f)]
    out: list[float | None] = [None] * len(flops)
    if not known:
        return out
    weights = [float(flops[i] or 0.0) for i in known]
    whole = sum(weights)
    for i, weight in zip(known, weights, strict=True):
        out[i] = total * (weight / whole if whole > 0 else 1.0 / len(known))
    return out


def _count(value: Any) -> bool:
    """A usable count: a finite number >= 0 (a damaged record's word is none)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def pack_shares(costs: Sequence[dict[str, Any] | None], pack: str) -> list[dict[str, Any] | None]:
    """The members' cost blocks (as records hold them; None: a member without one) with the pack's CPU-seconds
    split by FLOPs: each member's `cpu_seconds` becomes its share, its own measured steps kept as
    `cpu_seconds_own`, and `share` says how."""
    own = [c.get("cpu_seconds") if isinstance(c, dict) else None for c in costs]
    total = sum(float(x) for x in own if _count(x))
    shares = split_by_flops(total, [c.get("flops") if isinstance(c, dict) else None for c in costs])
    out: list[dict[str, Any] | None] = []
    for cost, mine, share in zip(costs, own, shares, strict=True):
        if not isinstance(cost, dict) or share is None:
            out.append(cost)
            continue
        out.append({**cost, "cpu_seconds": share, "cpu_seconds_own": mine,
                    "share": {"pack": pack, "pack_cpu_seconds": total, "members": len(costs),
                              "rule": "the pack's CPU-seconds split over its members by their FLOPs"}})
    return out


def share_pack_cost(record_paths: Sequence[Any], pack: str) -> None:
    """The completed records of a pack's members that trained in it (`pack`: its id) rewritten with their shares
    of its CPU-seconds (`pack_shares`). A member done before the pack ran (its record skipped, no share to take) or
    that did not complete keeps its record as it is."""
    from distill_sweep.records.blocks import Cost
    from distill_sweep.records.record import RecordError, is_complete, load_json, load_record, write_record

    members = []
    for path in record_paths:
        try:
            data = load_json(path)
            record = load_record(path) if is_complete(data) else None
        except RecordError:
            record = None
        if record is not None and record.pack == pack and record.cost is not None and record.cost.share is None:
            members.append((path, record))
    if len(members) < 2:
        return
    costs = [dataclasses.asdict(record.cost) for _, record in members if record.cost is not None]
    for (path, record), cost in zip(members, pack_shares(costs, pack), strict=True):
        if cost is not None:
            record.cost = Cost(**cost)
            write_record(path, record)


__all__ = ["CPU_MEASURED", "FLOPS_COUNTED", "GPU_MEASURED", "StepFlops", "counting", "cpu_attention_flops", "credit",
           "pack_shares", "share_pack_cost", "split_by_flops"]
