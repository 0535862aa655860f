"""A tuned sweep whose budget is in FLOPs (sweep/tune_budget.py): two arms of unequal cost per trial end within
one trial's FLOPs of each other, every trial's record holds its cost, a re-run continues to the same budget (it
adds nothing), and the report compares the arms at every budget."""

from __future__ import annotations

from pathlib import Path

from helpers import FAST


def test_arms_of_unequal_cost_stop_at_equal_flops(tmp_path: Path, shared_cache: Path) -> None:
    from helpers import records, run_cli_preloaded

    from distill_sweep.report import checklist

    out, where = tmp_path / "results", [f"results_dir={tmp_path / 'results'}", f"cache_dir={shared_cache}"]
    # att_kl trains an intermediate stage before its prediction stage: its trials cost more FLOPs than vanilla_kd's
    sweep = [*FAST, "max_steps_per_epoch=2", "objective=vanilla_kd,att_kl", "seed=1", "tune.holdout=0.25",
             "tune.space={objective.temperature:{low:1.0,high:4.0}}", "tune.trials=2", "tune.budget_by=flops", *where,
             "-m"]
    proc = run_cli_preloaded(sweep, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials: dict[str, list[dict]] = {}
    for record in records(out):
        if record.get("tune_trial") is not None:
            trials.setdefault(record["objective"], []).append(record)
    assert set(trials) == {"vanilla_kd", "att_kl"}
    costs = {o: [r["cost"]["flops"] for r in sorted(rs, key=lambda r: r["tune_trial"]["number"])]
             for o, rs in trials.items()}
    assert all(c > 0 for cs in costs.values() for c in cs)
    assert min(costs["att_kl"]) > max(costs["vanilla_kd"])  # the dearer arm
    budget = 2 * (costs["vanilla_kd"][0] + costs["att_kl"][0]) / 2  # tune.trials x the mean first-trial cost
    spent = {o: sum(cs) for o, cs in costs.items()}
    for cs in costs.values():  # each stopped by the trial that reached the budget
        assert sum(cs) >= budget and sum(cs[:-1]) < budget
    assert abs(spent["vanilla_kd"] - spent["att_kl"]) < max(c for cs in costs.values() for c in cs)
    assert len(costs["vanilla_kd"]) > len(costs["att_kl"])  # the cheaper arm ran more trials
    said = proc.stdout + proc.stderr
    assert f"= {budget:.4g} FLOPs per arm" in said and "within one trial's cost" in said
    assert "tuning, round 1 (a budget in flops)" in said
    again = run_cli_preloaded(sweep, cwd=tmp_path)  # the same records, the same budget: nothing more to run
    assert again.returncode == 0, again.stderr[-2000:]
    assert "0 job(s) to run" in again.stdout
    assert sum(r.get("tune_trial") is not None for r in records(out)) == sum(map(len, costs.values()))
    arms = {a["objective"]: a for a in checklist.tuning_arms(out)}
    assert arms["att_kl"]["cost"]["unit"] == "flops" and arms["att_kl"]["cost"]["flops"] == spent["att_kl"]


def test_studies_of_two_arms_each_stop_at_one_budget_in_flops(tmp_path: Path, shared_cache: Path) -> None:
    """tune.studies=2 x budget_by=flops (the sweeper's rounds over every study of every arm): B is one amount for
    all four studies, tune.trials x the mean of their four first trials' FLOPs; each study stops with the trial that
    reaches B, so every study of either arm is within one trial's FLOPs of B; the report pools both studies'
    trials."""
    from helpers import records, run_cli_preloaded

    from distill_sweep.report import checklist

    out = tmp_path / "results"
    sweep = [*FAST, "max_steps_per_epoch=2", "objective=vanilla_kd,att_kl", "seed=1", "tune.holdout=0.25",
             "tune.space={objective.temperature:{low:1.0,high:4.0}}", "tune.trials=2", "tune.studies=2",
             "tune.sampler=qmc", "tune.budget_by=flops", f"results_dir={out}", f"cache_dir={shared_cache}", "-m"]
    proc = run_cli_preloaded(sweep, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    costs: dict[tuple[str, int], list[float]] = {}
    for record in sorted((r for r in records(out) if r.get("tune_trial") is not None),
                         key=lambda r: r["tune_trial"]["number"]):
        costs.setdefault((record["objective"], record["tune_trial"].get("study") or 0), []).append(
            record["cost"]["flops"])
    assert sorted(costs) == [("att_kl", 0), ("att_kl", 1), ("vanilla_kd", 0), ("vanilla_kd", 1)]
    budget = 2 * sum(cs[0] for cs in costs.values()) / 4  # tune.trials x the mean of the 4 studies' first trials
    for cs in costs.values():  # each study stopped by the trial that reached B: within one trial's cost of it
        assert sum(cs[:-1]) < budget <= sum(cs) < budget + max(cs)
    assert f"= {budget:.4g} FLOPs per study, every study of every arm" in proc.stdout
    arms = {a["objective"]: a for a in checklist.tuning_arms(out)}
    for objective in ("vanilla_kd", "att_kl"):  # both studies' trials, pooled, in the curve
        n = len(costs[(objective, 0)]) + len(costs[(objective, 1)])
        assert arms[objective]["completed_trials"] == n and len(arms[objective]["expected_best"]) == n
