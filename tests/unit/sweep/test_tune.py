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
     r"^tune\.space\.task\.max_seq_length: a task key changes the data every arm is compared on"),
    # only keys that change how the student trains: never a seed, the tune block itself, or where a job runs
    (["objective=vanilla_kd"], {"seed": [1, 2, 3]}, r"^tune\.space\.seed: a seed is not a setting to tune"),
    (["objective=vanilla_kd"], {"seeds.init": [1, 2]}, r"^tune\.space\.seeds\.init: a seed is not a setting"),
    (["objective=vanilla_kd"], {"teacher.finetune.seed": [1, 2]}, r"^tune\.space\.teacher\.finetune\.seed: a seed"),
    (["objective=vanilla_kd"], {"tune.holdout": {"low": 0.1, "high": 0.4}},
     r"^tune\.space\.tune\.holdout: the tune block's own keys .* cannot vary between trials$"),
    (["objective=vanilla_kd"], {"eval_batch_size": [8, 64]},
     r"^tune\.space\.eval_batch_size: it says where or how a job runs, not what it trains"),
    (["objective=vanilla_kd"], {"threads": [1, 2]}, r"^tune\.space\.threads: it says where or how a job runs"),
    (["objective=vanilla_kd"], {"results_dir": ["a", "b"]}, r"^tune\.space\.results_dir: it says where or how"),
    (["objective=vanilla_kd"], {"checkpoint.every_steps": [0, 5]},
     r"^tune\.space\.checkpoint\.every_steps: it says where or how a job runs"),
    (["objective=vanilla_kd"], {"logger.name": ["none", "wandb"]}, r"^tune\.space\.logger\.name: the logger"),
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


def test_the_students_training_keys_may_be_tuned() -> None:
    """Top-level training keys (epochs) and the student's groups are identity keys the study may vary."""
    (arm,) = _arms(["objective=vanilla_kd"], {"epochs": [1, 2], "optimizer.lr": [1e-4, 1e-3],
                                              "objective.alpha": {"low": 0.1, "high": 0.9}})
    assert sorted(arm.space) == ["epochs", "objective.alpha", "optimizer.lr"] and arm.left_out == []
