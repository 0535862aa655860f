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
from distill_sweep.sweep import journal, tune
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
    (["objective=vanilla_kd"], {"threads": [1, 2]},
     r"^tune\.space\.threads: no score depends on it beyond run-to-run noise \(declared non-deterministic\)"),
    (["objective=vanilla_kd"], {"precision": ["fp32", "bf16"]}, r"^tune\.space\.precision: it changes the teacher"),
    (["objective=vanilla_kd"], {"results_dir": ["a", "b"]}, r"^tune\.space\.results_dir: it says where or how"),
    (["objective=vanilla_kd"], {"checkpoint.every_steps": [0, 5]},
     r"^tune\.space\.checkpoint\.every_steps: it says where or how a job runs"),
    (["objective=vanilla_kd"], {"logger.name": ["none", "wandb"]}, r"^tune\.space\.logger\.name: the logger"),
    (["objective=vanilla_kd"], {"objective.name": ["vanilla_kd", "att_kl"]},
     r"^tune\.space\.objective\.name: the objective is what the arms of a comparison are"),
    (["objective=att_kl", "init=1,3"], {"init": [1, 2, 3]},
     r"^tune\.space\.init: the grid sweeps it too \(its jobs take 2 values\): a study would override each cell's"),
    (["objective=att_kl", "map=skip,last"], {"map": ["skip", "last"]}, r"^tune\.space\.map: the grid sweeps it too"),
    (["objective=vanilla_kd"], {"procedure.lm_eval.limit": [4, 8]},
     r"^tune\.space\.procedure\.lm_eval\.limit: the lm-eval stage scores the trained student"),
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


def _run_trials(arm: tune.Arm, settings: TuneSettings, where: Path, kill_after: int | None = None) -> list[float]:
    """Asks and tells the arm's trials (score: a fixed function of the value) until its budget is spent; with
    `kill_after`, the study is opened again (a new sweep process: a new sampler) after that many trials were told."""
    study, drawn = tune.open_study(arm, settings, where), []
    while pending := tune.next_trials(arm, study, settings.trials):
        for p in pending:
            tune.tell(study, p, 1.0 / (1.0 + abs(p.values["objective.temperature"] - 2.5)))
            drawn.append(p.values["objective.temperature"])
            if len(drawn) == kill_after:
                study = tune.open_study(arm, settings, where)
    return drawn


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_a_resumed_study_draws_what_the_uninterrupted_one_drew(tmp_path: Path, sampler: str) -> None:
    """A sweep killed after its first trial and run again draws trial 1 from the study's history and the trial's own
    seed, as the uninterrupted sweep did; a sampler seeded once per process started its stream again from tune.seed
    and repeated trial 0's values (the study held [v0, v0])."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 4, "space": space, "seed": 7, "sampler": sampler}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)
    whole = _run_trials(arm, settings, tmp_path / "whole")
    assert len(set(whole)) == 4
    for kill_after in (1, 2):
        assert _run_trials(arm, settings, tmp_path / f"killed-{kill_after}", kill_after) == whole


def _told(arm: tune.Arm, settings: TuneSettings, where: Path, n: int) -> list[tune.PendingTrial]:
    study, told = tune.open_study(arm, settings, where), []
    for i in range(n):
        (p,) = tune.next_trials(arm, study, settings.trials)
        tune.tell(study, p, 0.5 + i / 10)
        told.append(p)
    return told


def test_a_torn_journal_tail_is_set_aside_and_the_whole_trials_kept(tmp_path: Path, capsys) -> None:
    """A kill during Optuna's write leaves half a line at the journal's end; the next write would run into it and
    every later read fail. The next sweep sets the file aside (one line), keeps the whole entries, and goes on."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 3, "space": space}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)
    told = _told(arm, settings, tmp_path, 2)
    journal = arm.journal(tmp_path)
    whole = journal.read_bytes()
    torn = whole + b'{"op_code": 6, "worker_id": "abc", "trial_'
    journal.write_bytes(torn)
    study = tune.open_study(arm, settings, tmp_path)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"distill_sweep: warning: the tuning journal {journal} was damaged: its last line is "
                           "torn (a write cut short): the file is set aside as ")
    (aside,) = tmp_path.glob("tuning/*.corrupt-*")
    assert aside.read_bytes() == torn and journal.read_bytes().startswith(whole)  # (+ the study's opening line)
    assert [t.value for t in study.trials] == [0.5, 0.6]
    (p,) = tune.next_trials(arm, study, 3)
    tune.tell(study, p, 0.9)
    again = tune.open_study(arm, settings, tmp_path)
    assert capsys.readouterr().err == "" and [t.value for t in again.trials] == [0.5, 0.6, 0.9]
    assert [t.params for t in again.trials[:2]] == [p.values for p in told]


