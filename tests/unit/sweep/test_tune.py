"""The tuning phase of a sweep (sweep/tune.py): arms, their checked spaces, studies that reach their budget and
no further."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers import FAST, compose_cfg

from distill_sweep.config.parse import parse
from distill_sweep.config.tune import TuneSettings
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.sweep import tune
from distill_sweep.sweep.compose import expand


def _arms(grid: Sequence[str], space: dict, **keys):
    settings = parse(TuneSettings, {"trials": 2, "space": space, **keys}, "tune")
    jobs = [[*FAST, *job] for job in expand(list(grid))]
    distilled = [(identify(compose_cfg(job)), job) for job in jobs]
    return tune.plan_arms(distilled, compose_cfg, settings)


def test_an_arm_is_a_grid_cell_without_its_seed() -> None:
    arms = _arms(["objective=vanilla_kd,att_kl", "seed=1,2,3"], {"objective.temperature": {"low": 1, "high": 4}})
    assert len(arms) == 2 and [len(arm.grid) for arm in arms] == [3, 3]
    assert all(arm.space == {"objective.temperature": tune.Range(1, 4, integer=True)} for arm in arms)
    assert len({arm.name for arm in arms}) == 2


def test_a_key_an_arm_does_not_read_is_left_out_of_its_space() -> None:
    """The layer map: vanilla_kd has no intermediate term to map, att_kl has."""
    kd, att = _arms(["objective=vanilla_kd,att_kl"], {"map": ["skip", "last"]})
    assert kd.left_out == ["map"] and kd.space == {}
    assert att.left_out == [] and att.space == {"map": ["skip", "last"]}


@pytest.mark.parametrize(("grid", "space", "line"), [
    (["objective=vanilla_kd"], {"objective.temprature": {"low": 1, "high": 4}},
     r"^tune\.space\.objective\.temprature: no such key in the config of any job of this sweep$"),
    (["objective=vanilla_kd"], {"map": ["skip", "last"]}, r"^tune\.space\.map: no arm of this sweep reads it"),
    (["objective=vanilla_kd"], {"teacher.finetune.lr": {"low": 1e-5, "high": 1e-3, "log": True}},
     r"^tune\.space\.teacher\.finetune\.lr: tuning the teacher is out of scope"),
    (["objective=vanilla_kd"], {"task.max_seq_length": [16, 24]},
     r"^tune\.space\.task\.max_seq_length changes the teacher .*tuning the teacher is out of scope"),
    (["objective=vanilla_kd"], {"objective.alpha": {"low": 0.1, "high": 2.0}},
     r"^tune\.space\.objective\.alpha: the value 2\.0 is refused: objective\.alpha=2\.0: must be <= 1\.0$"),
])
def test_a_bad_space_is_one_line(grid: list[str], space: dict, line: str) -> None:
    with pytest.raises(ConfigError, match=line) as err:
        _arms(grid, space)
    assert "\n" not in str(err.value)


def test_a_holdout_that_leaves_less_than_a_batch_is_refused() -> None:
    """FAST: 256 training examples, batches of 32; a holdout of 0.9 holds out 230 and leaves 26."""
    with pytest.raises(ConfigError, match=r"^tune\.holdout=0\.9: of the 256 training examples of task toy it holds "
                                          r"out 230 and leaves 26; .* a batch \(32\)"):
        _arms(["objective=vanilla_kd"], {"objective.temperature": {"low": 1, "high": 4}}, holdout=0.9)
    # the largest batch size the space may draw counts: 256 - 26 = 230 rows leave room for 128, not 256
    _arms(["objective=vanilla_kd"], {"optimizer.batch_size": [32, 128]})
    with pytest.raises(ConfigError, match=r"a batch \(256\)"):
        _arms(["objective=vanilla_kd"], {"optimizer.batch_size": [32, 256]})


def test_overrides_keep_their_types() -> None:
    assert tune.override("objective.temperature", 2.5) == "objective.temperature=2.5"
    assert tune.override("optimizer.batch_size", 16) == "optimizer.batch_size=16"
    assert tune.override("map", "skip") == "map='skip'"
    assert tune.override("x", True) == "x=true" and tune.override("x", None) == "x=null"
    assert tune.override("optimizer.lr", 1e-5) == "optimizer.lr=1e-05"
    cfg = compose_cfg([*FAST, tune.override("optimizer.lr", 1e-5), tune.override("map", "skip")])
    assert cfg.optimizer.lr == 1e-5 and cfg.map == "skip"


def test_a_study_continues_to_its_budget_and_reruns_a_killed_trial(tmp_path: Path) -> None:
    """A trial left RUNNING (its sweep killed) is run again with its number and values, not asked anew; once the
    COMPLETE trials reach the budget, nothing more is asked."""
    settings = parse(TuneSettings, {"trials": 3, "space": {"objective.temperature": {"low": 1.0, "high": 4.0}},
                                    "seed": 5}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], {"objective.temperature": {"low": 1.0, "high": 4.0}})
    study = tune.open_study(arm, settings, tmp_path)
    (first,) = tune.next_trials(arm, study, 3)
    assert first.number == 0 and first.overrides[-1] == "+tune_trial=0"
    # the sweep dies here: trial 0 stays RUNNING; the next sweep reopens the study from its journal
    study = tune.open_study(arm, settings, tmp_path)
    (again,) = tune.next_trials(arm, study, 3)
    assert (again.number, again.values) == (0, first.values)
    tune.tell(study, again, 0.5, tmp_path / "trial-0")
    tune.tell(study, again, 0.9)  # told twice (two sweeps at once): the first result stands
    for score in (0.7, 0.6):
        (p,) = tune.next_trials(arm, study, 3)
        tune.tell(study, p, score)
    assert tune.next_trials(arm, study, 3) == []
    assert tune.completed_trials(arm, tmp_path) == 3
    tune.choose(arm, study, tmp_path, settings)
    assert arm.best_trial == 1 and arm.best == study.trials[1].params
    assert [t.value for t in study.trials] == [0.5, 0.7, 0.6]
    assert study.trials[0].user_attrs == {"record": str(tmp_path / "trial-0")}  # where its compute is recorded
    chosen = json.loads(tune.chosen_path(arm, tmp_path).read_text())
    assert (chosen["trial"], chosen["score"], chosen["trials"], chosen["metric"]) == (1, 0.7, 3, "accuracy")
    assert chosen["space"] == {"objective.temperature": {"low": 1.0, "high": 4.0}}
    # a larger budget continues the same study
    (more,) = tune.next_trials(arm, tune.open_study(arm, settings, tmp_path), 4)
    assert more.number == 3


SWEEP = [*FAST, "max_steps_per_epoch=2", "objective=vanilla_kd", "seed=1,2", "tune.holdout=0.25",
         "tune.space={objective.temperature:{low:1.0,high:4.0}}"]


def test_the_dry_run_counts_trials_next_to_the_grid(tmp_path: Path) -> None:
    from helpers import run_cli_preloaded

    out = tmp_path / "results"
    proc = run_cli_preloaded([*SWEEP, "objective=vanilla_kd,att_kl", "tune.trials=8", f"results_dir={out}", "+dry_run=true",
                    "-m"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # at most: 16 trials x 2 steps x 32 examples (max_steps_per_epoch=2, 1 epoch, batch 32) + att_kl's 8 trials' 2
    # more steps of its intermediate stage = 1024 + 512
    assert "tuning first: 2 arm(s) x 8 trial(s) (tpe, seed 0, holdout 0.25 of the training split) = 16 trial jobs, " \
           "0 already completed, 16 to run (at most 1.54e+03 student sample-passes (no completed record yet to " \
           "convert it to hours): each trial trains at most as long as its arm's grid job); 2 trial(s) at a time " \
           "(1 per arm)" in proc.stdout
    assert "4 jobs in the grid" in proc.stdout and not out.exists()


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_a_bad_space_stops_the_sweep_before_anything_runs(tmp_path: Path) -> None:
    from helpers import run_cli_preloaded

    out = tmp_path / "results"
    proc = run_cli_preloaded([*SWEEP[:-1], "tune.trials=2", "tune.space={teacher.finetune.lr:{low:1e-5,high:1e-3}}",
                    f"results_dir={out}", f"cache_dir={tmp_path / 'c'}", "-m"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("distill_sweep: error: tune.space.teacher.finetune.lr: "
                                                           "tuning the teacher is out of scope")
    assert not out.exists() and not (tmp_path / "c").exists()


@pytest.mark.slow  # a real tuned sweep: about a minute
def test_a_tuned_sweep_runs_the_budget_then_the_grid_and_a_rerun_adds_nothing(tmp_path: Path) -> None:
    import optuna
    from helpers import records, run_cli_preloaded

    out, where = tmp_path / "results", [f"results_dir={tmp_path / 'results'}", f"cache_dir={tmp_path / 'c'}"]
    proc = run_cli_preloaded([*SWEEP, "tune.trials=2", *where, "-m"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = records(out)
    trials = [r for r in found if r.get("tune_trial") is not None]
    grid = [r for r in found if r.get("tuned")]
    assert len(found) == 4 and sorted(r["tune_trial"]["number"] for r in trials) == [0, 1]
    assert all(r["data"]["dev_size"] == 64 and r["seed"] == 1 for r in trials)  # 256 x 0.25 held out
    assert sorted(r["seed"] for r in grid) == [1, 2] and all(r["data"]["dev_size"] == 128 for r in grid)
    (journal,) = (out / "tuning").glob("*.journal")
    study = optuna.load_study(study_name=grid[0]["tuned"]["study"], storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal))))
    best = max(study.trials, key=lambda t: t.value)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
    assert {t.value for t in study.trials} == {
        r["best"]["dev"]["accuracy"] for r in trials}  # each trial told its record's holdout score
    for r in grid:  # the chosen values, run on the real split, with a pointer to the study
        assert r["tuned"]["trial"] == best.number and r["tuned"]["journal"] == str(journal)
        assert r["config"]["objective"]["temperature"] == best.params["objective.temperature"]
    again = run_cli_preloaded([*SWEEP, "tune.trials=2", *where, "-m"], cwd=tmp_path)
    assert again.returncode == 0 and "tuning:" not in again.stdout
    assert "0 job(s) to run" in again.stdout and len(records(out)) == 4
    more = run_cli_preloaded([*SWEEP, "tune.trials=3", *where, "-m"], cwd=tmp_path)
    assert more.returncode == 0, more.stderr[-3000:]
    assert len([r for r in records(out) if r.get("tune_trial") is not None]) == 3
    assert json.loads(journal.read_text().splitlines()[0])  # still one journal, continued


def test_the_tuned_demo_preset_gives_every_objective_the_same_budget() -> None:
    cfg = compose_cfg(["experiment=tuned_demo"])
    settings = tune.settings_of(cfg)
    assert settings is not None and settings.trials == 8
    jobs = [["experiment=tuned_demo", *job] for job in expand(["objective=vanilla_kd,att_kl", "seed=1,2,3"])]
    arms = tune.plan_arms([(identify(compose_cfg(job)), job) for job in jobs], compose_cfg, settings)
    assert [len(arm.grid) for arm in arms] == [3, 3]
    assert all(sorted(arm.space) == ["objective.alpha", "objective.temperature", "optimizer.lr"] for arm in arms)


def test_two_sweeps_asking_at_once_do_not_pass_the_budget(tmp_path: Path) -> None:
    """Sweep B asks between sweep A's look at the study and A's own ask: A's trial (numbered later) gives way and A
    runs B's trial instead (waiting on its job's lock), so the arm still gets one trial of a budget of one."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 1, "space": space}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)
    study_a, study_b = tune.open_study(arm, settings, tmp_path), tune.open_study(arm, settings, tmp_path)
    ask, asked_by_b = study_a.ask, []
    study_a.ask = lambda: (asked_by_b.extend(tune.next_trials(arm, study_b, 1)), ask())[1]  # B asks while A does
    (a,) = tune.next_trials(arm, study_a, 1)
    (b,) = asked_by_b
    assert (a.number, a.values) == (b.number, b.values) == (0, b.values)
    given_way = study_a.trials[1]
    assert given_way.state.name == "FAIL" and "abandoned" in given_way.user_attrs
    tune.tell(study_b, b, 0.5)
    tune.tell(study_a, a, 0.5)
    assert [t.state.name for t in study_a.trials] == ["COMPLETE", "FAIL"] and tune.next_trials(arm, study_a, 1) == []


