"""analysis/nested_spread.py: the spread of a score over training seeds and over sampling seeds nested in them,
against an example worked by hand and a simulation whose components are known."""

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
    assert (got["n"], got["k"], got["clipped"]) == (2, [3, 3], False)


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
    assert abs(np.mean([g["var_sampling"] for g in got]) - var_s) < 4 * np.std([g["var_sampling"] for g in got]) / math.sqrt(reps)
    assert abs(np.mean([g["var_training"] for g in got]) - var_t) < 4 * np.std([g["var_training"] for g in got]) / math.sqrt(reps)
