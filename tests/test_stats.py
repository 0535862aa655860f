"""distill_sweep.stats: aggregation, t-tests, Holm, grid status, curves (numbers checked by hand)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from test_records import write_record

from distill_sweep import stats, store
from distill_sweep.paper import GLUE_TASKS

# ----------------------------------------------------------------------------- aggregation


def test_aggregate_mean_std_by_hand(tmp_path: Path) -> None:
    for seed, score in enumerate([0.80, 0.82, 0.84]):
        write_record(tmp_path, seed=seed, score=score)
    sc, _ = store.scores(store.load_records(tmp_path))
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
    sc, _ = store.scores(store.load_records(tmp_path))
    row = stats.aggregate(sc).iloc[0]
    assert row["n"] == 1 and math.isnan(row["std"])


def test_row_averages_need_all_seven(tmp_path: Path) -> None:
    for i, task in enumerate(GLUE_TASKS):
        write_record(tmp_path, task=task, objective="att_kl", score=0.70 + 0.01 * i)
        if task != "cola":
            write_record(tmp_path, task=task, objective="hid_seq", score=0.6)
    write_record(tmp_path, task="toy", objective="att_kl", score=0.1)  # extra tasks never enter Avg
    sc, _ = store.scores(store.load_records(tmp_path))
    avg = stats.row_averages(stats.aggregate(sc)).set_index("system")
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


def test_paired_ttest_on_two_pairs_cautions() -> None:
    # d = [2, 1]: mean 1.5, sd sqrt(0.5), t = 1.5 / (sqrt(0.5) / sqrt(2)) = 3.0 on 1 degree of freedom
    t, p, note = stats.paired_ttest([80.0, 82.0], [78.0, 81.0])
    assert t == pytest.approx(3.0) and p == pytest.approx(2 * sps.t.sf(3.0, df=1))
    assert "caution" in note and "only 2 pairs" in note and "1 degree of freedom" in note
    assert stats.paired_ttest([80.0, 82.0, 85.0], [78.0, 81.0, 82.0])[2] == ""  # 3 pairs: no caution


def test_holm_counts_only_testable_pairs() -> None:
    """Three levels: a-b testable on 4 pairs, a-c and b-c on 3 pairs, one of them zero-variance."""
    a = [80.0, 82.0, 85.0, 81.0]
    b = [78.0, 81.0, 82.0, 80.0]
    c = [70.0, 72.0, 75.0]  # seeds 0-2 only: a - c = 10 everywhere (zero variance), b - c = [8, 9, 7]
    rows = [("a", "l", "rte", i, x) for i, x in enumerate(a)] + [("b", "l", "rte", i, x) for i, x in enumerate(b)]
    rows += [("c", "l", "rte", i, x) for i, x in enumerate(c)]
    tests = stats.paired_tests(_scores_frame(rows), "objective", levels=["a", "b", "c"]).set_index(["a", "b"])
    p_ab = stats.paired_ttest(a, b)[1]
    d_bc = np.array([8.0, 9.0, 7.0])  # mean 8, sd 1: t = 8 * sqrt(3)
    p_bc = 2 * sps.t.sf(8 * math.sqrt(3), df=2)
    assert tests.loc[("b", "c"), "p"] == pytest.approx(p_bc) and d_bc.std(ddof=1) == pytest.approx(1.0)
    assert not tests.loc[("a", "c"), "testable"] and "zero variance" in tests.loc[("a", "c"), "note"]
    # Holm with m = 2 (the untestable pair is not counted): the smaller p doubles, the larger stays >= it
    lo, hi = sorted([p_ab, p_bc])
    expected = {lo: min(1.0, 2 * lo), hi: max(min(1.0, 2 * lo), hi)}
    assert tests.loc[("a", "b"), "p_holm"] == pytest.approx(expected[p_ab])
    assert tests.loc[("b", "c"), "p_holm"] == pytest.approx(expected[p_bc])
    assert math.isnan(tests.loc[("a", "c"), "p_holm"])


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
    assert list(tests["testable"]) == [False, False, True] and not tests["few_pairs"].any()


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
    records = store.load_records(tmp_path)
    expected = [{"task": "RTE", "objective": "vanilla_kd", "init_spec": 1, "seed": s} for s in range(4)]
    completed, failed, missing = stats.grid_status(records, expected)
    assert [j["seed"] for j in completed] == [0]
    assert [j["seed"] for j in failed] == [1]
    assert [j["seed"] for j in missing] == [2, 3]  # running counts as missing
    assert stats.grid_status(records.iloc[0:0], expected)[2] == expected


def test_align_curves_scored_stages() -> None:
    curves = pd.DataFrame({
        "task": ["rte"] * 4, "path": ["a", "a", "b", "a"],
        "stage": ["intermediate", "intermediate", "finetune", "combined"],
        "epoch": [1, 2, 1, 1], "global_epoch": [1, 2, 1, 3], "value": [1.0] * 4,
    })
    # no-KD fine-tuning and combined-stage epochs line up with prediction epochs, after the 2 intermediate
    assert list(stats.align_curves(curves)["x"]) == [1.0, 2.0, 3.0, 3.0]


def test_align_curves_pre_stage_counts_as_before_the_scored_stage() -> None:
    # a PTP pre-stage (not scored) then prediction epochs; another run has only prediction epochs
    curves = pd.DataFrame({
        "task": ["rte"] * 4, "path": ["p", "p", "p", "k"], "stage": ["ptp", "prediction", "prediction", "prediction"],
        "epoch": [1, 1, 2, 1], "global_epoch": [1, 2, 3, 1], "value": [1.0] * 4,
    })
    out = stats.align_curves(curves)
    assert list(out["x"]) == [1.0, 2.0, 3.0, 2.0] and set(out["boundary"]) == {1.5}


def test_align_curves() -> None:
    curves = pd.DataFrame({
        "task": ["rte"] * 5, "objective": ["hid_seq"] * 3 + ["vanilla_kd"] * 2, "path": ["h"] * 3 + ["v"] * 2,
        "stage": ["intermediate", "prediction", "prediction", "prediction", "prediction"],
        "epoch": [1, 1, 2, 1, 2], "global_epoch": [1, 2, 3, 1, 2], "value": [1.0] * 5,
    })
    out = stats.align_curves(curves)
    # prediction epochs start after the longest intermediate stage of the task, for every objective
    assert list(out["x"]) == [1.0, 2.0, 3.0, 2.0, 3.0]
    assert set(out["boundary"]) == {1.5}