def test_a_directory_where_the_journal_goes_is_set_aside_and_the_study_starts_again(tmp_path: Path, capsys) -> None:
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 3, "space": space}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)
    journal = arm.journal(tmp_path)
    (journal / "inside").mkdir(parents=True)
    study = tune.open_study(arm, settings, tmp_path)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"distill_sweep: warning: the tuning journal {journal} was damaged: it is not a file: "
                           "set aside as ")
    (aside,) = tmp_path.glob("tuning/*.corrupt-*")
    assert (aside / "inside").is_dir() and journal.is_file() and study.trials == []


@pytest.mark.parametrize("damage", ["a line inside", "random bytes"])
def test_a_damaged_journal_is_set_aside_and_its_work_redone(tmp_path: Path, capsys, damage: str) -> None:
    """A broken line inside: the entries before it are kept (a consistent state of the study: one change each), the
    trials after it asked again; random bytes: the study starts again. Each trial's values come from its number and
    the trials before it, so the trials asked again are the ones whose records are on disk (found completed)."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 3, "space": space}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)
    told = _told(arm, settings, tmp_path, 2)
    journal = arm.journal(tmp_path)
    lines = journal.read_bytes().splitlines(keepends=True)
    first_trial_ends = next(i for i, line in enumerate(lines) if b'"op_code":6' in line) + 1  # trial 0 told
    if damage == "random bytes":
        journal.write_bytes(bytes(range(256)) * 4)
    else:
        journal.write_bytes(b"".join([*lines[:first_trial_ends], b"\x00\xffnot json\n", *lines[first_trial_ends:]]))
    study = tune.open_study(arm, settings, tmp_path)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "was damaged: line " in line and "is not a journal entry: the file is set aside as " in line
    assert len(list(tmp_path.glob("tuning/*.corrupt-*"))) == 1
    kept = 1 if damage == "a line inside" else 0
    assert [t.value for t in study.trials] == [0.5][:kept]
    redone = []
    while len(redone) < 2 - kept:
        (p,) = tune.next_trials(arm, study, 3)
        tune.tell(study, p, 0.5 + p.number / 10)
        redone.append(p)
    assert [(p.number, p.values) for p in redone] == [(p.number, p.values) for p in told[kept:]]


def test_two_sweeps_telling_one_trial_at_once_both_go_on(tmp_path: Path) -> None:
    """Two sweeps run the same trial (its job's lock makes one wait for the other) and both tell it: the second
    one's look at the study can come before the first one's write. Its tell then leaves the trial as told, where
    Optuna raised UpdateFinishedTrialError and the sweep died."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 2, "space": space}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)
    study_a, study_b = tune.open_study(arm, settings, tmp_path), tune.open_study(arm, settings, tmp_path)
    (p,) = tune.next_trials(arm, study_a, 2)
    (same,) = tune.next_trials(arm, study_b, 2)
    assert same.number == p.number
    look = study_a.get_trials

    def b_tells_after_a_looks(*args, **kwargs):
        trials = look(*args, **kwargs)
        study_a.get_trials = look
        tune.tell(study_b, same, 0.7, tmp_path / "trial-0", tmp_path)
        return trials

    study_a.get_trials = b_tells_after_a_looks
    tune.tell(study_a, p, 0.7, tmp_path / "trial-0", tmp_path)
    assert [(t.state.name, t.value, t.user_attrs) for t in study_a.trials] == [("COMPLETE", 0.7, {"record": "trial-0"})]
    (nxt,) = tune.next_trials(arm, study_a, 2)
    assert nxt.number == 1


def test_stored_paths_are_relative_to_the_results_directory(tmp_path: Path) -> None:
    """chosen.json, the trials' record pointers and the grid's `+tune_chosen` name paths inside the results
    directory relative to it, so that a copied results directory reads its own studies."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 1, "space": space}, "tune")
    (arm,) = _arms(["objective=vanilla_kd", "seed=1,2"], space)
    study = tune.open_study(arm, settings, tmp_path)
    (p,) = tune.next_trials(arm, study, 1)
    tune.tell(study, p, 0.5, tmp_path / "toy" / "trial-0", tmp_path)
    tune.choose(arm, study, tmp_path, settings)
    chosen = json.loads(tune.chosen_path(arm, tmp_path).read_text())
    assert chosen["journal"] == f"tuning/{arm.digest[:10]}.journal"
    assert study.trials[0].user_attrs == {"record": "toy/trial-0"}
    assert all(job[-1] == f"+tune_chosen='tuning/{arm.digest[:10]}.chosen.json'" for job in tune.tuned_grid(arm, tmp_path))
    assert journal.stored_at("toy/trial-0", tmp_path / "copy") == tmp_path / "copy" / "toy" / "trial-0"
    assert journal.stored_at("/elsewhere/x", tmp_path) == Path("/elsewhere/x")  # (journals from before: as written)


def test_trial_and_round_lines_say_which_of_how_many(tmp_path: Path) -> None:
    """A trial's lines name it `trial k of N` (from 1); the sweep says `round k of N` before each round."""
    from distill_sweep.config.tune import trial_label

    assert trial_label(0, 8) == "trial 1 of 8" and trial_label(7, 8) == "trial 8 of 8"
    assert trial_label(8, 8) == "trial 9 (a budget of 8: failed ones asked again)"
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 4, "space": space, "parallel": 2}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)
    studies = {arm.digest: tune.open_study(arm, settings, tmp_path)}
    first = tune.next_trials(arm, studies[arm.digest], 4, 2)
    assert tune.round_line(first, studies, settings, 1) == (
        "distill_sweep: tuning, round 1 of 2: 2 trial(s) (trials 1, 2) of 1 arm(s), 1 of them completed before")
    for p in first:
        tune.tell(studies[arm.digest], p, 0.5)
    second = tune.next_trials(arm, studies[arm.digest], 4, 2)
    assert tune.round_line(second, studies, settings, 0).startswith("distill_sweep: tuning, round 2 of 2: 2 trial(s) "
                                                                    "(trials 3, 4)")


