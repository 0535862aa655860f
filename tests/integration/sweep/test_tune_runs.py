"""The tuning phase of a sweep (sweep/tune.py): the tests that run a job, a command or processes (its fast tests:
tests/unit/sweep/test_tune.py)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import FAST

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


def test_a_bad_space_stops_the_sweep_before_anything_runs(tmp_path: Path) -> None:
    from helpers import run_cli_preloaded

    out = tmp_path / "results"
    proc = run_cli_preloaded([*SWEEP[:-1], "tune.trials=2", "tune.space={teacher.finetune.lr:{low:1e-5,high:1e-3}}",
                    f"results_dir={out}", f"cache_dir={tmp_path / 'c'}", "-m"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("distill_sweep: error: tune.space.teacher.finetune.lr: "
                                                           "tuning the teacher is out of scope")
    assert not out.exists() and not (tmp_path / "c").exists()


def test_a_tuned_sweep_runs_the_budget_then_the_grid_and_a_rerun_adds_nothing(tmp_path: Path) -> None:
    import shutil

    import optuna
    from helpers import records, run_cli_preloaded

    from distill_sweep.report import checklist

    out, where = tmp_path / "results", [f"results_dir={tmp_path / 'results'}", f"cache_dir={tmp_path / 'c'}"]
    proc = run_cli_preloaded([*SWEEP, "tune.trials=2", *where, "-m"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = records(out)
    trials = [r for r in found if r.get("tune_trial") is not None]
    grid = [r for r in found if r.get("tuned")]
    assert len(found) == 4 and sorted(r["tune_trial"]["number"] for r in trials) == [0, 1]
    assert all(r["data"]["dev_size"] == 64 and r["seed"] == 1 for r in trials)  # 256 x 0.25 held out
    from distill_sweep.config.tune import trial_seed

    assert [(r["tune_trial"]["study"], r["tune_trial"]["sampler"], r["tune_trial"]["order"],
             r["tune_trial"]["sampler_seed"]) for r in sorted(trials, key=lambda r: r["tune_trial"]["number"])] == [
        (0, "tpe", n, trial_seed(0, 0, n)) for n in (0, 1)]  # which draw, by which sampler and seed
    assert sorted(r["seed"] for r in grid) == [1, 2] and all(r["data"]["dev_size"] == 128 for r in grid)
    (journal,) = (out / "tuning").glob("*.journal")
    study = optuna.load_study(study_name=grid[0]["tuned"]["study"], storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal))))
    best = max(study.trials, key=lambda t: t.value)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
    assert {t.value for t in study.trials} == {
        r["best"]["dev"]["accuracy"] for r in trials}  # each trial told its record's holdout score
    for r in grid:  # the chosen values, run on the real split, with a pointer to the study (relative to the store)
        assert r["tuned"]["trial"] == best.number and r["tuned"]["journal"] == f"tuning/{journal.name}"
        assert r["config"]["objective"]["temperature"] == best.params["objective.temperature"]
    said = proc.stdout + proc.stderr  # a trial's lines say which trial, of how many, scored on the holdout
    assert "distill_sweep: tuning, round 1 of 2: 1 trial(s) (trial 1) of 1 arm(s)" in said
    assert "[trial 2 of 2] prediction epoch 1/1 loss " in said and " holdout accuracy=" in said
    assert "done trial 1 of 2 of toy/vanilla_kd init-1 seed 1: best holdout accuracy " in said
    shutil.copytree(out, tmp_path / "copy")
    again = run_cli_preloaded([*SWEEP, "tune.trials=2", *where, "-m"], cwd=tmp_path)
    assert again.returncode == 0 and "tuning" not in again.stdout
    assert "0 job(s) to run" in again.stdout and len(records(out)) == 4
    # a kill during Optuna's write left half a line: set aside, the whole trials kept, the sweep goes on
    with journal.open("ab") as f:
        f.write(b'{"op_code":5,"worker_id":"x","trial_id":')
    more = run_cli_preloaded([*SWEEP, "tune.trials=3", *where, "-m"], cwd=tmp_path)
    assert more.returncode == 0, more.stderr[-3000:]
    assert f"the tuning journal {journal} was damaged: its last line is torn" in more.stderr
    assert len([r for r in records(out) if r.get("tune_trial") is not None]) == 3
    assert json.loads(journal.read_text().splitlines()[0])  # still one journal, continued
    # the copy reads its own study (2 trials), not the original's (3): every stored path is relative to the store
    assert [(a["completed_trials"], a["trials"]) for a in checklist.tuning_arms(tmp_path / "copy")] == [(2, 2)]
    assert [(a["completed_trials"], a["trials"]) for a in checklist.tuning_arms(out)] == [(3, 3)]


def test_a_sweep_killed_mid_trial_ends_with_exactly_the_budget(tmp_path: Path, shared_cache: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    import optuna
    from helpers import cli_env, compose_cfg, records, run_cli_preloaded

    from distill_sweep.config.parse import parse
    from distill_sweep.config.tune import TuneSettings
    from distill_sweep.job.identity import identify
    from distill_sweep.sweep import tune

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
    # trial 1, asked by the second sweep, is the uninterrupted sweep's trial 1: drawn from trial 0's result and its
    # own seed (a sampler seeded once per process drew trial 0's value again)
    settings = parse(TuneSettings, {"trials": 2, "holdout": 0.25,
                                    "space": {"objective.temperature": {"low": 1.0, "high": 4.0}}}, "tune")
    job = [a for a in args if a != "-m"]
    (arm,) = tune.plan_arms([(identify(compose_cfg(job)), job)], compose_cfg, settings)
    whole = tune.open_study(arm, settings, tmp_path / "uninterrupted")
    (zero,) = tune.next_trials(arm, whole, 2)
    assert zero.values == study.trials[0].params
    tune.tell(whole, zero, study.trials[0].value)
    (one,) = tune.next_trials(arm, whole, 2)
    assert one.values == study.trials[1].params != study.trials[0].params


def test_two_tuned_sweeps_on_one_study_at_once_both_finish(tmp_path: Path, shared_cache: Path) -> None:
    """Two sweeps started together on one results directory tell the same study: each runs the trials the other
    has not (or waits for the other's on its job's lock) and both tell them; neither dies on a trial the other
    told (Optuna's UpdateFinishedTrialError), and the arm ends with exactly its budget and one grid job."""
    import subprocess
    import sys

    import optuna
    from helpers import cli_env, records

    out = tmp_path / "results"
    args = [*SWEEP[:-3], "seed=1", "tune.holdout=0.25", SWEEP[-1], "tune.trials=2", f"results_dir={out}",
            f"cache_dir={shared_cache}", "-m"]
    logs = [tmp_path / f"sweep-{i}.err" for i in range(2)]
    procs = []
    for log in logs:  # (files, not pipes: a sweep that filled its pipe would stop and hold its lock)
        with log.open("w") as err:
            procs.append(subprocess.Popen([sys.executable, "-m", "distill_sweep", *args], cwd=tmp_path,
                                          stdout=subprocess.DEVNULL, stderr=err, env=cli_env()))
    outcomes = [(p.wait(timeout=600), log.read_text()) for p, log in zip(procs, logs, strict=True)]
    assert [rc for rc, _ in outcomes] == [0, 0], [err[-2000:] for _, err in outcomes]
    assert not any("Traceback" in err for _, err in outcomes)
    (journal,) = (out / "tuning").glob("*.journal")
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    (name,) = optuna.get_all_study_names(storage)
    trials = optuna.load_study(study_name=name, storage=storage).trials
    assert sum(t.state.name == "COMPLETE" for t in trials) == 2
    assert all(t.state.name == "COMPLETE" or "abandoned" in t.user_attrs for t in trials)
    assert len([r for r in records(out) if r.get("tuned")]) == 1


def test_packed_trials_share_their_packs_time(tmp_path: Path, shared_cache: Path) -> None:
    """tune.parallel=2: the round's two trials share batches and train in one pack; each record says so, and the
    checklist charges the two together the pack's time (the longer member's wall time), not each of them all of
    it."""
    from helpers import records, run_cli_preloaded

    from distill_sweep.report import checklist

    out = tmp_path / "results"
    proc = run_cli_preloaded([*SWEEP[:-3], "seed=1", "tune.holdout=0.25", SWEEP[-1], "tune.trials=2",
                              "tune.parallel=2", f"results_dir={out}", f"cache_dir={shared_cache}", "-m"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = [r for r in records(out) if r.get("tune_trial") is not None]
    assert len(trials) == 2 and trials[0]["pack"] == trials[1]["pack"] and trials[0]["pack"].startswith("pack-")
    (arm,) = checklist.tuning_arms(out)
    walls = sorted(r["wall_time_s"] for r in trials)
    assert abs(arm["compute_hours"]["trials"]["cpu"] * 3600 - walls[1]) < 1e-9  # walls[0]/2 + (walls[0]/2 + rest)


def test_packed_trials_of_two_arms_are_the_trials_trained_alone(tmp_path: Path, shared_cache: Path) -> None:
    """A round of QMC trials of two objectives (same point, same batches) trained in one pack: each trial's
    record has the numbers it has trained alone, bit for bit (per-epoch losses, holdout metrics, best epoch)."""
    from helpers import compose_cfg
    from omegaconf import OmegaConf

    from distill_sweep.cli.run_job import run_job, run_pack
    from distill_sweep.job.identity import identify
    from distill_sweep.sweep.packs import write_pack_file

    def trials(results: Path) -> list:
        common = [*FAST, "max_steps_per_epoch=2", "pack=auto", "tune.trials=2", "tune.sampler=qmc",
                  "tune.holdout=0.25", SWEEP[-1], "objective.temperature=2.5", "+tune_trial=0",
                  f"cache_dir={shared_cache}", f"results_dir={results}"]
        return [compose_cfg([*common, f"objective={o}"]) for o in ("vanilla_kd", "att_kl")]

    alone = {r["objective"]: r for r in (run_job(cfg) for cfg in trials(tmp_path / "alone"))}
    cfgs = trials(tmp_path / "packed")
    run_pack(OmegaConf.create({"pack_file": str(write_pack_file(tmp_path / "packs", [identify(c) for c in cfgs]))}))
    packed = {r["objective"]: r for r in (json.loads(p.read_text()) for p in (tmp_path / "packed").rglob("result.json"))}
    for objective, solo in alone.items():
        member = packed[objective]
        assert member["pack"] and not solo.get("pack") and member["config_hash"] == solo["config_hash"]
        assert member["tune_trial"] == solo["tune_trial"] and member["tune_trial"]["sampler"] == "qmc"
        assert member["epochs"] and "train_loss" in member["epochs"][-1] and "accuracy" in member["best"]["dev"]
        for key in ("epochs", "best"):
            assert member[key] == solo[key], (objective, key)


def test_a_pruned_sweep_stops_trials_early_and_counts_them_in_the_budget(tmp_path: Path, shared_cache: Path) -> None:
    """tune.pruner=asha, 4 trials of 2 epochs, the study's trial 0 told by hand first (holdout accuracy 0.99 at both
    rungs, above anything the toy student reaches in a few steps: it scores 0.4375, the majority class, at every
    evaluation). Each trial the sweep runs reports its holdout accuracy after each epoch to its study (through the
    journal the sweeper names) and goes on only while it is among the best floor(k / 2) (at least 1) of the k
    trials at that rung (successive halving, a reduction factor of 2). Rung 0: trial 1 is not the best of
    (0.99, 0.4375), trial 2 not the best of (0.99, 0.4375, 0.4375): both stop after epoch 1; trial 3 ties the
    second best of four and goes on, then at rung 1 is not the best of (0.99, 0.4375): it stops after epoch 2,
    before any more training. Each record says where, the study holds them PRUNED, and the budget counts them: 4
    trials spent, the grid run at trial 0's values."""
    import optuna
    from helpers import compose_cfg, records, run_cli_preloaded

    from distill_sweep.config.parse import parse
    from distill_sweep.config.tune import TuneSettings
    from distill_sweep.job.identity import identify
    from distill_sweep.sweep import tune
    from distill_sweep.training.trial_pruning import make_pruner

    out = tmp_path / "results"
    args = [*SWEEP[:-3], "seed=1", "epochs=2", "tune.holdout=0.25", SWEEP[-1], "tune.trials=4", "tune.sampler=qmc",
            "tune.pruner=asha", f"results_dir={out}", f"cache_dir={shared_cache}"]
    settings = parse(TuneSettings, {"trials": 4, "holdout": 0.25, "sampler": "qmc", "pruner": "asha",
                                    "space": {"objective.temperature": {"low": 1.0, "high": 4.0}}}, "tune")
    (arm,) = tune.plan_arms([(identify(compose_cfg(args)), args)], compose_cfg, settings)
    study = tune.open_study(arm, settings, out)
    study.pruner = make_pruner("asha")
    (first,) = tune.next_trials(arm, study, 4)
    trial = optuna.trial.Trial(study, study.trials[0]._trial_id)
    for step in (1, 2):
        trial.report(0.99, step)
        assert not trial.should_prune()
    tune.tell(study, first, 0.99)
    proc = run_cli_preloaded([*args, "-m"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = sorted((r for r in records(out) if r.get("tune_trial") is not None), key=lambda r: r["tune_trial"]["number"])
    study = optuna.load_study(study_name=arm.name, storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(arm.journal(out)))))
    assert [t.state.name for t in study.trials] == ["COMPLETE", "PRUNED", "PRUNED", "PRUNED"]
    assert [r["tune_trial"]["number"] for r in trials] == [1, 2, 3]
    for record, trial, rung in zip(trials, study.trials[1:], (0, 0, 1), strict=True):
        assert record["tune_trial"]["pruned"] == {"pruner": "asha", "rung": rung, "stage": "prediction",
                                                  "epoch": rung + 1, "step": record["epochs"][rung]["step"],
                                                  "metric": "accuracy", "value": 0.4375}
        assert len(record["epochs"]) == rung + 1 and list(trial.intermediate_values) == list(range(1, rung + 2))
    assert "pruned by the asha pruner at rung 1 (prediction epoch 1" in proc.stdout + proc.stderr
    from distill_sweep.report import checklist

    assert "- trials: 1 completed and 3 pruned of a budget of 4" in checklist.checklist_markdown(
        checklist.tuning_arms(out))
    (grid,) = [r for r in records(out) if r.get("tuned")]
    assert grid["tuned"]["trial"] == 0 and grid["config"]["objective"]["temperature"] == first.values[
        "objective.temperature"]
