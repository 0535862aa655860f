"""The tuning report (report/checklist.py): the expected-best curve of each arm from its study, and the checklist of
bounds, trials, selection rule, chosen values, seeds and compute."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import FAST, compose_cfg

from distill_sweep.config.parse import parse
from distill_sweep.config.tune import TuneSettings
from distill_sweep.job.identity import identify
from distill_sweep.records import files
from distill_sweep.report import checklist
from distill_sweep.sweep import tune


def _tuned_store(results: Path) -> None:
    """One arm, 3 trials scored 0.6, 0.8, 0.7 (1800 s of CPU each), then its grid over seeds 1 and 2 (3600 s each,
    on a GPU)."""
    space = {"objective.temperature": {"low": 1.0, "high": 4.0, "log": True}}
    settings = parse(TuneSettings, {"trials": 3, "space": space, "seed": 2}, "tune")
    job = [*FAST, "objective=vanilla_kd"]
    (arm,) = tune.plan_arms([(identify(compose_cfg(job)), job)], compose_cfg, settings)
    study = tune.open_study(arm, settings, results)
    for i, score in enumerate((0.6, 0.8, 0.7)):
        (pending,) = tune.next_trials(arm, study, 3)
        where = results / f"trial-{i}"
        files.write_json_atomic(where / "result.json", {"status": "completed", "tune_trial": {"number": i},
                                                        "seed": 1, "wall_time_s": 1800.0, "device": "cpu"})
        tune.tell(study, pending, score, where, results)
    tune.choose(arm, study, results, settings)
    for seed in (1, 2):
        files.write_json_atomic(results / f"grid-{seed}" / "result.json", {
            "status": "completed", "seed": seed, "wall_time_s": 3600.0, "device": "NVIDIA H100",
            "tuned": json.loads(tune.chosen_path(arm, results).read_text())})


def test_the_checklist_states_bounds_trials_choice_seeds_and_compute(tmp_path: Path) -> None:
    _tuned_store(tmp_path)
    (arm,) = checklist.tuning_arms(tmp_path)
    assert arm["completed_trials"] == 3 and arm["trial_scores"] == [0.6, 0.8, 0.7]
    # Dodge et al. by hand on 0.6 <= 0.7 <= 0.8: n = 2 weights 1/9, 3/9, 5/9
    two = arm["expected_best"][1]
    assert two["mean"] == pytest.approx(6.7 / 9, abs=1e-12)
    assert two["std"] == pytest.approx(math.sqrt(5.03 / 9 - (6.7 / 9) ** 2), abs=1e-12)
    assert arm["seeds"] == [1, 2] and arm["trial"] == 1 and arm["score"] == pytest.approx(0.8)
    assert arm["compute_hours"] == {"trials": {"cpu": 1.5, "gpu": 0.0}, "grid": {"cpu": 0.0, "gpu": 2.0}}
    text = checklist.checklist_markdown([arm])
    assert "- search bounds: objective.temperature in [1.0, 4.0], log scale" in text
    assert "- trials: 3 completed of a budget of 3 (tpe sampler, seed 2)" in text
    assert "the trial with the best accuracy on a holdout of 0.1 of the training split" in text
    assert "- chosen values: objective.temperature=" in text and "(trial 2, holdout accuracy 0.8000)" in text  # (numbered from 1)
    assert "- seeds: 1, 2" in text and "trials 1.500 wall-hours on CPU + 0.000 on GPU; grid 0.000 wall-hours on CPU " \
                                       "+ 2.000 on GPU" in text
    table = checklist.expected_best_markdown([arm])
    assert f"| 2 | {6.7 / 9:.4f} ± {math.sqrt(5.03 / 9 - (6.7 / 9) ** 2):.4f} |" in table


def test_the_command_writes_markdown_and_json(tmp_path: Path) -> None:
    _tuned_store(tmp_path / "results")
    assert checklist.main([str(tmp_path / "results"), "--out", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "tuning_checklist.json").read_text())
    assert [a["study"] for a in data["arms"]] == [json.loads(next((tmp_path / "results" / "tuning").glob(
        "*.chosen.json")).read_text())["study"]]
    assert (tmp_path / "out" / "tuning_checklist.md").read_text().startswith("# Tuning checklist")
    assert "Expected best holdout score" in (tmp_path / "out" / "expected_best.md").read_text()
    page = (tmp_path / "out" / "expected_best.html").read_text()
    assert page.count("<polyline") == 1 and "n = 2: 74.44 ± 6.85" in page  # 100 x (6.7/9, its std) by hand above
    assert checklist.main([str(tmp_path / "nowhere")]) == 2


def test_the_report_has_a_tuning_section_with_the_curve(tmp_path: Path) -> None:
    """report.html and report.md: per arm its bounds, trials, choice, hours and seeds, then the expected best
    after n trials (Dodge by hand as above: n = 2 is 100 x 6.7/9 = 74.44 ± 6.85) as a table and an SVG figure."""
    from distill_sweep.report.html_page import render_html
    from distill_sweep.report.render import Doc

    _tuned_store(tmp_path)
    doc, out = Doc(), {}
    checklist.tuning_section(doc, out, tmp_path)
    text = doc.render(markdown=True)
    assert "## Tuning (1 arm(s))" in text
    assert "objective.temperature in [1.0, 4.0], log scale" in text and "3/3 tpe, seed 2" in text
    (chosen,) = (json.loads(p.read_text()) for p in (tmp_path / "tuning").glob("*.chosen.json"))
    assert f"objective.temperature={chosen['values']['objective.temperature']:.4g} (trial 2)" in text
    assert "accuracy 0.8000" in text and "1.500 / 2.000" in text and "1, 2" in text
    assert "| 2   | 74.44 ± 6.85" in text
    page = render_html(doc, "report", [])
    assert page.count("<polyline") == 1 and "n = 3: " in page
    assert list(out["expected_best.csv"]["n"]) == [1, 2, 3]
    empty, nothing = Doc(), {}
    checklist.tuning_section(empty, nothing, tmp_path / "untuned")
    assert empty.blocks == [] and nothing == {}
