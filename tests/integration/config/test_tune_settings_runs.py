"""The `tune` block (config/tune.py): the tests that run a job, a command or processes (its fast tests:
tests/unit/config/test_tune_settings.py)."""

from __future__ import annotations

from helpers import FAST
from helpers import TUNE_SPACE as SPACE
from helpers import tune_ident as _ident


def test_a_job_on_its_own_is_refused_a_tuning_budget(tmp_path) -> None:
    """Trials are a sweep's phase: one job with tune.trials > 0 would run untuned under a tuned job's hash."""
    from helpers import run_cli_preloaded

    proc = run_cli_preloaded([*FAST, "tune.trials=4", SPACE, f"results_dir={tmp_path / 'r'}"], cwd=tmp_path)
    assert proc.returncode == 2 and not (tmp_path / "r").exists()
    assert proc.stderr.strip().splitlines()[-1].endswith("tune.trials=4 tunes the arms of a sweep: run it with -m (a "
                                                          "job on its own runs no trials)")
    _ident("tune.trials=4", SPACE, "+tune_trial=0").check_used()  # the sweeper's trial and grid jobs run
    _ident("tune.trials=4", SPACE, "+tune_chosen=/x/chosen.json").check_used()
