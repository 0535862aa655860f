"""A pack's members say a set-up line they share once (training/pack.py's SetUpOnce; the packs themselves:
tests/integration/training/test_pack.py)."""

from __future__ import annotations

import logging

import pytest

from distill_sweep.training.pack import Lockstep


def test_a_set_up_line_every_member_logs_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """Members of a pack load the same teacher and say so in the same words: before its first step a member's line
    already logged by another is dropped; lines after the first step (epochs, warnings naming the job) all stay."""
    from distill_sweep.training.pack import SetUpOnce

    lockstep = Lockstep(3)
    log = logging.getLogger("distill_sweep")

    def member(i: int):
        def run() -> int:
            log.info("reusing cached teacher /cache/teachers/toy/tiny")  # the same text in every member
            log.info("member %d set up", i)  # its own
            lockstep.turn(i)
            log.info("epoch 1 loss 0.5")  # the same text, but after training began: kept
            return i
        return run

    once = SetUpOnce(lockstep)
    with caplog.at_level(logging.INFO, logger="distill_sweep"):
        caplog.handler.addFilter(once)
        try:
            assert lockstep.run([member(i) for i in range(3)]) == [0, 1, 2]
        finally:
            caplog.handler.removeFilter(once)
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("reusing cached teacher /cache/teachers/toy/tiny") == 1
    assert sorted(m for m in messages if m.endswith("set up")) == [f"member {i} set up" for i in range(3)]
    assert messages.count("epoch 1 loss 0.5") == 3
