"""A pack's members trained in lockstep in one process: each member is a job run exactly as alone.

Each member runs its whole job (record, context, models, stage driver, checkpoints) in a thread of its own, and
only one member runs at a time: `Lockstep` passes the turn from member to member after every training step
(`StageDriver.turn`), so all of them go through their batches together. The global random-number generators
(torch's, CUDA's, Python's, NumPy's) are one per process: each member's state is saved when it hands the turn on
and restored when it gets it back, so its dropout draws are those it would make alone. Gradient and autocast
modes are per thread already. The threads never run at once, so nothing a member computes depends on another.

`SharedForward` is the frozen teacher's forward shared by the members (procedures pass it to their
TeacherView): a batch's forward, run once to the deepest layer and with every feature the members asked of the
previous batch, serves each member the part it would have computed alone (the layers below a depth are the same
whether the forward stops there or goes on: each layer reads only the one below it).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from distill_sweep.models.capture import MODEL_INPUT_KEYS, Features, run_with_features
from distill_sweep.models.lm_head import forward_without_head
from distill_sweep.training import cost
from distill_sweep.training.checkpoint import PreemptionSignal, rng_state, set_rng_state

log = logging.getLogger("distill_sweep")
MEMBER_THREAD = "pack-member-"  # a member's thread: this and its index
WAIT_S = 0.5  # the main thread wakes this often while the members run (a signal is handled between waits)


@dataclass
class PackMember:
    """What a member's job takes from its pack: the turn it hands on after each training step (True: the pack
    was asked to stop, checkpoint and stop) and the shared teacher forward."""

    turn: Callable[[], bool]
    teacher_forward: Callable[..., Features]
    label: str = ""  # before its log lines: which member says it
    pack: str | None = None  # the pack's id (its pack file's name): the member's record and tracker run say it


class Lockstep:
    """Runs `n` members one at a time, each in its own thread, handing the turn on at every `turn(i)`."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.cond = threading.Condition()
        self.current = 0
        self.finished = [False] * n
        self.states: list[dict[str, Any]] = [rng_state()] * n  # each starts where the process started
        self.trained = [False] * n  # member i has taken its first training step (its set-up is behind it)
        self.signal: PreemptionSignal | None = None
        # Ctrl-C (KeyboardInterrupt reaches only the main thread): each member raises it at its next turn, one
        # after another, so that no thread is still inside torch when the interpreter exits (that aborts it)
        self.interrupted = False

    def run(self, members: Sequence[Callable[[], Any]]) -> list[Any]:
        """Each member's return value or the exception it raised (SystemExit included), in order. A preemption
        signal that arrives meanwhile is held until every member has checkpointed, then handed on (submitit
        requeues the pack's job)."""
        assert len(members) == self.n
        outcomes: list[Any] = [None] * self.n
        threads = [threading.Thread(target=self._member, args=(i, fn, outcomes), name=f"{MEMBER_THREAD}{i}",
                                    daemon=True) for i, fn in enumerate(members)]
        with PreemptionSignal() as self.signal:
            for thread in threads:
                thread.start()
            try:
                _join(threads)
            except KeyboardInterrupt:
                with self.cond:
                    self.interrupted = True
                _join(threads)  # the member on its turn ends its step; then each ends in turn
                raise
            if self.signal.requested:
                self.signal.forward()  # submitit: requeue and exit; without it: SystemExit
        return outcomes

    def stop_requested(self) -> bool:
        return self.signal is not None and self.signal.requested

    def turn(self, i: int) -> bool:
        """Member `i` hands the turn to the next member still running and waits for it to come back; True when
        the pack was asked to stop (the member checkpoints and ends)."""
        self.trained[i] = True
        self.states[i] = rng_state()
        with self.cond:
            self.current = self._next(i)
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.current == i)
        set_rng_state(self.states[i])
        if self.interrupted:
            raise KeyboardInterrupt
        return self.stop_requested()

    def _next(self, i: int) -> int:
        for step in range(1, self.n + 1):
            j = (i + step) % self.n
            if not self.finished[j]:
                return j
        return i

    def _member(self, i: int, fn: Callable[[], Any], outcomes: list[Any]) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.current == i)
        set_rng_state(self.states[i])
        try:
            if self.interrupted:  # Ctrl-C came before this member's first turn: it does not start
                raise KeyboardInterrupt
            outcomes[i] = fn()
        except BaseException as err:  # noqa: BLE001 - the member's job ends here; the others go on
            outcomes[i] = err
        finally:
            with self.cond:
                self.finished[i] = True
                self.current = self._next(i)
                self.cond.notify_all()


