"""analysis/nested_spread.py: the spread of a score over training seeds and over sampling seeds, nested (each model
its own seeds) or crossed (the same seeds for every model), against examples worked by hand and simulations whose
components are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from distill_sweep.analysis.nested_spread import nested_spread


def test_a_hand_worked_example():
    # model A: 0.2, 0.4, 0.6 (mean 0.4, within SS 0.04+0+0.04 = 0.08); model B: 0.5, 0.6, 0.7 (mean 0.6, SS 0.02)
    got = nested_spread([[0.2, 0.4, 0.6], [0.5, 0.6, 0.7]])
    assert math.isclose(got["mean"], 0.5, abs_tol=1e-12)
    # s_T^2 = ((0.4-0.5)^2 + (0.6-0.5)^2) / (2-1) = 0.02; s_S^2 = (0.08 + 0.02) / (2 + 2) = 0.025
    assert math.isclose(got["sd_training"], math.sqrt(0.02), abs_tol=1e-12)
    assert math.isclose(got["sd_sampling"], math.sqrt(0.025), abs_tol=1e-12)
    # var_T = 0.02 - 0.025 / 3 = 7/600; var_S = 15/600; share = 7 / 22
    assert math.isclose(got["var_training"], 7 / 600, abs_tol=1e-12)
    assert math.isclose(got["var_sampling"], 0.025, abs_tol=1e-12)
    assert math.isclose(got["training_share"], 7 / 22, abs_tol=1e-12)
    assert (got["n"], got["k"], got["clipped"], got["design"]) == (2, [3, 3], False, "nested")


def test_the_same_hand_worked_example_crossed():
    # the same scores, both models sampled with seeds 1, 2, 3: seed means 0.35, 0.5, 0.65; the residuals
    # y - ybar_i - ybar_j + ybar: A -0.05, 0, 0.05; B 0.05, 0, -0.05 -> SS 0.01 over (2-1)(3-1) = 2: MS_I = 0.005
    got = nested_spread([[0.2, 0.4, 0.6], [0.5, 0.6, 0.7]], seeds=[[1, 2, 3], [1, 2, 3]])
    assert got["design"] == "crossed"
    assert math.isclose(got["sd_training"], math.sqrt(0.02), abs_tol=1e-12)  # the same two spreads
    assert math.isclose(got["sd_sampling"], math.sqrt(0.025), abs_tol=1e-12)
    # var_T = 0.02 - 0.005 / 3 = 11/600; share = (11/600) / (11/600 + 15/600) = 11/26
    assert math.isclose(got["var_training"], 11 / 600, abs_tol=1e-12)
    assert math.isclose(got["training_share"], 11 / 26, abs_tol=1e-12)
    # other seed lists (or orders) are not crossed
    assert nested_spread([[0.2, 0.4, 0.6], [0.5, 0.6, 0.7]], seeds=[[1, 2, 3], [4, 5, 6]])["design"] == "nested"


def test_unequal_seed_counts_and_a_component_clipped_at_zero():
    # A: 0, 1 (mean 0.5, SS 0.5); B: 0.5 (one seed, SS 0); C: 1, 0, 0.5, 0.5 (mean 0.5, SS 0.5)
    got = nested_spread([[0.0, 1.0], [0.5], [1.0, 0.0, 0.5, 0.5]])
    # the means agree: s_T^2 = 0; s_S^2 = (0.5 + 0 + 0.5) / (1 + 0 + 3) = 0.25; var_T = 0 - 0.25 * (1/2+1+1/4)/3 < 0
    assert got["sd_training"] == 0.0 and math.isclose(got["var_sampling"], 0.25, abs_tol=1e-12)
    assert got["var_training"] == 0.0 and got["clipped"] and got["training_share"] == 0.0


def test_no_degrees_of_freedom_is_nan():
    one_model = nested_spread([[0.1, 0.3]])
    assert math.isnan(one_model["sd_training"]) and math.isclose(one_model["sd_sampling"], math.sqrt(0.02))
    greedy_like = nested_spread([[0.1], [0.3]])
    assert math.isnan(greedy_like["sd_sampling"]) and math.isclose(greedy_like["sd_training"], math.sqrt(0.02))
    with pytest.raises(ValueError):
        nested_spread([])


def test_the_components_are_recovered_on_average_in_simulation():
    rng = np.random.default_rng(0)
    var_t, var_s, n, k, reps = 0.04, 0.01, 6, 5, 2000
    got = [nested_spread(rng.normal(0, math.sqrt(var_t), (n, 1)) + rng.normal(0, math.sqrt(var_s), (n, k)))
           for _ in range(reps)]
    # unbiased before the clip at 0 (rare here: var_T is 20x var_S / k): within a few standard errors
    for key, want in (("var_sampling", var_s), ("var_training", var_t)):
        values = [g[key] for g in got]
        assert abs(np.mean(values) - want) < 4 * np.std(values) / math.sqrt(reps), key


def test_crossed_seeds_common_to_the_models_leave_the_training_component_unbiased():
    """A shared seed effect b_j (the same random numbers for every model) plus a model-by-seed part: the crossed
    estimator recovers var_T on average, the nested one (which subtracts the shared part too) falls short."""
    rng = np.random.default_rng(1)
    var_t, var_b, var_c, n, k, reps = 0.002, 0.004, 0.001, 4, 5, 3000
    crossed, nested = [], []
    for _ in range(reps):
        y = (rng.normal(0, math.sqrt(var_t), (n, 1)) + rng.normal(0, math.sqrt(var_b), (1, k))
             + rng.normal(0, math.sqrt(var_c), (n, k)))
        s_t2 = float(y.mean(axis=1).var(ddof=1))
        resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
        crossed.append(s_t2 - float((resid ** 2).sum()) / ((n - 1) * (k - 1)) / k)  # before the clip: unbiased
        got = nested_spread(y, seeds=[list(range(k))] * n)
        assert got["design"] == "crossed" and math.isclose(got["var_training"], max(0.0, crossed[-1]), abs_tol=1e-12)
        nested.append(s_t2 - nested_spread(y)["var_sampling"] / k)
    assert abs(np.mean(crossed) - var_t) < 4 * np.std(crossed) / math.sqrt(reps)
    # the nested estimate is low by var_b / k = 0.0008 on average
    assert np.mean(nested) < var_t - 0.0005
