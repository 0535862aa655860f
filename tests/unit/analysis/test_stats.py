"""distill_sweep.analysis.stats: aggregation, intervals, t-tests, Holm, grid status, curves (numbers checked by hand
or against scipy)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import require_module, write_record
from scipy import stats as sps

from distill_sweep.analysis import aso, aso_null, frames, grid_status, stats
from distill_sweep.analysis import curves as dev_curves
from distill_sweep.analysis.paper import GLUE_TASKS

# ----------------------------------------------------------------------------- aggregation


def test_aggregate_mean_std_by_hand(tmp_path: Path) -> None:
    for seed, score in enumerate([0.80, 0.82, 0.84]):
        write_record(tmp_path, seed=seed, score=score)
    sc, _ = frames.scores(frames.load_records(tmp_path))
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
    sc, _ = frames.scores(frames.load_records(tmp_path))
    row = stats.aggregate(sc).iloc[0]
    assert row["n"] == 1 and math.isnan(row["std"])


def test_row_averages_need_all_seven(tmp_path: Path) -> None:
    for i, task in enumerate(GLUE_TASKS):
        write_record(tmp_path, task=task, objective="att_kl", score=0.70 + 0.01 * i)
        if task != "cola":
            write_record(tmp_path, task=task, objective="hid_seq", score=0.6)
    write_record(tmp_path, task="toy", objective="att_kl", score=0.1)  # extra tasks never enter Avg
    sc, _ = frames.scores(frames.load_records(tmp_path))
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


def test_holm_equals_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(3)
    for m in (1, 2, 5, 17):
        p = rng.uniform(0.0, 0.2, m)
        p[: m // 3] = p[-1]  # ties
        assert stats.holm(p) == pytest.approx(multipletests(p, method="holm")[1], abs=1e-15)
        with_nan = np.append(p, np.nan)
        assert stats.holm(with_nan)[:m] == pytest.approx(multipletests(p, method="holm")[1], abs=1e-15)


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
    records = frames.load_records(tmp_path)
    expected = [{"task": "RTE", "objective": "vanilla_kd", "init_spec": 1, "seed": s} for s in range(4)]
    completed, failed, missing = grid_status.grid_status(records, expected)
    assert [j["seed"] for j in completed] == [0]
    assert [j["seed"] for j in failed] == [1]
    assert [j["seed"] for j in missing] == [2, 3]  # running counts as missing
    assert grid_status.grid_status(records.iloc[0:0], expected)[2] == expected


def test_align_curves_scored_stages() -> None:
    curves = pd.DataFrame({
        "task": ["rte"] * 4, "path": ["a", "a", "b", "a"],
        "stage": ["intermediate", "intermediate", "finetune", "combined"],
        "epoch": [1, 2, 1, 1], "global_epoch": [1, 2, 1, 3], "value": [1.0] * 4,
    })
    # no-KD fine-tuning and combined-stage epochs line up with prediction epochs, after the 2 intermediate
    assert list(dev_curves.align_curves(curves)["x"]) == [1.0, 2.0, 3.0, 3.0]


def test_align_curves_pre_stage_counts_as_before_the_scored_stage() -> None:
    # a PTP pre-stage (not scored) then prediction epochs; another run has only prediction epochs
    curves = pd.DataFrame({
        "task": ["rte"] * 4, "path": ["p", "p", "p", "k"], "stage": ["ptp", "prediction", "prediction", "prediction"],
        "epoch": [1, 1, 2, 1], "global_epoch": [1, 2, 3, 1], "value": [1.0] * 4,
    })
    out = dev_curves.align_curves(curves)
    assert list(out["x"]) == [1.0, 2.0, 3.0, 2.0] and set(out["boundary"]) == {1.5}


def test_align_curves() -> None:
    curves = pd.DataFrame({
        "task": ["rte"] * 5, "objective": ["hid_seq"] * 3 + ["vanilla_kd"] * 2, "path": ["h"] * 3 + ["v"] * 2,
        "stage": ["intermediate", "prediction", "prediction", "prediction", "prediction"],
        "epoch": [1, 1, 2, 1, 2], "global_epoch": [1, 2, 3, 1, 2], "value": [1.0] * 5,
    })
    out = dev_curves.align_curves(curves)
    # prediction epochs start after the longest intermediate stage of the task, for every objective
    assert list(out["x"]) == [1.0, 2.0, 3.0, 2.0, 3.0]
    assert set(out["boundary"]) == {1.5}



def _two_stage_curves() -> pd.DataFrame:
    """hid_seq: an intermediate epoch (scored with the untrained head) then 2 prediction epochs, 3 seeds;
    vanilla_kd: 2 prediction epochs, one seed."""
    rows = []
    for seed, values in enumerate([(30.0, 70.0, 74.0), (45.0, 72.0, 77.0), (20.0, 69.0, 78.0)]):
        for k, (stage, value) in enumerate(zip(("intermediate", "prediction", "prediction"), values, strict=True)):
            rows.append({"task": "rte", "system": "hid_seq", "path": f"h{seed}", "stage": stage, "seed": seed,
                         "global_epoch": k + 1, "value": value, "metric": "accuracy"})
    rows += [{"task": "rte", "system": "vanilla_kd", "path": "v0", "stage": "prediction", "seed": 0,
              "global_epoch": k + 1, "value": value, "metric": "accuracy"} for k, value in enumerate((60.0, 65.0))]
    return pd.DataFrame(rows)


def test_curve_band_is_the_t_interval_of_the_mean_over_seeds() -> None:
    means = dev_curves.curve_means(_two_stage_curves())
    for x, values in ((1.0, [30.0, 45.0, 20.0]), (2.0, [70.0, 72.0, 69.0]), (3.0, [74.0, 77.0, 78.0])):
        (row,) = means[(means["system"] == "hid_seq") & (means["x"] == x)].to_dict("records")
        lo, hi = sps.t.interval(0.95, df=2, loc=np.mean(values), scale=sps.sem(values))
        assert (row["ci_low"], row["ci_high"], row["n"]) == (pytest.approx(lo), pytest.approx(hi), 3)
    one = means[means["system"] == "vanilla_kd"]
    assert one["ci_low"].isna().all() and one["ci_high"].isna().all()  # one seed: no band, not a zero-width one


def test_curve_stages_scored_only_by_default_numbers_its_epochs_from_1() -> None:
    curves = _two_stage_curves()
    scored = dev_curves.curve_means(dev_curves.curve_stages(curves))
    hid = scored[scored["system"] == "hid_seq"]
    assert list(hid["x"]) == [1.0, 2.0] and list(hid["mean"]) == pytest.approx([70.333333, 76.333333])
    assert scored["boundary"].isna().all() and scored["scored"].all()  # nothing before the scored stage
    every = dev_curves.curve_means(dev_curves.curve_stages(curves, "all"))
    hid = every[every["system"] == "hid_seq"]
    assert list(hid["x"]) == [1.0, 2.0, 3.0] and list(hid["scored"]) == [False, True, True]
    assert set(every["boundary"]) == {1.5}
    with pytest.raises(ValueError, match="curves must be one of scored|all"):
        dev_curves.curve_stages(curves, "intermediate")

# ----------------------------------------------------------------------------- uncertainty, effect, ASO, power


def _exact_bootstrap_quantiles(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """Every one of the n**n resamples once (the bootstrap distribution itself, no sampling), then the same
    quantile rule: the number the Monte Carlo bootstrap estimates."""
    import itertools

    means = [float(np.mean(c)) for c in itertools.product(values, repeat=len(values))]
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(means, [tail, 1 - tail], method="inverted_cdf")  # the distribution's own quantiles
    return float(lo), float(hi)


def test_bootstrap_ci_n2_by_hand() -> None:
    # resamples of (70, 80): 70 with probability 1/4, 75 with 1/2, 80 with 1/4 -> the 2.5% and 97.5%
    # quantiles are the two values themselves
    assert stats.bootstrap_ci([70.0, 80.0]) == pytest.approx((70.0, 80.0))
    assert _exact_bootstrap_quantiles([70.0, 80.0]) == pytest.approx((70.0, 80.0))


def test_bootstrap_ci_matches_the_exact_distribution_and_scipy() -> None:
    values = [71.0, 74.5, 73.0, 79.0, 76.0]
    lo, hi = stats.bootstrap_ci(values)
    exact = _exact_bootstrap_quantiles(values)
    assert lo == pytest.approx(exact[0], abs=0.1) and hi == pytest.approx(exact[1], abs=0.1)
    ref = sps.bootstrap((np.array(values),), np.mean, method="percentile", n_resamples=10_000,
                        random_state=np.random.default_rng(7)).confidence_interval
    assert lo == pytest.approx(ref.low, abs=0.15) and hi == pytest.approx(ref.high, abs=0.15)
    assert stats.bootstrap_ci(values) == (lo, hi)  # seeded: the same report twice
    assert stats.bootstrap_ci(values, confidence=0.5)[1] < hi  # a narrower level, a narrower interval


def test_bootstrap_ci_zero_variance_and_single_value() -> None:
    assert stats.bootstrap_ci([81.5, 81.5, 81.5]) == (81.5, 81.5)
    assert all(math.isnan(x) for x in stats.bootstrap_ci([81.5]))
    assert all(math.isnan(x) for x in stats.bootstrap_ci([]))


def test_t_interval_equals_scipy_and_the_formula() -> None:
    values = [71.0, 74.5, 73.0, 79.0, 76.0]
    lo, hi = stats.t_interval(values)
    ref = sps.t.interval(0.95, df=4, loc=np.mean(values), scale=sps.sem(values))
    assert (lo, hi) == pytest.approx(ref, rel=1e-12)
    # n = 3: 80, 82, 84 -> mean 82, sd 2, t_{2, 0.975} = 4.302653 -> 82 +- 4.302653 * 2 / sqrt(3)
    half = 4.302652729911275 * 2.0 / math.sqrt(3)
    assert stats.t_interval([80.0, 82.0, 84.0]) == pytest.approx((82.0 - half, 82.0 + half), abs=1e-9)
    assert stats.t_interval(values, confidence=0.5)[1] < hi  # a narrower level, a narrower interval


def test_t_interval_named_cases() -> None:
    assert stats.t_interval([81.5, 81.5, 81.5]) == (81.5, 81.5)  # zero variance: the point itself
    assert all(math.isnan(x) for x in stats.t_interval([81.5]))  # one run: no interval
    assert all(math.isnan(x) for x in stats.t_interval([]))
    for method in stats.CI_METHODS:
        assert stats.mean_ci([81.5, 81.5], method) == (81.5, 81.5), method
        assert all(math.isnan(x) for x in stats.mean_ci([81.5], method)), method
    with pytest.raises(ValueError, match="ci must be one of"):
        stats.mean_ci([1.0, 2.0], "normal")


def test_mean_ci_methods() -> None:
    values = [71.0, 74.5, 73.0, 79.0, 76.0, 72.0, 75.5, 77.0]
    assert stats.mean_ci(values) == stats.t_interval(values)  # t is the default
    assert stats.mean_ci(values, "bootstrap") == stats.bootstrap_ci(values)
    ref = sps.bootstrap((np.array(values),), np.mean, method="BCa", n_resamples=10_000,
                        random_state=np.random.default_rng(11)).confidence_interval
    lo, hi = stats.mean_ci(values, "bca")
    assert lo == pytest.approx(ref.low, abs=0.15) and hi == pytest.approx(ref.high, abs=0.15)


def test_aggregate_ci_is_scipys_t_interval_by_default(tmp_path: Path) -> None:
    scores = [0.80, 0.83, 0.79, 0.85]
    for seed, score in enumerate(scores):
        write_record(tmp_path, seed=seed, score=score)
    sc, _ = frames.scores(frames.load_records(tmp_path))
    row = stats.aggregate(sc).iloc[0]
    pct = [100 * v for v in scores]
    ref = sps.t.interval(0.95, df=3, loc=np.mean(pct), scale=sps.sem(pct))
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(ref)
    boot = stats.aggregate(sc, ci="bootstrap").iloc[0]
    assert (boot["ci_low"], boot["ci_high"]) == pytest.approx(stats.bootstrap_ci(pct))


def test_paired_t_ci_equals_scipys_ttest_rel_interval() -> None:
    a, b = [80.0, 82.0, 85.0, 81.0], [78.0, 81.0, 82.0, 80.0]  # d = 2, 1, 3, 1
    ref = sps.ttest_rel(a, b).confidence_interval(0.95)
    assert stats.paired_t_ci(a, b) == pytest.approx((ref.low, ref.high))
    assert stats.paired_t_ci([5.0, 7.0], [4.0, 6.0]) == (1.0, 1.0)  # zero-variance differences
    assert all(math.isnan(x) for x in stats.paired_t_ci([5.0], [4.0]))


def test_paired_ci_excludes_zero_exactly_when_p_below_alpha() -> None:
    """Many random pairs (2 to 8 seeds, effects from none to large, two levels): the paired CI excludes 0 iff
    the paired t-test's p < alpha; and so does the tests table's (a sample of them through paired_tests)."""
    rng = np.random.default_rng(5)
    seen = {0.05: [0, 0], 0.01: [0, 0]}  # alpha -> [CI excludes 0, CI holds 0]
    for i in range(1000):
        n = int(rng.integers(2, 9))
        a = rng.normal(80, 2, n)
        b = a - rng.normal(rng.choice([0.0, 0.5, 2.0]), rng.uniform(0.2, 3.0), n)
        alpha = 0.05 if i % 2 else 0.01
        lo, hi = stats.paired_t_ci(a, b, 1 - alpha)
        p = sps.ttest_rel(a, b).pvalue
        excludes = lo > 0 or hi < 0
        assert excludes == (p < alpha), (n, p, lo, hi)
        seen[alpha][0 if excludes else 1] += 1
        if i < 4:
            rows = [("x", "l", "rte", s, float(v)) for s, v in enumerate(a)]
            rows += [("y", "l", "rte", s, float(v)) for s, v in enumerate(b)]
            row = stats.paired_tests(_scores_frame(rows), "objective", alpha=alpha, levels=["x", "y"]).iloc[0]
            assert (row["ci_low"], row["ci_high"], row["p"]) == pytest.approx((lo, hi, p))
            assert (row["ci_low"] > 0 or row["ci_high"] < 0) == bool(row["significant"])
    assert all(both > 50 and neither > 50 for both, neither in seen.values()), seen  # both outcomes seen


def test_bonferroni_level_from_statsmodels() -> None:
    assert aso.bonferroni_alpha(0.05, 1) == 0.05
    assert aso.bonferroni_alpha(0.05, 6) == pytest.approx(0.05 / 6)
    assert aso.bonferroni_alpha(0.01, 20) == pytest.approx(0.0005)


def test_cohens_dz_by_hand_and_from_scipy_t() -> None:
    # d = 1, 2, 3: mean 2, sd 1 -> d_z = 2
    assert stats.cohens_dz([2.0, 4.0, 6.0], [1.0, 2.0, 3.0]) == pytest.approx(2.0)
    a, b = [80.0, 82.0, 85.0, 81.0], [78.0, 81.0, 82.0, 80.0]
    t = sps.ttest_rel(a, b).statistic
    assert stats.cohens_dz(a, b) == pytest.approx(t / math.sqrt(4))  # d_z = t / sqrt(n)


def test_cohens_dz_n2_and_zero_variance() -> None:
    # n = 2: d = 2, 3 -> mean 2.5, sd sqrt(0.5) (Hedges' g would be 0 here: J(1) = 0)
    assert stats.cohens_dz([3.0, 5.0], [1.0, 2.0]) == pytest.approx(2.5 / math.sqrt(0.5))
    assert stats.cohens_dz([3.0, 5.0], [2.0, 4.0]) == math.inf  # every difference +1
    assert stats.cohens_dz([2.0, 4.0], [3.0, 5.0]) == -math.inf
    assert math.isnan(stats.cohens_dz([3.0, 5.0], [3.0, 5.0]))  # no difference at all
    assert math.isnan(stats.cohens_dz([3.0], [1.0]))


def _power(d: float, n: int, alpha: float = 0.05) -> float:
    """Two-sided paired t-test power from the noncentral t (scipy), independent of statsmodels."""
    crit = sps.t.ppf(1 - alpha / 2, n - 1)
    nc = d * math.sqrt(n)
    return float(sps.nct.sf(crit, n - 1, nc) + sps.nct.cdf(-crit, n - 1, nc))


@pytest.mark.parametrize(("d", "pairs"), [(0.5, 34), (0.8, 15), (1.0, 10)])
def test_seeds_needed_textbook_values(d: float, pairs: int) -> None:
    # G*Power's paired t-test sample sizes (two-sided, alpha 0.05, power 0.8), and the definition: the
    # fewest pairs whose power reaches 0.8
    assert stats.seeds_needed(d) == pairs
    assert _power(d, pairs) >= 0.8 > _power(d, pairs - 1)


def test_seeds_needed_pooled_over_tasks_and_edge_cases() -> None:
    assert stats.seeds_needed(0.5, units_per_seed=7) == math.ceil(34 / 7)  # 7 tasks per seed
    assert stats.seeds_needed(-0.5) == 34  # the sign does not matter (two-sided)
    assert stats.seeds_needed(10.135) == 3  # statsmodels returns NaN power here; scipy's nct takes over
    assert _power(10.135, 3) >= 0.8 > _power(10.135, 2)
    assert stats.seeds_needed(math.inf) == 2  # zero-variance differences: the fewest pairs a test takes
    assert stats.seeds_needed(0.0) == math.inf  # no difference: no number of seeds finds one
    assert math.isnan(stats.seeds_needed(math.nan))
    assert stats.seeds_needed(1e-6) == stats.MAX_SEEDS


def test_aso_violation_ratio_equals_deepsig() -> None:
    aso_mod = require_module("deepsig.aso", "the reference ASO implementation (a dev dependency)")
    rng = np.random.default_rng(3)
    for n_a, n_b in ((5, 5), (2, 2), (3, 7)):
        a, b = rng.normal(80, 1, n_a), rng.normal(79.5, 1, n_b)
        ia, ib, total_w, violation_w = aso._segments(n_a, n_b, aso.ASO_DT)
        ours = aso._violation_ratio(np.sort(a)[ia], np.sort(b)[ib], total_w, violation_w)
        assert float(ours) == pytest.approx(aso_mod.compute_violation_ratio(a, b, dt=aso.ASO_DT), abs=1e-12)


def test_aso_eps_min_close_to_deepsig_with_bonferroni() -> None:
    aso_mod = require_module("deepsig.aso", "the reference ASO implementation (a dev dependency)")
    a = [80.1, 81.2, 79.5, 80.7, 80.9, 79.9]
    b = [79.6, 80.8, 78.7, 80.1, 80.6, 80.0]
    for m in (1, 6):
        # Bonferroni: confidence 1 - alpha / m (deepsig's own num_comparisons raises it less for m > 2)
        ref = aso_mod.aso(a, b, confidence_level=1 - 0.05 / m, num_bootstrap_iterations=300,
                          show_progress=False, seed=1)
        ours = np.mean([aso.aso(a, b, 0.05, m, seed=s) for s in range(5)])
        assert ours == pytest.approx(ref, abs=0.05), m
    assert aso.aso(a, b, 0.05, 6) >= aso.aso(a, b, 0.05, 1)  # more comparisons, a more cautious bound


def test_aso_clear_order_n2_and_zero_variance() -> None:
    assert aso.aso([90.0, 91.0, 92.0], [70.0, 71.0, 72.0]) == 0.0  # A always better: no violation
    assert aso.aso([70.0, 71.0, 72.0], [90.0, 91.0, 92.0]) > 0.99  # (deepsig leaves the first quantile out)
    assert aso.aso([90.0, 91.0], [70.0, 71.0]) == 0.0  # n = 2
    assert aso.aso([3.0, 3.0], [3.0, 3.0]) == 0.5  # identical constants: deepsig's 0.5, no division by 0
    assert math.isnan(aso.aso([], [1.0]))


def test_paired_tests_add_ci_effect_aso_and_seeds() -> None:
    a = [80.0, 82.0, 85.0, 81.0, 84.0, 83.0]
    b = [78.0, 81.0, 82.0, 80.0, 81.0, 82.5]
    rows = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        task, seed = ("rte", i) if i < 3 else ("toy", i - 3)
        rows += [("att_kl", "4,8,12", task, seed, x), ("att_mse", "4,8,12", task, seed, y)]
    row = stats.paired_tests(_scores_frame(rows), "objective", levels=["att_kl", "att_mse"]).iloc[0]
    assert row["tasks"] == 2
    ref = sps.ttest_rel(a, b).confidence_interval(0.95)  # the interval the paired t-test inverts
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ref.low, ref.high))
    assert row["d"] == pytest.approx(stats.cohens_dz(a, b))
    assert row["seeds"] == stats.seeds_needed(stats.cohens_dz(a, b), 2)  # one pair: Holm's first step is alpha
    # ASO on the scores centred per task (each task's mean of both rows subtracted)
    ca = [x - (np.mean(a[:3]) + np.mean(b[:3])) / 2 if i < 3 else x - (np.mean(a[3:]) + np.mean(b[3:])) / 2
          for i, x in enumerate(a)]
    cb = [y - (np.mean(a[:3]) + np.mean(b[:3])) / 2 if i < 3 else y - (np.mean(a[3:]) + np.mean(b[3:])) / 2
          for i, y in enumerate(b)]
    assert (row["aso_ab"], row["aso_ba"]) == pytest.approx(aso.aso_both(ca, cb))
    # the verdict: below the null's calibrated threshold at 6 pairs and alpha / 2 per direction
    assert row["aso_limit"] == min(aso.ASO_THRESHOLD, aso_null.THRESHOLDS[6][0.025])
    assert row["aso_better"] == ("A" if row["aso_ab"] < row["aso_limit"] else "")


def test_paired_tests_zero_variance_pair_is_untestable() -> None:
    """Every difference +1.0: no t-test, so no d (it would read inf), no seeds, no ASO and no 0-width interval."""
    rows = []
    for seed in range(3):
        rows += [("att_kl", "4,8,12", "rte", seed, 80.0 + seed / 10), ("att_mse", "4,8,12", "rte", seed, 79.0 + seed / 10)]
    row = stats.paired_tests(_scores_frame(rows), "objective").iloc[0]
    assert not row["testable"] and "zero variance" in row["note"]
    assert math.isnan(row["d"]) and math.isnan(row["seeds"]) and math.isnan(row["seeds_low"])
    assert math.isnan(row["ci_low"]) and math.isnan(row["ci_high"])
    assert math.isnan(row["aso_ab"]) and row["aso_better"] == ""
    assert row["mean_diff"] == pytest.approx(1.0)




@pytest.mark.parametrize(("n", "level"), [(2, 0.05), (3, 0.05), (3, 0.05 / 3), (5, 0.01), (20, 0.05)])
def test_detectable_effect_has_80_percent_power(n: int, level: float) -> None:
    """The smallest difference a paired t-test on n pairs detects with 80% power, in the differences' units (sd 2.5
    here): statsmodels' TTestPower gives 0.8 at it where it computes (it is NaN at large noncentralities), and
    200,000 seeded simulated t-tests reject at 80% (Monte Carlo error 0.09 points)."""
    from statsmodels.stats.power import TTestPower

    got = stats.detectable_effect(n, 2.5, level)
    power = TTestPower().power(effect_size=got / 2.5, nobs=n, alpha=level, alternative="two-sided")
    if not math.isnan(power):
        assert power == pytest.approx(0.8, abs=1e-6)
    draws = got + 2.5 * np.random.default_rng(n).standard_normal((200_000, n))
    rejected = float((sps.ttest_1samp(draws, 0.0, axis=1).pvalue < level).mean())
    assert rejected == pytest.approx(0.8, abs=3 * math.sqrt(0.8 * 0.2 / 200_000))
    assert math.isnan(stats.detectable_effect(1, 2.5)) and math.isnan(stats.detectable_effect(3, 0.0))


def test_a_cells_interval_is_cut_at_the_metrics_range() -> None:
    """Three accuracies 99, 100, 92: the t-interval (scipy) reaches past 100, the cell's stops there and says so;
    MCC may go to -100; a cell inside its range is untouched."""
    values = [99.0, 100.0, 92.0]
    low, high = sps.t.interval(0.95, 2, loc=np.mean(values), scale=sps.sem(values))
    assert high > 100.0
    frame = pd.DataFrame({"system": "A", "init_label": "1", "task": "rte", "metric": "accuracy", "seed": [0, 1, 2],
                          "value": values})
    (cell,) = stats.aggregate(frame).to_dict("records")
    assert (cell["ci_low"], cell["ci_high"], cell["ci_cut"]) == (pytest.approx(low), 100.0, True)
    signed = frame.assign(metric="mcc", value=[-99.0, -100.0, -92.0])
    (cell,) = stats.aggregate(signed).to_dict("records")
    assert (cell["ci_low"], cell["ci_high"], cell["ci_cut"]) == (-100.0, pytest.approx(-low), True)
    inside = frame.assign(value=[70.0, 71.0, 72.0])
    (cell,) = stats.aggregate(inside).to_dict("records")
    assert not cell["ci_cut"] and cell["ci_low"] == pytest.approx(71.0 - 4.302652729911275 / math.sqrt(3))