def test_parallel_trials_are_asked_together_up_to_the_budget(tmp_path: Path) -> None:
    """tune.parallel=3, a budget of 4: three distinct trials at once, a killed one run again alone (same number
    and values), then only the one the budget still lacks; the same seed and parallel give the same trials."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 4, "space": space, "seed": 3, "parallel": 3}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)

    def first_round(where: Path) -> list[tune.PendingTrial]:
        return tune.next_trials(arm, tune.open_study(arm, settings, where), 4, settings.parallel)

    study = tune.open_study(arm, settings, tmp_path)
    round_one = tune.next_trials(arm, study, 4, 3)
    assert [p.number for p in round_one] == [0, 1, 2]
    assert len({p.values["objective.temperature"] for p in round_one}) == 3
    tune.tell(study, round_one[0], 0.5)
    tune.tell(study, round_one[2], 0.7)  # trial 1's worker was killed: it stays RUNNING
    (again,) = tune.next_trials(arm, study, 4, 3)
    assert (again.number, again.values) == (1, round_one[1].values)
    tune.tell(study, again, 0.6)
    (last,) = tune.next_trials(arm, study, 4, 3)  # 3 COMPLETE of 4: one more, not three
    assert last.number == 3
    tune.tell(study, last, 0.4)
    assert tune.next_trials(arm, study, 4, 3) == [] and tune.completed(study) == 4
    assert [p.values for p in first_round(tmp_path / "again")] == [p.values for p in round_one]


def test_the_dry_run_prices_the_trials_in_hours_at_the_completed_records_speed(tmp_path: Path) -> None:
    """8 trials x 2 steps x 32 examples = 64 sample-passes each; one completed, 7 left = 448; at the median of 100,
    128 and 200 samples/s (the grid's completed records and the completed trial's record): 448 / 128 / 3600 =
    0.000972 job-hours."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 8, "space": space, "parallel": 2}, "tune")
    (arm,) = tune.plan_arms([(identify(compose_cfg(job := [*FAST, "max_steps_per_epoch=2", "objective=vanilla_kd"])),
                              job)], compose_cfg, settings)
    study = tune.open_study(arm, settings, tmp_path)
    first, _ = tune.next_trials(arm, study, 8, 2)
    from distill_sweep.records import files

    files.write_json_atomic(tmp_path / "t0" / "result.json", {"status": "completed", "samples_per_s": 200.0})
    tune.tell(study, first, 0.5, tmp_path / "t0")
    line = tune.dry_run_line([arm], settings, tmp_path, [{"samples_per_s": 100.0}, {"samples_per_s": 128.0}])
    assert "1 already completed, 7 to run (at most 448 student sample-passes, ~0.000972 job-hours at the median " \
           "128 samples/s of completed jobs" in line
    assert "2 trial(s) at a time (2 per arm)" in line


