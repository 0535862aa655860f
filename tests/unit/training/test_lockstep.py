"""The pack's parts on their own: Lockstep runs members one at a time with their own random-number streams, and
SharedForward serves each member what its own forward would have returned, from one forward per batch."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from distill_sweep.models.capture import run_with_features
from distill_sweep.training.pack import Lockstep, SharedForward


def _draws(seed: int, steps: int, turn=None) -> list[tuple[float, float, float]]:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    out = []
    for _ in range(steps):
        out.append((float(torch.rand(())), random.random(), float(np.random.rand())))
        if turn is not None:
            turn()
    return out


def test_members_take_turns_and_keep_their_own_random_streams() -> None:
    alone = [_draws(seed, 5) for seed in (1, 2, 3)]
    lockstep = Lockstep(3)
    order: list[int] = []  # who handed the turn on, in order

    def member(i: int, seed: int, steps: int):
        def run() -> list[tuple[float, float, float]]:
            def turn() -> None:
                order.append(i)
                lockstep.turn(i)
            return _draws(seed, steps, turn)
        return run

    # the third member stops early: the turn passes over it from then on
    outcomes = lockstep.run([member(0, 1, 5), member(1, 2, 5), member(2, 3, 2)])
    assert outcomes == [alone[0], alone[1], alone[2][:2]]
    assert order == [0, 1, 2, 0, 1, 2, 0, 1, 0, 1, 0, 1]  # lockstep: one step each, in turn


def test_a_member_that_raises_ends_alone() -> None:
    def fails() -> None:
        raise ValueError("this member only")

    outcomes = Lockstep(2).run([fails, lambda: "the other one ran"])
    assert isinstance(outcomes[0], ValueError) and outcomes[1] == "the other one ran"


def test_ctrl_c_ends_every_member_at_a_turn_before_it_is_raised() -> None:
    """KeyboardInterrupt reaches the main thread only; members still inside torch when the interpreter exits
    abort it (exit 134). Each member ends at its next turn, one after another, and then it is raised."""
    steps = [0, 0, 0]
    lockstep = Lockstep(3)
    # Python's own Ctrl-C handler, whatever this process inherited: one started in the background by a
    # non-interactive shell (`make test &`) ignores SIGINT, and the members would then take turns forever
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def member(i: int):
        def run() -> None:
            while True:
                steps[i] += 1
                if i == 0 and steps[0] == 3:  # Ctrl-C while member 0 is in its third step
                    threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
                    time.sleep(0.3)  # still working when the signal arrives
                lockstep.turn(i)
        return run

    try:
        with pytest.raises(KeyboardInterrupt):
            lockstep.run([member(i) for i in range(3)])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not [t for t in threading.enumerate() if t.name.startswith("pack-member-") and t.is_alive()]
    assert steps == [3, 2, 2]  # member 0 finished the step it was in; the others ended where they waited


@pytest.fixture(scope="module")
def teacher() -> BertForSequenceClassification:
    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=6,
                                                    num_attention_heads=2, intermediate_size=32)).eval()


def _batch(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(0, 50, (3, 7), generator=g), "attention_mask": torch.ones(3, 7, dtype=torch.long)}


REQUESTS = [dict(hidden=True, qkv_layers=[], depth=3), dict(hidden=False, qkv_layers=[1, 4, 6], depth=6),
            dict(hidden=True, qkv_layers=[2], depth=None)]


@torch.no_grad()
def test_shared_forward_serves_each_request_its_own_forward_once_per_batch(teacher) -> None:
    shared = SharedForward()
    for step in range(3):
        batch = _batch(step)
        for request in REQUESTS:
            got = shared(teacher, batch, **request)
            want = run_with_features(teacher, batch, **request)
            assert (got.logits is None) == (want.logits is None)
            if want.logits is not None:
                assert torch.equal(got.logits, want.logits)
            assert (got.hidden_states is None) == (want.hidden_states is None)
            if want.hidden_states is not None:
                assert len(got.hidden_states) == len(want.hidden_states)
                assert all(torch.equal(a, b) for a, b in zip(got.hidden_states, want.hidden_states, strict=True))
            assert got.qkv.keys() == want.qkv.keys()
            assert all(torch.equal(a, b) for k in want.qkv for a, b in zip(got.qkv[k], want.qkv[k], strict=True))
    # batch 0: one forward for the first request, again for the second (deeper, q/k/v) and the third (logits);
    # then one per batch, for everything the three asked of the batch before
    assert shared.forwards == 3 + 2
    assert shared.layer_passes == (3 + 6 + 6) * 3 + 2 * 6 * 3
