"""distill_sweep.stats: loading, aggregation, t-tests, Holm, grid status (numbers checked by hand)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from distill_sweep import stats

INITS = {"1": ("skip", [4, 8, 12]), "2": ("mixed", [1, 8, 12]), "3": ("bottom", [1, 2, 3])}
PRIMARY = {"mrpc": "f1", "qqp": "f1", "cola": "mcc", "stsb": "pearson"}


def write_record(
    root: Path,
    task: str = "toy",
    objective: str = "vanilla_kd",
    init: str = "1",
    seed: int = 0,
    score: float | dict[str, float] = 0.8,
    status: str = "completed",
    error: str | None = None,
    final: float | dict[str, float] | None = None,
    epochs: list[dict[str, Any]] | None = None,
    finished_at: str = "2026-11-22T01:00:00",
) -> Path:
    """Fabricate one result.json following the contract schema and store layout.

    `score` is the best-epoch dev metric(s) (a float sets every metric); `final` defaults to score.
    """
    name, layers = INITS.get(init, ("custom", [int(x) for x in init.strip("[]").split(",")]))
    primary = PRIMARY.get(task, "accuracy")

    def dev(value: float | dict[str, float]) -> dict[str, float]:
        if isinstance(value, dict):
            return dict(value)
        return {"accuracy": value, "f1": value, "mcc": value, "pearson": value}

    best = dev(score)
    last = dev(final if final is not None else score)
    if epochs is None:
        stages = ["prediction"] if objective == "vanilla_kd" else ["intermediate", "prediction"]
        epochs = []
        for stage in stages:
            for e in (1, 2):
                epochs.append({"stage": stage, "epoch": e, "step": 10 * e, "train_loss": 1.0 / e,
                               "dev": best if (stage, e) == ("prediction", 1) else last})
    config_hash = f"{abs(hash((task, objective, init, seed, status))):016x}"
    done = status == "completed"
    rec = {
        "schema_version": 1, "status": status, "error": error, "config_hash": config_hash,
        "task": task, "objective": objective, "seed": seed,
        "init": {"spec": init, "layers": layers, "name": name},
        "student": {"num_layers": 3, "hidden_size": 32, "layer_map": [[i + 1, t] for i, t in enumerate(layers)]},
        "teacher": {"name_or_path": None, "source": "trained", "path": "/tmp/t", "dev": {}},
        "primary_metric": primary,
        "epochs": epochs if done else [],
        "best": {"stage": "prediction", "epoch": 1, "dev": best} if done else None,
        "final": {"dev": last} if done else None,
        "wall_time_s": 1.0, "samples_per_s": 10.0, "peak_memory_mb": None, "device": "cpu",
        "config": {}, "versions": {}, "git_commit": None,
        "started_at": "2026-11-22T00:00:00", "finished_at": finished_at if done else None,
    }
    path = root / task / objective / f"init-{init}" / f"seed-{seed}" / config_hash[:10] / "result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- loading


def test_load_records_columns_and_partial_files(tmp_path: Path) -> None:
    write_record(tmp_path, seed=0, score=0.8)
    write_record(tmp_path, seed=1, status="failed", error="RuntimeError: boom\nmore")
    half = tmp_path / "toy" / "vanilla_kd" / "init-1" / "seed-7" / "abc" / "result.json"
    half.parent.mkdir(parents=True)
    half.write_text('{"status": "compl', encoding="utf-8")  # a half-written file
    nokeys = tmp_path / "x" / "result.json"
    nokeys.parent.mkdir()
    nokeys.write_text('{"status": "running"}', encoding="utf-8")

    with pytest.warns(UserWarning, match="skipped"):
        df = stats.load_records(tmp_path)
    assert len(df) == 2
    assert set(df["status"]) == {"completed", "failed"}
    row = df[df["status"] == "completed"].iloc[0]
    assert row["init_layers"] == "4,8,12" and row["init_spec"] == "1" and row["init_name"] == "skip"
    assert row["dev.accuracy"] == pytest.approx(0.8)
    assert row["primary"] == pytest.approx(0.8)
    store = stats.load_store(tmp_path)
    assert len(store.skipped) == 2
    assert len(store.curves) == 2  # vanilla_kd: 2 prediction epochs of the completed run only


def test_load_records_empty_dir(tmp_path: Path) -> None:
    df = stats.load_records(tmp_path)
    assert df.empty and "status" in df.columns


def test_which_best_final_max(tmp_path: Path) -> None:
    epochs = [
        {"stage": "intermediate", "epoch": 1, "step": 1, "train_loss": 1.0, "dev": {"accuracy": 0.99}},
        {"stage": "prediction", "epoch": 1, "step": 2, "train_loss": 1.0, "dev": {"accuracy": 0.70, "f1": 0.9}},
        {"stage": "prediction", "epoch": 2, "step": 3, "train_loss": 1.0, "dev": {"accuracy": 0.75, "f1": 0.8}},
    ]
    write_record(tmp_path, objective="hid_seq", score={"accuracy": 0.70, "f1": 0.9},
                 final={"accuracy": 0.75, "f1": 0.8}, epochs=epochs)
    best = stats.load_records(tmp_path, "best").iloc[0]
    final = stats.load_records(tmp_path, "final").iloc[0]
    mx = stats.load_records(tmp_path, "max").iloc[0]
    assert best["dev.accuracy"] == pytest.approx(0.70)
    assert final["dev.accuracy"] == pytest.approx(0.75)
    # max: each metric's own maximum over PREDICTION epochs (the 0.99 intermediate epoch is ignored)
    assert mx["dev.accuracy"] == pytest.approx(0.75) and mx["dev.f1"] == pytest.approx(0.9)
    with pytest.raises(ValueError):
        stats.load_records(tmp_path, "last")


def test_column_metric_modes() -> None:
    assert stats.column_metric("mrpc", "header") == "f1"
    assert stats.column_metric("cola", "header") == "mcc"
    assert stats.column_metric("mrpc", "paper") == "accuracy"
    assert stats.column_metric("cola", "paper") == "accuracy"
    assert stats.column_metric("mnli", "paper") == "accuracy"
    assert stats.column_metric("toy", "header", "f1") == "f1"  # unknown task: its primary metric
    assert stats.norm_task("SST-2") == "sst2" and stats.norm_task("sts_b") == "stsb"


# ----------------------------------------------------------------------------- aggregation


def test_aggregate_mean_std_by_hand(tmp_path: Path) -> None:
    for seed, score in enumerate([0.80, 0.82, 0.84]):
        write_record(tmp_path, seed=seed, score=score)
    sc, _ = stats.scores(stats.load_records(tmp_path))
    agg = stats.aggregate(sc)
    row = agg.iloc[0]
    # percent: mean (80 + 82 + 84) / 3 = 82.0; ddof=1: sqrt((4 + 0 + 4) / 2) = 2.0
    assert row["mean"] == pytest.approx(82.0)
    assert row["std"] == pytest.approx(2.0)
    assert row["n"] == 3
    # ddof=0: sqrt(8 / 3)
    assert stats.aggregate(sc, ddof=0).iloc[0]["std"] == pytest.approx(math.sqrt(8 / 3))


def test_single_seed_std_is_nan(tmp_path: Path) -> None:
    write_record(tmp_path, score=0.5)
    sc, _ = stats.scores(stats.load_records(tmp_path))
    row = stats.aggregate(sc).iloc[0]
    assert row["n"] == 1 and math.isnan(row["std"])


def test_scores_use_selected_metric_and_skip_failed(tmp_path: Path) -> None:
    write_record(tmp_path, task="mrpc", score={"accuracy": 0.70, "f1": 0.81})
    write_record(tmp_path, task="mrpc", seed=1, status="failed", error="x")
    records = stats.load_records(tmp_path)
    header, _ = stats.scores(records, "header")
    paper, _ = stats.scores(records, "paper")
    assert list(header["value"]) == pytest.approx([81.0])
    assert list(paper["value"]) == pytest.approx([70.0])
    assert set(header["metric"]) == {"f1"} and set(paper["metric"]) == {"accuracy"}


def test_scores_missing_metric_and_duplicates(tmp_path: Path) -> None:
    write_record(tmp_path, task="cola", score={"accuracy": 0.7})  # no mcc recorded
    dup = write_record(tmp_path, task="rte", score=0.9, finished_at="2026-11-23T01:00:00")
    # the same job again under another config hash, finished earlier
    rec = json.loads(dup.read_text())
    rec["config_hash"] = "ffffffffffffffff"
    other = dup.parent.parent / "ffffffffff" / "result.json"
    other.parent.mkdir()
    other.write_text(json.dumps({**rec, "best": {"stage": "prediction", "epoch": 1, "dev": {"accuracy": 0.5}},
                                 "finished_at": "2026-11-21T00:00:00"}))
    sc, notes = stats.scores(stats.load_records(tmp_path), "header")
    assert any("lack dev metric 'mcc'" in n for n in notes)
    assert any("duplicate" in n for n in notes)
    rte = sc[sc["task"] == "rte"]
    assert list(rte["value"]) == pytest.approx([90.0])  # the newer of the two rte runs


def test_row_averages_need_all_seven(tmp_path: Path) -> None:
    for i, task in enumerate(stats.GLUE_TASKS):
        write_record(tmp_path, task=task, objective="att_kl", score=0.70 + 0.01 * i)
        if task != "cola":
            write_record(tmp_path, task=task, objective="hid_seq", score=0.6)
    write_record(tmp_path, task="toy", objective="att_kl", score=0.1)  # extra tasks never enter Avg
    sc, _ = stats.scores(stats.load_records(tmp_path))
    avg = stats.row_averages(stats.aggregate(sc)).set_index("objective")
    assert avg.loc["att_kl", "avg"] == pytest.approx(73.0)  # mean of 70..76
    assert avg.loc["att_kl", "n_tasks"] == 7
    assert math.isnan(avg.loc["hid_seq", "avg"])
    assert avg.loc["hid_seq", "reason"] == "missing CoLA"


# ----------------------------------------------------------------------------- tests and Holm


def test_paired_ttest_by_hand() -> None:
    a = [80.0, 82.0, 85.0, 81.0]
    b = [78.0, 81.0, 82.0, 80.0]
    # d = [2, 1, 3, 1]: mean 1.75; sd (ddof=1) = sqrt(2.75 / 3); t = mean / (sd / sqrt(4))
    sd = math.sqrt(2.75 / 3)
    t_hand = 1.75 / (sd / 2)
    p_hand = 2 * sps.t.sf(abs(t_hand), df=3)
    t, p, note = stats.paired_ttest(a, b)
    assert t == pytest.approx(t_hand) and t == pytest.approx(3.6556, abs=1e-4)
    assert p == pytest.approx(p_hand)
    assert note == ""


def test_paired_ttest_degenerate() -> None:
    t, p, note = stats.paired_ttest([1.0], [2.0])
    assert math.isnan(t) and math.isnan(p) and "1 matched pair" in note
    t, p, note = stats.paired_ttest([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])  # d = 1 everywhere
    assert math.isnan(t) and math.isnan(p) and "zero variance" in note
    t, p, note = stats.paired_ttest([], [])
    assert math.isnan(p) and "0 matched" in note


def test_holm_by_hand() -> None:
    # sorted 0.01, 0.03, 0.04 -> 3*0.01 = 0.03, 2*0.03 = 0.06, max(0.06, 1*0.04) = 0.06
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    out = stats.holm([0.5, float("nan"), 0.4])  # NaN excluded: m = 2
    assert out[0] == pytest.approx(0.8) and math.isnan(out[1]) and out[2] == pytest.approx(0.8)
    assert stats.holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert len(stats.holm([])) == 0


def _scores_frame(rows: list[tuple[str, str, str, int, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["objective", "init_label", "task", "seed", "value"])


def test_paired_tests_pair_on_task_and_seed() -> None:
    a = [80.0, 82.0, 85.0, 81.0]
    b = [78.0, 81.0, 82.0, 80.0]
    rows = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        task, seed = ("rte", i) if i < 2 else ("toy", i - 2)
        rows += [("att_kl", "4,8,12", task, seed, x), ("att_mse", "4,8,12", task, seed, y)]
    rows.append(("att_kl", "4,8,12", "rte", 9, 50.0))  # no partner: must be left out
    rows += [("vanilla_kd", "4,8,12", "rte", 0, 60.0)]  # one pair with each other objective
    tests = stats.paired_tests(_scores_frame(rows), "objective",
                               levels=["vanilla_kd", "att_kl", "att_mse"])
    assert list(zip(tests["a"], tests["b"], strict=True)) == [
        ("vanilla_kd", "att_kl"), ("vanilla_kd", "att_mse"), ("att_kl", "att_mse")]
    kl_mse = tests.iloc[2]
    t_hand, p_hand, _ = stats.paired_ttest(a, b)
    assert kl_mse["n"] == 4
    assert kl_mse["t"] == pytest.approx(t_hand) and kl_mse["p"] == pytest.approx(p_hand)
    assert kl_mse["mean_diff"] == pytest.approx(1.75)
    assert tests.iloc[0]["n"] == 1 and math.isnan(tests.iloc[0]["p"])
    # only one testable p in the family: Holm leaves it unchanged
    assert kl_mse["p_holm"] == pytest.approx(p_hand)
    assert bool(kl_mse["significant"]) == (p_hand < 0.05)


def test_paired_tests_within_objective() -> None:
    rows = []
    for obj, shift in (("att_kl", 0.0), ("vanilla_kd", 5.0)):
        for seed, base in enumerate([70.0, 71.0, 73.0]):
            rows += [(obj, "4,8,12", "rte", seed, base), (obj, "1,2,3", "rte", seed, base + shift + seed)]
    tests = stats.paired_tests(_scores_frame(rows), "init_label", ("objective",), levels=["4,8,12", "1,2,3"])
    assert list(tests["objective"]) == ["vanilla_kd", "att_kl"]  # paper order of objectives
    kd = tests.iloc[0]
    # d = 4,8,12 - 1,2,3 = [-5, -6, -7]: mean -6, sd 1, t = -6 / (1 / sqrt(3))
    assert kd["t"] == pytest.approx(-6 * math.sqrt(3))
    kl = tests.iloc[1]  # d = [0, -1, -2]: mean -1, sd 1
    assert kl["t"] == pytest.approx(-math.sqrt(3))
    assert np.allclose(tests["p_holm"], stats.holm(tests["p"].to_numpy()))


# ----------------------------------------------------------------------------- grid, init, paper


def test_grid_status(tmp_path: Path) -> None:
    write_record(tmp_path, task="rte", seed=0)
    write_record(tmp_path, task="rte", seed=1, status="failed", error="x")
    write_record(tmp_path, task="rte", seed=2, status="running")
    records = stats.load_records(tmp_path)
    expected = [{"task": "RTE", "objective": "vanilla_kd", "init_spec": 1, "seed": s} for s in range(4)]
    completed, failed, missing = stats.grid_status(records, expected)
    assert [j["seed"] for j in completed] == [0]
    assert [j["seed"] for j in failed] == [1]
    assert [j["seed"] for j in missing] == [2, 3]  # running counts as missing
    assert stats.grid_status(records.iloc[0:0], expected)[2] == expected


def test_select_init(tmp_path: Path) -> None:
    write_record(tmp_path, init="1")
    write_record(tmp_path, init="3")
    records = stats.load_records(tmp_path)
    sel, note = stats.select_init(records, "skip")
    assert list(sel["init_label"]) == ["4,8,12"] and note == ""
    sel, _ = stats.select_init(records, "1,2,3")
    assert list(sel["init_name"]) == ["bottom"]
    only_bottom = records[records["init_name"] == "bottom"]
    sel, note = stats.select_init(only_bottom, "skip")
    assert list(sel["init_label"]) == ["1,2,3"] and "most common" in note


def test_compare_with_paper_repo_csv(tmp_path: Path) -> None:
    paper = stats.load_paper_table(Path(__file__).resolve().parents[1] / "results" / "paper"
                                   / "table1_task_specific_objectives.csv")
    kd = paper[(paper["objective"] == "vanilla_kd") & (paper["task"] == "cola")].iloc[0]
    assert kd["init_label"] == "4,8,12" and kd["mean"] == 69.1 and kd["std"] == 0.0
    for seed, score in enumerate([0.70, 0.72]):
        write_record(tmp_path, task="cola", seed=seed, score={"accuracy": score, "mcc": 0.1})
    write_record(tmp_path, task="toy", score=0.5)
    sc, _ = stats.scores(stats.load_records(tmp_path), "paper")
    agg = stats.aggregate(sc)
    comp = stats.compare_with_paper(agg, stats.row_averages(agg), paper)
    assert list(comp["task"]) == ["cola"]  # toy is not in the paper
    assert comp.iloc[0]["ours"] == pytest.approx(71.0)
    assert comp.iloc[0]["delta"] == pytest.approx(71.0 - 69.1)


def test_align_curves() -> None:
    curves = pd.DataFrame({
        "task": ["rte"] * 5, "objective": ["hid_seq"] * 3 + ["vanilla_kd"] * 2,
        "stage": ["intermediate", "prediction", "prediction", "prediction", "prediction"],
        "epoch": [1, 1, 2, 1, 2], "global_epoch": [1, 2, 3, 1, 2], "value": [1.0] * 5,
    })
    out = stats.align_curves(curves)
    # prediction epochs start after the longest intermediate stage of the task, for every objective
    assert list(out["x"]) == [1.0, 2.0, 3.0, 2.0, 3.0]
    assert set(out["boundary"]) == {1.5}
