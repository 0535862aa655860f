"""The time left in a stage, printed in the progress lines of logs without a terminal."""

from __future__ import annotations

import pytest

from distill_sweep.training import stages
from distill_sweep.training.stages import StageClock, duration


@pytest.mark.parametrize(("seconds", "text"), [(12.4, "12s"), (245, "4m05s"), (3720, "1h02m"), (59.6, "1m00s")])
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_the_time_left_is_the_rate_since_the_first_step_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    now = iter([100.0, 110.0])  # 10 s between the two lines
    monkeypatch.setattr(stages.time, "monotonic", lambda: next(now))
    clock = StageClock()
    assert clock.left(50, 1000) == ""  # a resumed job at step 50: no rate yet
    # 20 steps in 10 s = 2 steps/s; 1000 - 70 = 930 steps left -> 465 s
    assert clock.left(70, 1000) == ", ~7m45s left in the stage"