class SetUpOnce(logging.Filter):
    """The members of a pack load the same teacher, store and data: a set-up line one member logged (the same
    text, before its first step) is not logged again by the next. Lines once training has begun are all kept: each
    member's epochs, and warnings such as a student at the majority class, which name their job."""

    def __init__(self, lockstep: Lockstep) -> None:
        super().__init__()
        self.lockstep, self.seen = lockstep, set[str]()

    def filter(self, record: logging.LogRecord) -> bool:
        name = threading.current_thread().name
        if not name.startswith(MEMBER_THREAD) or self.lockstep.trained[int(name[len(MEMBER_THREAD):])]:
            return True
        text = record.getMessage()
        if text in self.seen:
            return False
        self.seen.add(text)
        return True


def _join(threads: Sequence[threading.Thread]) -> None:
    """Wait for the threads, waking every WAIT_S so that the main thread can take a signal (Ctrl-C) meanwhile."""
    for thread in threads:
        while thread.is_alive():
            thread.join(WAIT_S)


@dataclass(frozen=True)
class _Request:
    depth: int  # layers to run (the teacher's depth: all, with its logits)
    hidden: bool
    qkv: frozenset[int]


@dataclass
class _Entry:
    request: _Request
    features: Features
    asked: list[_Request] = field(default_factory=list)  # what the members asked of this batch
    # the forward's FLOPs where the member that ran it was counting its step (training/cost.py), and which thread
    flops: float | None = None
    ran_by: int | None = None


def _counted(run: Callable[[], Any]) -> tuple[Any, float | None]:
    """`run()` and the FLOPs it took where this thread's step is being counted (None where it is not)."""
    counter = cost.counting()
    before = counter.get_total_flops() if counter is not None else 0
    out = run()
    return out, (float(counter.get_total_flops() - before) if counter is not None else None)


def _credit(entry: _Entry, request: _Request) -> None:
    """A member served a forward another member ran: its counted step is credited with the part it asked for (each
    member's FLOPs are counted as alone, so that the pack's CPU-seconds split by them charges nobody the shared
    forward alone)."""
    if entry.flops is not None and entry.ran_by != threading.get_ident() and entry.request.depth > 0:
        cost.credit(entry.flops * request.depth / entry.request.depth)