def test_the_dry_run_reads_a_damaged_journal_as_nothing_completed(tmp_path: Path, capsys) -> None:
    """The dry run writes nothing: a journal Optuna cannot read is counted as no trial completed, said in one
    line, and left for the sweep that runs to set aside."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 3, "space": space}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)
    _told(arm, settings, tmp_path, 2)
    journal = arm.journal(tmp_path)
    damaged = b"\x00garbage\n" + journal.read_bytes()
    journal.write_bytes(damaged)
    assert "0 already completed, 3 to run" in tune.dry_run_line([arm], settings, tmp_path)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"distill_sweep: warning: the tuning journal {journal} cannot be read: the sweep will set it " \
                   "aside and ask its trials again"
    assert journal.read_bytes() == damaged and list(tmp_path.glob("tuning/*.corrupt-*")) == []


def test_a_trial_asked_without_all_its_values_is_given_up(tmp_path: Path) -> None:
    """A sweep stopped between Optuna's ask and its values (or a journal mended back to that point) leaves a
    RUNNING trial that holds only some of the space's values: run as it is, its job would train the defaults of
    the others under that trial's number. It is given up (`abandoned`, not a failure) and another asked."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}, "objective.alpha": {"low": 0.1, "high": 0.9}}
    settings = parse(TuneSettings, {"trials": 2, "space": space}, "tune")
    (arm,) = _arms(["objective=vanilla_kd"], space)
    study = tune.open_study(arm, settings, tmp_path)
    study.ask().suggest_float("objective.temperature", 1.0, 4.0)  # ... and the sweep dies before alpha
    (p,) = tune.next_trials(arm, study, 2)
    assert p.number == 1 and sorted(p.values) == ["objective.alpha", "objective.temperature"]
    half = study.trials[0]
    assert half.state.name == "FAIL" and "abandoned" in half.user_attrs and tune.failed_trials(study) == 0
