"""Budgets in measured cost (sweep/tune_budget.py): each round an arm runs its next trial while its spent cost is
below the budget, so that every arm's cost ends within one trial's cost of the others'."""

from __future__ import annotations

import random
from pathlib import Path

import optuna
import pytest

from distill_sweep.config.parse import parse
from distill_sweep.config.tune import TuneSettings
from distill_sweep.errors import ConfigError
from distill_sweep.records.blocks import Cost
from distill_sweep.records.record import Record, write_record
from distill_sweep.sweep.tune_budget import ArmSpend, Budget, reference_budget, trials_to_ask


def test_an_arm_asks_one_trial_while_below_the_budget_and_none_at_it() -> None:
    assert trials_to_ask(spent=9.9, budget=10.0, mean_cost=3.0, parallel=1) == 1
    assert trials_to_ask(spent=10.0, budget=10.0, mean_cost=3.0, parallel=1) == 0
    # parallel 4: the 5 left hold ceil(5 / 2) = 3 trials of 2
    assert trials_to_ask(spent=5.0, budget=10.0, mean_cost=2.0, parallel=4) == 3
    assert trials_to_ask(spent=0.0, budget=10.0, mean_cost=None, parallel=4) == 1


def test_the_reference_budget_is_trials_times_the_mean_first_cost() -> None:
    assert reference_budget(4, [2.0, 6.0, None]) == pytest.approx(4 * 4.0)
    assert reference_budget(4, [None]) is None


@pytest.mark.parametrize("seed", range(5))
def test_arms_of_unequal_cost_end_within_one_trials_cost(seed: int) -> None:
    """Three arms whose trials cost about 1, 3 and 7 units (noisy), run round by round under the rule."""
    rng = random.Random(seed)
    means = [1.0, 3.0, 7.0]
    arms = [ArmSpend([]) for _ in means]
    draw = [lambda m=m: m * rng.uniform(0.7, 1.3) for m in means]
    for arm, d in zip(arms, draw, strict=True):  # round 1: every arm's first trial fixes the budget
        arm.costs.append(d())
    budget = reference_budget(5, [a.costs[0] for a in arms])
    assert budget is not None
    while True:
        asked = [trials_to_ask(a.spent(None), budget, a.mean(), 1) for a in arms]
        if not any(asked):
            break
        for arm, n, d in zip(arms, asked, draw, strict=True):
            arm.costs.extend(d() for _ in range(n))
    spent = [a.spent(None) for a in arms]
    for arm, cost in zip(arms, spent, strict=True):
        assert budget <= cost < budget + arm.costs[-1]  # stopped by the trial that reached the budget
    largest = max(c for a in arms for c in a.costs)
    assert max(spent) - min(spent) < largest
    assert len(arms[0].costs) > len(arms[2].costs)  # the cheap arm ran more trials than the dear one


def _study_with_costs(results: Path, name: str, costs: list[float | None]) -> optuna.Study:
    study = optuna.create_study(study_name=name, direction="maximize")
    for i, cost in enumerate(costs):
        trial = study.ask()
        where = results / name / str(i)
        record = Record(task="toy", objective="vanilla_kd", seed=1, status="completed", primary_metric="accuracy",
                        epochs=[{"stage": "prediction", "epoch": 1, "dev": {"accuracy": 0.5}}],
                        best={"stage": "prediction", "epoch": 1, "dev": {"accuracy": 0.5}},
                        final={"dev": {"accuracy": 0.5}},
                        cost=None if cost is None else Cost(cpu_seconds=cost, flops=1e9 * cost))
        where.mkdir(parents=True)
        write_record(where / "result.json", record)
        trial.set_user_attr("record", f"{name}/{i}")
        study.tell(trial, 0.5)
    return study


def _tune(**keys) -> TuneSettings:
    settings = parse(TuneSettings, {"trials": 3, "space": {"objective.temperature": {"low": 1, "high": 4}},
                                    **keys}, "tune")
    settings.validate("tune")
    return settings


