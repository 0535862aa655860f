"""Table 3's objective x init interaction: the difference of differences over (task, seed) units, its t-test and
t-interval and its Holm correction in the table's family, against numbers worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from distill_sweep.analysis.interaction import init_interactions

T_975_DF2 = 4.302652729911275  # the 0.975 quantile of Student's t with 2 degrees of freedom (printed tables)


def _frame(values: dict[tuple[str, str], list[float]], task: str = "rte") -> pd.DataFrame:
    return pd.DataFrame([{"task": task, "seed": seed, "system": system, "init_label": init, "value": v}
                         for (system, init), vs in values.items() for seed, v in enumerate(vs, start=1)])


HAND = {("A", "skip"): [80.0, 82.0, 81.0], ("A", "bottom"): [78.0, 79.0, 80.0],
        ("B", "skip"): [70.0, 71.0, 72.0], ("B", "bottom"): [70.0, 70.0, 71.0]}


def test_the_difference_of_differences_by_hand():
    # init effects skip - bottom per seed: A (2, 3, 1), B (0, 1, 1); d = (2, 2, 0): mean 4/3, sd sqrt(4/3),
    # se = sd / sqrt(3) = 2/3, t = 2 on 2 df; Student t with 2 df has cdf 1/2 + t / (2 sqrt(2 + t^2)), so the
    # two-sided p is 1 - t / sqrt(2 + t^2) = 1 - 2 / sqrt(6)
    (row,) = init_interactions(_frame(HAND), ["A", "B"], ["skip", "bottom"]).to_dict("records")
    assert (row["a"], row["b"], row["init_x"], row["init_y"], row["n"], row["tasks"]) == ("A", "B", "skip", "bottom",
                                                                                            3, 1)
    assert row["effect_a"] == pytest.approx(2.0) and row["effect_b"] == pytest.approx(2.0 / 3.0)
    assert row["diff"] == pytest.approx(4.0 / 3.0)
    assert row["t"] == pytest.approx(2.0)
    assert row["p"] == pytest.approx(1.0 - 2.0 / math.sqrt(6.0), abs=1e-9)
    half = T_975_DF2 * 2.0 / 3.0
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(4 / 3 - half), pytest.approx(4 / 3 + half))
    assert row["p_holm"] == pytest.approx(row["p"])  # a family of one


def test_holm_over_the_tables_family():
    # p = 0.18350 with the table's p-values 0.01 and 0.5: Holm ranks 0.01 (x3 = 0.03), 0.1835 (x2 = 0.3670),
    # 0.5 (x1, but never below the one before: 0.5); the interaction's adjusted p is 2 * 0.18350
    (row,) = init_interactions(_frame(HAND), family_p=[0.01, 0.5, math.nan]).to_dict("records")
    assert row["p_holm"] == pytest.approx(2.0 * (1.0 - 2.0 / math.sqrt(6.0)), abs=1e-9)
    assert not row["significant_holm"]


def test_every_pair_of_objectives_and_inits_on_units_where_all_four_ran():
    values = {**HAND, ("A", "mixed"): [79.0, 80.0, math.nan], ("B", "mixed"): [71.0, 72.0, 70.0],
              ("C", "skip"): [60.0, 61.0, 62.0]}
    frame = _frame(values).dropna()
    out = init_interactions(frame, ["A", "B", "C"], ["skip", "mixed", "bottom"])
    pairs = [(r["a"], r["b"], r["init_x"], r["init_y"]) for r in out.to_dict("records")]
    assert pairs == [(a, b, x, y) for a, b in (("A", "B"), ("A", "C"), ("B", "C"))
                     for x, y in (("skip", "mixed"), ("skip", "bottom"), ("mixed", "bottom"))]
    ab = out[(out["a"] == "A") & (out["b"] == "B") & (out["init_x"] == "skip") & (out["init_y"] == "mixed")].iloc[0]
    # seed 3 lacks A/mixed: units 1, 2; A effects (1, 2), B (-1, -1): d = (2, 3), sd sqrt(1/2), se 1/2, t = 5
    assert ab["n"] == 2 and ab["diff"] == pytest.approx(2.5) and ab["t"] == pytest.approx(5.0)
    # one degree of freedom: Student t is Cauchy, two-sided p = 1 - 2 atan(t) / pi
    assert ab["p"] == pytest.approx(1.0 - 2.0 * math.atan(5.0) / math.pi)
    ac = out[(out["a"] == "A") & (out["b"] == "C")]
    assert (ac["n"] == 0).all() and not ac["testable"].any()
    assert ac["note"].str.contains("all four runs").all()
    # the family: A-B's three contrasts (C has one init, B-C and A-C no unit); Holm by hand over three
    assert out["testable"].tolist() == [True] * 3 + [False] * 6
    tested = out[out["testable"]]
    p = np.sort(tested["p"].to_numpy())
    assert np.sort(tested["p_holm"].to_numpy()) == pytest.approx(np.maximum.accumulate(p * [3, 2, 1]).clip(max=1))


def test_units_pool_over_tasks():
    frame = pd.concat([_frame(HAND, "rte"), _frame(HAND, "mrpc")])
    (row,) = init_interactions(frame).to_dict("records")
    # d = (2, 2, 0) twice: mean 4/3, sd sqrt(((2/3)^2 * 4 + (4/3)^2 * 2) / 5) = sqrt(16/15), se sqrt(16/90)
    assert (row["n"], row["tasks"]) == (6, 2)
    assert row["t"] == pytest.approx((4 / 3) / math.sqrt(16 / 90))
