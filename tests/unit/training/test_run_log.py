"""What every tracker's run holds: a resumed run logs no step twice; a tracker that fails warns and never stops
the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from distill_sweep.config.schema import LoggerSettings
from distill_sweep.records.record import Record
from distill_sweep.training.run_log import Logged, numbers
from distill_sweep.training.tracking import Tracker


def test_a_resumed_run_logs_only_past_each_metrics_last_step() -> None:
    logged = Logged({"prediction/loss": 5, "dev/accuracy": 2})
    # the earlier attempt logged up to step 5's loss, and the dev metrics of an epoch ending at step 2 but not 4
    assert logged.new({"prediction/loss": 0.5, "dev/accuracy": 0.7}, 4) == {"dev/accuracy": 0.7}
    assert logged.new({"prediction/loss": 0.4, "dev/accuracy": 0.7}, 4) == {}  # (nothing twice)
    assert logged.new({"prediction/loss": 0.4}, 5) == {}
    assert logged.new({"prediction/loss": 0.3, "epoch": 1.0}, 6) == {"prediction/loss": 0.3, "epoch": 1.0}
    assert logged.step == 6 and Logged().step == 0
    assert logged.new({"x": 1.0}, None) == {"x": 1.0}  # no step: nothing to compare
    assert numbers({"a": 1, "b": 0.5, "c": True, "d": "x"}) == {"a": 1.0, "b": 0.5}


def test_a_tracker_that_cannot_open_its_store_warns_and_the_job_goes_on(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    results = tmp_path / "file"  # its store would be under a file
    record = Record(task="toy", objective="vanilla_kd", seed=1, config={"seed": 1})
    with pytest.warns(UserWarning, match="mlflow init failed, tracking disabled for this job: NotADirectoryError"):
        tracker = Tracker(LoggerSettings(name="mlflow"), record, tmp_path / "job", results_dir=results, group=None,
                          name="toy-vanilla_kd-init1-s1", tags=[])
    assert tracker.run is None and tracker.run_id is None
    tracker.log({"prediction/loss": 0.5}, step=1)  # nothing, and no error
    tracker.summary({"best/accuracy": 0.5})
    tracker.finish(exit_code=0)


def test_a_param_longer_than_mlflow_keeps_is_cut_and_says_so() -> None:
    from distill_sweep.training.tracking_mlflow import CUT, _cut

    assert _cut("abc", 6000) == "abc"
    cut = _cut("x" * 7000, 6000)
    assert len(cut) == 6000 and cut.endswith(CUT) and cut.startswith("x" * 5000)