def test_parallel_is_not_part_of_the_hash() -> None:
    """Another number of workers continues the same studies: tune.parallel leaves the jobs' hash as it is."""
    job = [*FAST, "objective=vanilla_kd", "tune.trials=2", "tune.space={objective.temperature:{low:1.0,high:4.0}}",
           "+tune_trial=0"]
    assert identify(compose_cfg(job)).digest == identify(compose_cfg([*job, "tune.parallel=4"])).digest


@pytest.mark.slow  # a real sweep killed with SIGKILL mid-trial, then run again: about a minute
def test_a_sweep_killed_mid_trial_ends_with_exactly_the_budget(tmp_path: Path, shared_cache: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    import optuna
    from helpers import cli_env, records, run_cli_preloaded

    out = tmp_path / "results"
    args = [*FAST, "objective=vanilla_kd", "seed=1", "epochs=2", "max_steps_per_epoch=4", "checkpoint.every_steps=1",
            "tune.trials=2", "tune.holdout=0.25", "tune.space={objective.temperature:{low:1.0,high:4.0}}",
            f"results_dir={out}", f"cache_dir={shared_cache}", "-m"]
    proc = subprocess.Popen([sys.executable, "-m", "distill_sweep", *args], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=cli_env())
    try:  # killed once the first trial has a checkpoint: mid-trial, its study's trial 0 RUNNING
        deadline = time.monotonic() + 300
        while not any(p.parent.joinpath("checkpoint.pt").exists() for p in out.glob("**/result.json")):
            assert proc.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline, "no trial checkpoint appeared"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    (journal,) = (out / "tuning").glob("*.journal")
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    (name,) = optuna.get_all_study_names(storage)
    assert [t.state.name for t in optuna.load_study(study_name=name, storage=storage).trials] == ["RUNNING"]
    again = run_cli_preloaded(args, cwd=tmp_path, env={"OMP_NUM_THREADS": "1"})
    assert again.returncode == 0, again.stderr[-3000:]
    study = optuna.load_study(study_name=name, storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal))))
    assert [(t.number, t.state.name) for t in study.trials] == [(0, "COMPLETE"), (1, "COMPLETE")]
    trials = sorted((r for r in records(out) if r.get("tune_trial")), key=lambda r: r["tune_trial"]["number"])
    assert [r["tune_trial"]["number"] for r in trials] == [0, 1] and trials[0]["resumed"] == 1
    assert len([r for r in records(out) if r.get("tuned")]) == 1


def test_a_failed_trial_is_asked_again_up_to_a_budget_of_failures(tmp_path: Path) -> None:
    """A trial whose job failed (a learning rate that diverges) is not a result: another is asked in its place, so
    the arm still gets its budget of completed trials; as many failures as the budget stop the arm."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 2, "space": space}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)
    study = tune.open_study(arm, settings, tmp_path)
    for score in (None, 0.6, 0.7):
        (p,) = tune.next_trials(arm, study, 2)
        tune.tell(study, p, score)
    assert tune.next_trials(arm, study, 2) == [] and (tune.completed(study), tune.failed_trials(study)) == (2, 1)
    other = tune.open_study(tune.Arm("x" * 64, "failing", arm.overrides, arm.ident, arm.space, []), settings, tmp_path)
    for _ in range(2):
        (p,) = tune.next_trials(arm, other, 2)
        tune.tell(other, p, None)
    assert tune.next_trials(arm, other, 2) == [] and tune.completed(other) == 0