class SharedForward:
    """The frozen teacher's forward for a pack: one per batch (`run_with_features`'s signature), kept for the
    members that ask for the same batch next. `forwards` and `layer_passes` (layers x examples) count the work."""

    def __init__(self, keep: int = 2) -> None:
        self.keep = keep
        self.entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self.forwards = 0
        self.layer_passes = 0
        # frozen models the members share by name (a decoder pack's teacher: procedures/decoder_pack.py); the
        # members run one at a time, so the first one's load is the others' too
        self.models: dict[str, Any] = {}
        self.headless: OrderedDict[tuple[bytes, int], Features] = OrderedDict()  # (batch, chunk) -> without_head
        self.headless_flops: dict[tuple[bytes, int], tuple[float | None, int]] = {}  # its FLOPs, who ran it

    def without_head(self, model: nn.Module, batch: Mapping[str, Tensor], *, hidden: bool, chunk: int) -> Features:
        """`forward_without_head` once per batch for every member that asks (a chunked decoder loss: the teacher's
        hidden states and head, from which each member makes the logits a chunk at a time, as it would alone).
        The forward keeps every hidden state anyway (it needs the last): a member that asks for none gets none."""
        key = (_batch_key(batch), int(chunk))
        features = self.headless.get(key)
        if features is None:
            features, flops = _counted(lambda: forward_without_head(model, batch, hidden=True, chunk=chunk))
            self.forwards += 1
            self.layer_passes += int(model.config.num_hidden_layers) * int(batch["input_ids"].shape[0])
            self.headless[key] = features
            self.headless_flops[key] = (flops, threading.get_ident())
            while len(self.headless) > self.keep:
                self.headless_flops.pop(self.headless.popitem(last=False)[0], None)
        else:
            flops, ran_by = self.headless_flops.get(key, (None, None))
            if flops is not None and ran_by != threading.get_ident():  # (see _credit)
                cost.credit(flops)
        self.headless.move_to_end(key)
        return Features(logits=None, hidden_states=features.hidden_states if hidden else None, head=features.head)

    def __call__(self, model: nn.Module, batch: Mapping[str, Tensor], *, hidden: bool, qkv_layers: Sequence[int],
                 depth: int | None = None) -> Features:
        layers = int(model.config.num_hidden_layers)
        request = _Request(layers if depth is None else min(depth, layers), hidden, frozenset(int(x) for x in qkv_layers))
        key = _batch_key(batch)
        entry = self.entries.get(key)
        if entry is None or not _covers(entry.request, request):
            # what the members asked of the previous batch, they will ask of this one: one forward for all
            asked = [*(entry.asked if entry is not None else self._last_asked()), request]
            union = _Request(max(r.depth for r in asked), any(r.hidden for r in asked),
                             frozenset().union(*(r.qkv for r in asked)))
            features, flops = _counted(lambda: run_with_features(
                model, batch, hidden=union.hidden, qkv_layers=sorted(union.qkv),
                depth=union.depth if union.depth < layers else None))
            self.forwards += 1
            self.layer_passes += union.depth * int(batch["input_ids"].shape[0])
            entry = _Entry(union, features, [r for r in asked if r != request], flops, threading.get_ident())
            self.entries[key] = entry
            while len(self.entries) > self.keep:
                self.entries.popitem(last=False)
        else:
            _credit(entry, request)
        self.entries.move_to_end(key)
        if request not in entry.asked:
            entry.asked.append(request)
        return _part(entry.features, request, layers)

    def _last_asked(self) -> list[_Request]:
        return list(next(reversed(self.entries.values())).asked) if self.entries else []


def _batch_key(batch: Mapping[str, Tensor]) -> bytes:
    """A batch by its content: the model inputs' bytes (the same inputs give the same forward)."""
    parts = [batch[k].detach().cpu().numpy().tobytes() + str(tuple(batch[k].shape)).encode()
             for k in MODEL_INPUT_KEYS if k in batch and batch[k] is not None]
    return b"|".join(parts)


def _covers(have: _Request, want: _Request) -> bool:
    return have.depth >= want.depth and (have.hidden or not want.hidden) and want.qkv <= have.qkv


def _part(features: Features, request: _Request, layers: int) -> Features:
    """What a forward of `request` alone returns, taken from a forward that covers it (a new object: the member's
    view may set its logits)."""
    full = request.depth >= layers
    hidden = None
    if request.hidden and features.hidden_states is not None:
        hidden = tuple(features.hidden_states) if full else tuple(features.hidden_states[:request.depth + 1])
    return Features(logits=features.logits if full else None, hidden_states=hidden,
                    qkv={layer: features.qkv[layer] for layer in sorted(request.qkv)}, num_heads=features.num_heads,
                    head_dim=features.head_dim, scaling=features.scaling)

