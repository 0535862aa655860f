"""The fine-tune grid after a distillation (finetune_grid, student=distilled) and the report's Tables 2 and 4: the
tests that run a job, a command or processes (its fast tests: tests/unit/sweep/test_chain.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from helpers import ROOT, records, run_cli_preloaded

from distill_sweep.analysis import frames
from distill_sweep.config.schema import RunSettings
from distill_sweep.errors import ConfigError
from distill_sweep.records import hashing, record
from distill_sweep.records.record import InitInfo, Record, StudentInfo, TeacherInfo
from distill_sweep.report import pretraining

# paper_table2_toy cut to 2 objectives, 2 grid points per student, a few hundred rows: the sweep in ~1-2 min
TOY = ["experiment=paper_table2_toy", "objective=vanilla_kd,att_mse", "procedure.max_steps=6",
       "finetune_grid.lrs=[0.001,0.002]", "finetune_grid.epochs=1", "task.max_train_samples=256",
       "task.max_dev_samples=128"]


def test_a_bad_grid_in_a_sweep_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    from distill_sweep.config.parse import parse

    # as part of the config the grid is optional: its own error, not "expected ... or null", reaches the user
    with pytest.raises(ConfigError, match=r"^finetune_grid.batch_sizes=\[0\]: batch sizes must be >= 1$"):
        parse(RunSettings, {"finetune_grid": {"tasks": ["toy"], "lrs": [1e-3], "batch_sizes": [0]}}, "")
    proc = run_cli_preloaded(["-m", "experiment=paper_table2_toy", "objective=att_mse", 'finetune_grid.overrides=["nonsense"]',
                    "+dry_run=true", f"results_dir={tmp_path / 'r'}"], cwd=tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "not Hydra overrides" in lines[0], proc.stderr


@pytest.mark.parametrize("args, message", [
    (["student.source=0123456789abcdef"], "no task_agnostic job with that config hash"),
    (["student.source=xyz"], "expected the config hash of a completed task_agnostic job"),
    (["student.source=0123456789", "+student.student_dir=/x"], "are filled in from student.source"),
])
def test_a_distilled_student_that_is_not_there_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    proc = run_cli_preloaded(["procedure=finetune", "student=distilled", "task=toy", "teacher=tiny_mlm", "logger=none",
                    f"results_dir={tmp_path / 'r'}", *args], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "r").exists()  # nothing written


def test_sweep_distils_then_fine_tunes_each_student_and_reports_table2(tmp_path: Path, shared_cache: Path) -> None:
    env = {"DISTILL_SWEEP_CACHE": str(shared_cache)}
    out = tmp_path / "results"
    proc = run_cli_preloaded(["-m", *TOY, f"results_dir={out}"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "then 4 fine-tune jobs of 2 distilled student(s)" in proc.stdout
    recs = records(out)
    distilled = {r["config_hash"]: r for r in recs if r["procedure"] == "task_agnostic"}
    tuned = [r for r in recs if r["procedure"] == "finetune"]
    assert len(distilled) == 2 and len(tuned) == 4
    assert all(r["status"] == "completed" for r in recs)
    for r in tuned:  # each fine-tune job loaded the student its distillation saved
        settings = r["student"]["settings"]
        source = distilled[settings["source"]]
        assert settings["student_dir"] == source["student_dir"]
        assert settings["distilled_from"]["objective"] == source["objective"]
        assert r["config"]["teacher"] == source["config"]["teacher"]
    assert sorted(r["config"]["optimizer"]["lr"] for r in tuned) == [0.001, 0.001, 0.002, 0.002]

    # the chained job is the job a user would run by hand: a second sweep has nothing left to run
    again = run_cli_preloaded(["-m", *TOY, f"results_dir={out}"], cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "2 already completed, 0 to run" in again.stdout and "4 already completed, 0 to run" in again.stdout

    rep = run_cli_preloaded([str(out), "preset=paper_table2_toy"], cwd=tmp_path, module="distill_sweep.report")
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert "Table 2: task-agnostic objectives" in rep.stdout and "Table 1" not in rep.stdout
    table = pd.read_csv(out / "tables" / "table2.csv")
    for objective in ("vanilla_kd", "att_mse"):  # the cell is the best of the student's two grid points
        mine = [r for r in tuned if r["student"]["settings"]["distilled_from"]["objective"] == objective]
        by_hand = 100 * max(max(e["dev"]["accuracy"] for e in r["epochs"]) for r in mine)
        cell = table[(table["objective"] == objective) & (table["task"] == "toy")]
        assert cell["mean"].item() == pytest.approx(by_hand) and cell["n"].item() == 1


# --------------------------------------------------------------------------------- the layout, on fabricated records
def _finetune(root: Path, *, source: str, objective: str, init: str, task: str, lr: float, seed: int,
              score: dict[str, float], source_seed: int = 1) -> None:
    layers = [1, 2, 3, 4, 5, 6] if init == "first" else []
    src = {"config_hash": source, "objective": objective, "seed": source_seed, "teacher": "bert-base-uncased",
           "student": "truncated" if init == "first" else "fresh", "student_layers": 6, "corpus": "wiki",
           # what a job records: init=first resolves to the rule named "bottom" (the first k teacher layers)
           "init": {"name": "bottom" if init == "first" else "fresh", "spec": init, "layers": layers}}
    digest = hashing.digest([source, task, lr, seed])
    rec = Record(task=task, objective="none", seed=seed, status="completed", procedure="finetune",
                 config_hash=digest, init=InitInfo(spec="1", name="distilled", layers=[]),
                 student=StudentInfo(name="distilled", num_layers=6, hidden_size=768, num_heads=12, layer_map=[],
                                     settings={"name": "distilled", "source": source, "distilled_from": src}),
                 teacher=TeacherInfo.from_settings({"name": "bert_base"}, num_layers=12, hidden_size=768),
                 primary_metric="accuracy", epochs=[{"stage": "finetune", "epoch": 1, "step": 10, "dev": score}],
                 best={"stage": "finetune", "epoch": 1, "dev": score}, final={"dev": score},
                 config={"optimizer": {"lr": lr, "batch_size": 32}, "epochs": 10, "teacher": {"name": "bert_base"}},
                 started_at="2026-11-23T00:00:00", finished_at="2026-11-23T01:00:00")
    path = hashing.job_dir(root, task, "finetune", "init-distilled", seed, digest) / record.RECORD
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rec.to_dict()))


def test_table2_and_4_take_the_best_grid_point_and_set_it_beside_the_paper(tmp_path: Path) -> None:
    scores = {  # (objective, init, task, fine-tune seed) -> accuracy at lr 1e-5 and 3e-5; MRPC F1 = accuracy - 0.1
        ("att_mse", "random", "rte", 1): (0.60, 0.70), ("att_mse", "random", "rte", 2): (0.68, 0.64),
        ("att_mse", "random", "mrpc", 1): (0.85, 0.80),
        ("vanilla_kd", "random", "rte", 1): (0.55, 0.58),
        ("att_mse", "first", "rte", 1): (0.66, 0.61),
    }
    for (objective, init, task, seed), pair in scores.items():
        for lr, acc in zip((1e-5, 3e-5), pair, strict=True):  # each fine-tune seed a student of its own master seed
            _finetune(tmp_path, source=f"{objective}-{init}-{seed}".ljust(12, "0"), objective=objective, init=init,
                      task=task, lr=lr, seed=seed, score={"accuracy": acc, "f1": acc - 0.1}, source_seed=seed)
    st = frames.load_store(tmp_path)
    assert pretraining.is_own(st.records).all()
    sc, _ = frames.scores(st.records, "header")
    best = pretraining.best_over_grid(pretraining.distilled_runs(st.records, sc))
    t2 = pretraining.build("table2", "T2", best[best["init"] == "random"], False, "header")
    rows = {r.objective: r for r in t2.rows}
    assert [r.objective for r in t2.rows] == ["vanilla_kd", "att_mse"]  # the paper's order
    rte = rows["att_mse"].cells["rte"]  # best of each seed: 70 and 68
    assert rte.mean == pytest.approx(69.0) and rte.std == pytest.approx(math.sqrt(2.0)) and rte.n == 2
    ddof0 = pretraining.build("table2", "T2", best[best["init"] == "random"], False, "header", ddof=0)
    assert ddof0.rows[1].cells["rte"].std == pytest.approx(1.0)  # sqrt(((70 - 69)^2 + (68 - 69)^2) / 2)
    assert rows["att_mse"].cells["mrpc"].mean == pytest.approx(75.0)  # F1, the best point by F1
    assert rows["vanilla_kd"].cells["mrpc"].n == 0 and not rows["att_mse"].cells["avg"].present
    t4 = pretraining.build("table4", "T4", best, True, "header")
    assert [(r.objective, r.init) for r in t4.rows] == [("vanilla_kd", "random"), ("att_mse", "random"),
                                                          ("att_mse", "first")]
    assert t4.rows[2].cells["rte"].mean == pytest.approx(66.0)

    paper_dir = ROOT / "results" / "paper"
    ours, prior = pretraining.load_paper(paper_dir / pretraining.PAPER_FILES["4"])
    comp = pretraining.compare(t4, ours).set_index(["objective", "init", "task"])
    assert comp.loc[("att_mse", "random", "rte"), "delta"] == pytest.approx(69.0 - 69.7)  # the paper's 69.7
    assert comp.loc[("att_mse", "first", "rte"), "delta"] == pytest.approx(66.0 - 66.1)  # first6: 66.1
    assert comp.loc[("vanilla_kd", "random", "rte"), "paper"] == pytest.approx(61.0)
    _, prior2 = pretraining.load_paper(paper_dir / pretraining.PAPER_FILES["2"])
    assert set(prior2["system"]) == {"DistilBERT", "TinyBERT", "MiniLM"}
    assert prior2[(prior2["system"] == "MiniLM") & (prior2["task"] == "avg")]["paper"].item() == pytest.approx(81.0)

    rep = run_cli_preloaded([str(tmp_path)], cwd=tmp_path, module="distill_sweep.report")
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert "Table 2" in rep.stdout and "Table 4" in rep.stdout and "MiniLM" in rep.stdout
    assert (tmp_path / "tables" / "paper_table4.csv").is_file()


def test_one_job_without_m_distils_only_and_says_so(tmp_path: Path, shared_cache: Path) -> None:
    out = tmp_path / "results"
    proc = run_cli_preloaded(["experiment=paper_table2_toy", "objective=vanilla_kd", "procedure.max_steps=2",
                    f"results_dir={out}"], cwd=tmp_path, env={"DISTILL_SWEEP_CACHE": str(shared_cache)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "finetune_grid: the fine-tune jobs after this distillation are launched by a sweep (-m)" in (
        proc.stdout + proc.stderr)
    assert [r["procedure"] for r in records(out)] == ["task_agnostic"]
