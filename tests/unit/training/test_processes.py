"""training/processes.py: a launch environment that cannot start a job is one line; a rank other than 0 lets only
errors through; SIGTERM (torchrun stopping the ranks) becomes Stopped, and is held back while a record is written."""

from __future__ import annotations

import logging
import os
import signal
import warnings

import pytest

from distill_sweep.errors import ConfigError
from distill_sweep.training import processes


@pytest.mark.parametrize("env, line", [
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not a number of processes"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE='0' is not a number of processes"),
    ({"WORLD_SIZE": "2", "RANK": "0"}, "WORLD_SIZE=2 but MASTER_ADDR, MASTER_PORT are not set"),
    ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, None),
    ({"WORLD_SIZE": "1"}, None),
    ({}, None),
])
def test_a_launch_environment_is_checked_in_one_line(env: dict, line: str | None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    problem = processes.launch_problem()
    if line is None:
        assert problem is None
        return
    assert problem is not None and problem.startswith(line) and "\n" not in problem
    with pytest.raises(ConfigError, match=line.split(" ")[0]):  # (the checks that read it first say the same)
        processes.requested_size()


def test_a_rank_other_than_0_lets_errors_through_only(monkeypatch: pytest.MonkeyPatch) -> None:
    handler = logging.StreamHandler()
    monkeypatch.setattr(logging.getLogger(), "handlers", [handler])  # (pytest's own handlers left as they are)
    with warnings.catch_warnings():  # (speak_once turns Python's warnings off on such a rank)
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", "0")
        processes.speak_once()
        assert handler.filters == []  # rank 0 speaks
        monkeypatch.setenv("RANK", "1")
        processes.speak_once()
        processes.speak_once()  # (once per handler)
        assert len(handler.filters) == 1
    record = logging.LogRecord("distill_sweep", logging.WARNING, __file__, 1, "done", None, None)
    assert not handler.filter(record)
    record.levelno = logging.ERROR
    assert handler.filter(record)
    # a line of the rank's own (a signal it received, where it resumed: each rank's SLURM log) passes, with its rank
    own = logging.LogRecord("distill_sweep", logging.WARNING, __file__, 1, "received signal %d", (12,), None)
    own.__dict__.update(processes.EVERY_RANK)
    assert handler.filter(own) and handler.filter(own)  # (prefixed once, whichever handlers see it)
    assert own.getMessage() == "[rank 1] received signal 12"


def test_sigterm_becomes_stopped_and_waits_for_a_record_being_written() -> None:
    events, before = [], signal.getsignal(signal.SIGTERM)
    with pytest.raises(processes.Stopped, match="stopped by signal 15"), processes.stopped_by_sigterm():
        with processes.sigterm_deferred():
            os.kill(os.getpid(), signal.SIGTERM)  # held back: the write goes on
            events.append("written")
        events.append("not reached")  # delivered as the deferral ends
    assert events == ["written"]
    assert signal.getsignal(signal.SIGTERM) is before  # put back
