"""The tuning section's measured cost and budget-vs-verdict (report/budget_verdict.py) on a hand-made store of two
arms tuned with a budget in FLOPs."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FAST, compose_cfg

from distill_sweep.config.parse import parse
from distill_sweep.config.tune import TuneSettings
from distill_sweep.job.identity import identify
from distill_sweep.records import files
from distill_sweep.report import checklist
from distill_sweep.sweep import tune

# the steady arm and the lucky one: by both estimators the steady is ahead at n = 1 (0.70 against the mean 0.69),
# the lucky one from n = 2 (Dodge: (0.6 + 3 x 0.62 + 5 x 0.85) / 9 = 0.7456; Tang: (0.62 + 0.85 + 0.85) / 3 = 0.7733)
SCORES = {"vanilla_kd": (0.70, 0.70, 0.70), "att_kl": (0.60, 0.62, 0.85)}
COST = {"vanilla_kd": (1.0, 1e9), "att_kl": (2.0, 3e9)}  # per trial: CPU-seconds, FLOPs


def _store(results: Path) -> None:
    space = {"objective.temperature": {"low": 1.0, "high": 4.0}}
    settings = parse(TuneSettings, {"trials": 3, "space": space, "budget_by": "flops"}, "tune")
    settings.validate("tune")
    jobs = [[*FAST, f"objective={o}"] for o in SCORES]
    for arm in tune.plan_arms([(identify(compose_cfg(j)), j) for j in jobs], compose_cfg, settings):
        study = tune.open_study(arm, settings, results)
        cpu, flops = COST[arm.ident.objective_name]
        for i, score in enumerate(SCORES[arm.ident.objective_name]):
            (pending,) = tune.next_trials(arm, study, 3)
            where = results / arm.ident.objective_name / f"trial-{i}"
            files.write_json_atomic(where / "result.json", {
                "status": "completed", "tune_trial": {"number": i}, "seed": 1, "wall_time_s": 10.0, "device": "cpu",
                "cost": {"cpu_seconds": cpu, "flops": flops, "gpu_seconds": None}})
            tune.tell(study, pending, score, where, results)
        tune.choose(arm, study, results, settings)


def test_each_arm_states_its_trials_cost_and_unit(tmp_path: Path) -> None:
    _store(tmp_path)
    arms = {a["objective"]: a for a in checklist.tuning_arms(tmp_path)}
    assert arms["att_kl"]["cost"] == {"unit": "flops", "records": 3, "without_cost": 0, "cpu_seconds": 6.0,
                                      "gpu_seconds": None, "flops": 9e9, "pack_shares": 0}
    text = checklist.checklist_markdown(list(arms.values()))
    assert "- trials: 3 completed of a budget in FLOPs of tune.trials=3 x the mean first-trial cost" in text
    assert "- cost of the trials: 3 trial record(s): 3 CPU-seconds, 3e+09 FLOPs (budget by flops)" in text
    assert "- verdict budget: the grid's comparison is at the values chosen after 3 trial(s) costing 9e+09 FLOPs " \
           "(a budget in flops)" in text


def test_a_damaged_cost_is_counted_as_none() -> None:
    from distill_sweep.report.budget_verdict import arm_cost

    cost = arm_cost([{"cost": "x"}, {"cost": {"cpu_seconds": "many"}}, {"cost": {"cpu_seconds": 2.0, "flops": "f"}}],
                    "seconds")
    assert (cost["records"], cost["without_cost"], cost["cpu_seconds"], cost["flops"]) == (1, 2, 2.0, None)


def test_the_report_shows_the_verdict_at_every_budget_and_the_crossover(tmp_path: Path) -> None:
    from distill_sweep.report.html_page import render_html
    from distill_sweep.report.render import Doc

    _store(tmp_path)
    doc, out = Doc(), {}
    checklist.tuning_section(doc, out, tmp_path)
    text = doc.render(markdown=False)
    assert "== Budget vs verdict ==" in text and "trials' measured cost" in text and "3 (budget in flops)" in text
    a_is_steady = "A = vanilla_kd" in text  # (the arms come in the order of their studies' digests)
    lucky = "B" if a_is_steady else "A"
    assert f"Dodge et al.: {lucky} ahead at n = 3; the winner flips at n = 2" in text
    assert f"Tang et al. (unbiased): {lucky} ahead at n = 3; the winner flips at n = 2" in text
    frame = out["budget_verdict.csv"]
    by_trials = frame[frame["axis"] == "trials"]
    sign = 1 if a_is_steady else -1  # A − B with A the steady arm
    assert list(by_trials["budget"]) == [1, 2, 3]
    assert list(by_trials["tang_diff"]) == pytest.approx([sign * (0.70 - 0.69), sign * (0.70 - 2.32 / 3),
                                                          sign * (0.70 - 0.85)])
    assert list(by_trials["dodge_diff"])[1] == pytest.approx(sign * (0.70 - 6.71 / 9))
    assert list(by_trials["crossover_tang"]) == [False, True, False]
    # by cost: steps of the cheaper trial (1e9 FLOPs) up to 3e9, where the dear arm affords its first trial
    by_flops = frame[frame["axis"] == "flops"]
    assert list(by_flops["budget"]) == [3e9] and list(by_flops["n_a" if a_is_steady else "n_b"]) == [3]
    page = render_html(doc, "report", [])
    assert page.count('class="budget-verdict"') == 2 and page.count('class="crossover"') == 2