def test_the_budget_from_records_in_seconds_and_flops(tmp_path: Path) -> None:
    cheap = _study_with_costs(tmp_path, "cheap", [2.0, 2.0])
    dear = _study_with_costs(tmp_path, "dear", [6.0])
    studies = [cheap, dear]
    budget = Budget(_tune(budget_by="seconds"), tmp_path)
    assert budget.amount(studies) == pytest.approx(3 * (2.0 + 6.0) / 2)  # 12 s
    assert budget.trials_for(cheap, studies) == 3 and budget.trials_for(dear, studies) == 2
    assert not budget.spent_for(cheap, studies)
    flops = Budget(_tune(budget_by="flops"), tmp_path)
    assert flops.amount(studies) == pytest.approx(12e9)
    # a resumed sweep (a new Budget over the same records) continues to the same budget
    assert Budget(_tune(budget_by="seconds"), tmp_path).amount(studies) == budget.amount(studies)
    assert "= 12 seconds" in budget.line(studies) and "within one trial's cost" in budget.line(studies)


def test_an_explicit_budget_and_one_reached(tmp_path: Path) -> None:
    arm = _study_with_costs(tmp_path, "arm", [4.0, 4.0, 4.0])
    budget = Budget(_tune(budget_by="seconds", budget=10.0), tmp_path)
    assert budget.amount([arm]) == 10.0 and budget.spent_for(arm, [arm])
    assert budget.trials_for(arm, [arm]) == 3  # no new trial
    assert "10 seconds" in budget.line([arm])


def test_until_every_arm_has_a_first_trial_only_first_trials_run(tmp_path: Path) -> None:
    done = _study_with_costs(tmp_path, "done", [5.0])
    fresh = _study_with_costs(tmp_path, "fresh", [])
    budget = Budget(_tune(budget_by="flops"), tmp_path)
    assert budget.amount([done, fresh]) is None
    assert budget.trials_for(done, [done, fresh]) == 1 and budget.trials_for(fresh, [done, fresh]) == 1
    assert "fixed once every arm's first trial has completed" in budget.line([done, fresh])


def test_a_damaged_cost_counts_as_the_reference() -> None:
    from distill_sweep.sweep.tune_budget import trial_cost

    def record(cpu: object) -> Record:
        return Record(task="toy", objective="vanilla_kd", seed=1, cost=Cost(cpu_seconds=cpu))  # type: ignore[arg-type]

    assert trial_cost(record("many"), "seconds") is None and trial_cost(record(-1.0), "seconds") is None
    assert trial_cost(record(2.5), "seconds") == 2.5 and trial_cost(record(2.5), "flops") is None
    assert ArmSpend([1.0, None]).spent(reference=4.0) == 5.0


def test_no_cost_known_falls_back_to_the_budget_in_trials(tmp_path: Path) -> None:
    a = _study_with_costs(tmp_path, "a", [None, None])
    b = _study_with_costs(tmp_path, "b", [None])
    budget = Budget(_tune(budget_by="flops"), tmp_path)
    assert budget.unknowable([a, b]) and budget.trials_for(b, [a, b]) == 3 and not budget.spent_for(a, [a, b])
    assert "falls back to tune.trials=3 trials per arm" in budget.line([a, b])


def test_a_zero_cost_arm_counts_the_reference_and_stops(tmp_path: Path) -> None:
    """An arm whose trials count 0 FLOPs (a part the counter does not see) would never reach the budget."""
    zero = _study_with_costs(tmp_path, "zero", [0.0, 0.0, 0.0])
    dear = _study_with_costs(tmp_path, "dear", [2.0])
    budget = Budget(_tune(budget_by="seconds"), tmp_path)
    assert budget.amount([zero, dear]) == pytest.approx(3 * 2.0)  # the known first cost alone
    assert budget.spent_for(zero, [zero, dear])  # 3 trials counted at B / 3 = 2 each


def test_trials_budget_is_todays(tmp_path: Path) -> None:
    arm = _study_with_costs(tmp_path, "arm", [1.0, None, 1.0])
    budget = Budget(_tune(), tmp_path)
    assert budget.trials_for(arm, [arm]) == 3 and budget.spent_for(arm, [arm])
    assert budget.line([arm]).endswith("3 trials per arm (tune.budget_by=trials)")


def test_a_budget_in_trials_refuses_an_amount() -> None:
    with pytest.raises(ConfigError, match=r"^tune\.budget=5\.0 with tune\.budget_by=trials"):
        _tune(budget=5.0)
