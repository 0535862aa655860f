"""The tuning report (report/checklist.py): the expected-best curve of each arm from its study, and the checklist of
bounds, trials, selection rule, chosen values, seeds and compute."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

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
    # Tang et al. by hand: the mean best of the 2-subsets {0.6, 0.8}, {0.6, 0.7}, {0.8, 0.7} = (0.8 + 0.7 + 0.8) / 3
    assert two["unbiased"] == pytest.approx(2.3 / 3, abs=1e-12)
    table = checklist.expected_best_markdown([arm])
    assert f"| 2 | {6.7 / 9:.4f} ± {math.sqrt(5.03 / 9 - (6.7 / 9) ** 2):.4f} [{2.3 / 3:.4f}] |" in table
    assert "reads high" in table and "independent trials" in table


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


def _add_trial(results: Path, score: float) -> None:
    """One more trial told into the store's study (a larger budget, run in this results directory)."""
    (path,) = (results / "tuning").glob("*.chosen.json")
    space = {"objective.temperature": {"low": 1.0, "high": 4.0, "log": True}}
    settings = parse(TuneSettings, {"trials": 4, "space": space, "seed": 2}, "tune")
    job = [*FAST, "objective=vanilla_kd"]
    (arm,) = tune.plan_arms([(identify(compose_cfg(job)), job)], compose_cfg, settings)
    study = tune.open_study(arm, settings, results)
    (pending,) = tune.next_trials(arm, study, 4)
    tune.tell(study, pending, score)


def test_a_copied_results_directory_reads_its_own_studies(tmp_path: Path) -> None:
    """Every path the store holds is relative to it: a copy reads its own journal and records, not the
    original's (which read "4 completed of a budget of 3" once the original went on), and keeps reading them
    once the original is gone."""
    import shutil

    _tuned_store(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    _add_trial(tmp_path / "a", 0.9)
    assert [a["completed_trials"] for a in checklist.tuning_arms(tmp_path / "a")] == [4]
    shutil.rmtree(tmp_path / "a")
    notes: list[str] = []
    (arm,) = checklist.tuning_arms(tmp_path / "b", notes)
    assert notes == [] and arm["completed_trials"] == 3 and arm["trial_scores"] == [0.6, 0.8, 0.7]
    assert arm["compute_hours"]["trials"]["cpu"] == 1.5 and arm["journal"].startswith("tuning/")
    assert checklist.main([str(tmp_path / "b")]) == 0
    assert "3 completed of a budget of 3" in (tmp_path / "b" / "tuning_checklist.md").read_text()


def test_a_packs_time_is_split_over_its_members(tmp_path: Path) -> None:
    """Three trials trained in one pack (wall times 1800, 1800 and 3600 s: the pack's process ran 3600 s) are
    charged 1800/3 + 1800/3 + (1800/3 + 1800) = 3600 s together, one wall-hour, not 7200 s; a pack of two grid
    jobs of 3600 s each, one GPU-hour. A packed record whose pack's other members are not in the directory: its
    whole wall time (nothing to split it with)."""
    _tuned_store(tmp_path)
    for i, wall in enumerate((1800.0, 1800.0, 3600.0)):
        _set(tmp_path / f"trial-{i}" / "result.json", wall_time_s=wall, pack="pack-trials")
    for seed in (1, 2):
        _set(tmp_path / f"grid-{seed}" / "result.json", pack="pack-grid")
    (arm,) = checklist.tuning_arms(tmp_path)
    assert arm["compute_hours"] == {"trials": {"cpu": 1.0, "gpu": 0.0}, "grid": {"cpu": 0.0, "gpu": 1.0}}
    alone = {"wall_time_s": 3600.0, "device": "cpu", "pack": "elsewhere"}
    assert checklist.charged_hours([alone], {"elsewhere": [3600.0]}) == {"cpu": 1.0, "gpu": 0.0}


def _set(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is _DROP:
            data.pop(key)
        else:
            data[key] = value
    files.write_json_atomic(path, data)


_DROP = object()


def _chosen(results: Path) -> Path:
    (path,) = (results / "tuning").glob("*.chosen.json")
    return path


# each: what it does to the store of `_tuned_store`, and the file the note must name (relative to the store)
DAMAGE = {
    "chosen.json damaged": (lambda r: _chosen(r).write_bytes(b'{"study": "x", "tri\x00'), "chosen"),
    "chosen.json a list": (lambda r: _chosen(r).write_text("[1, 2]"), "chosen"),
    "a null score": (lambda r: _set(_chosen(r), score=None), "chosen"),
    "no values": (lambda r: _set(_chosen(r), values=_DROP), "chosen"),
    "a trial number as a word": (lambda r: _set(_chosen(r), trial="one"), "chosen"),
    "the journal damaged": (lambda r: _chosen(r).with_name(_chosen(r).name.replace(".chosen.json", ".journal"))
                            .write_bytes(bytes(range(256)) * 3), "chosen"),
    "the journal missing": (lambda r: _chosen(r).with_name(_chosen(r).name.replace(".chosen.json", ".journal"))
                            .unlink(), "chosen"),
    "a grid record's seed as a word": (lambda r: _set(r / "grid-1" / "result.json", seed="one"), "grid-1"),
    "a grid record's wall time as a word": (lambda r: _set(r / "grid-2" / "result.json", wall_time_s="long"),
                                            "grid-2"),
    "a trial record's wall time as a word": (lambda r: _set(r / "trial-1" / "result.json", wall_time_s="1h"),
                                             "trial-1"),
    "a trial record gone": (lambda r: (r / "trial-2" / "result.json").unlink(), "trial-2"),
    # a chosen value outside the space it was drawn from (hand-edited, damaged): no choice the grid ran
    "a chosen value outside its space": (lambda r: _set(_chosen(r), values={"objective.temperature": "hot"}),
                                         "chosen"),
    # a torn last line (a kill during a write): Optuna reads the entries before it; the arm is kept, with a note
    "the journal's last line torn": (lambda r: _journal(r).write_bytes(_journal(r).read_bytes()[:-40]), "journal"),
}


def _journal(results: Path) -> Path:
    return _chosen(results).with_name(_chosen(results).name.replace(".chosen.json", ".journal"))


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_one_bad_file_is_left_out_with_a_note(tmp_path: Path, damage: str, capsys) -> None:
    """The checklist and the report's tuning section never fail on one bad file: it is left out, with a note
    naming it and why, and the rest is stated."""
    from distill_sweep.report.render import Doc

    results = tmp_path / "results"
    _tuned_store(results)
    chosen = _chosen(results)
    do, named = DAMAGE[damage]
    do(results)
    notes: list[str] = []
    arms = checklist.tuning_arms(results, notes)
    where = {"chosen": str(chosen), "journal": str(_journal(results))}.get(named, str(results / named / "result.json"))
    assert len(notes) == 1 and notes[0].startswith(where + ": "), notes
    assert len(arms) == (0 if named == "chosen" else 1)
    doc: Any = Doc()
    checklist.tuning_section(doc, {}, results)
    assert f"left out of this section: {where}: " in doc.render(markdown=True)
    assert checklist.main([str(results), "--out", str(tmp_path / "out")]) == 0
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x]
    assert line.startswith(f"distill_sweep.report.checklist: left out: {where}: ")
    assert "## Left out" in (tmp_path / "out" / "tuning_checklist.md").read_text()


def test_a_moved_store_from_before_relative_paths_is_read_with_notes(tmp_path: Path) -> None:
    """A store whose study names its trials' records by absolute paths (written before paths were stored
    relative), then moved: its journal is found beside its chosen.json; the records it names are gone, each
    a note, the arm stated without their compute."""
    import shutil

    _tuned_store(tmp_path / "a")
    journal = next((tmp_path / "a" / "tuning").glob("*.journal"))
    text = journal.read_text()
    journal.write_text(text.replace('"record":"trial-', f'"record":"{tmp_path / "a"}/trial-'))
    shutil.move(tmp_path / "a", tmp_path / "b")
    notes: list[str] = []
    (arm,) = checklist.tuning_arms(tmp_path / "b", notes)
    assert arm["completed_trials"] == 3 and arm["compute_hours"]["trials"] == {"cpu": 0.0, "gpu": 0.0}
    assert len(notes) == 3 and all(n.startswith(f"{tmp_path / 'a'}/trial-") and "missing or unreadable" in n
                                   for n in notes)


def test_out_naming_a_file_is_one_line(tmp_path: Path, capsys) -> None:
    _tuned_store(tmp_path / "results")
    (tmp_path / "taken").write_text("mine")
    assert checklist.main([str(tmp_path / "results"), "--out", str(tmp_path / "taken")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"distill_sweep.report.checklist: error: --out {tmp_path / 'taken'} is a file: name a directory " \
                   "(the checklist writes four files into it)"
    assert (tmp_path / "taken").read_text() == "mine"
    assert checklist.main([str(tmp_path / "results"), "--out", str(tmp_path / "taken" / "below")]) == 2
    assert capsys.readouterr().err.startswith("distill_sweep.report.checklist: error: cannot write the checklist into")
