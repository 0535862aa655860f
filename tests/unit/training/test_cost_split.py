"""A pack's CPU-seconds split over its members by their FLOPs (training/cost.py), and the FLOP count of a step."""

from __future__ import annotations

import pytest
import torch

from distill_sweep.training.cost import StepFlops, pack_shares, split_by_flops


def test_shares_are_proportional_to_flops_and_add_up() -> None:
    # 12 s over FLOPs 1:2:3 -> 2, 4, 6
    assert split_by_flops(12.0, [1e9, 2e9, 3e9]) == pytest.approx([2.0, 4.0, 6.0])


def test_an_unknown_member_gets_none_and_the_known_share_the_whole() -> None:
    shares = split_by_flops(10.0, [None, 1.0, 4.0])
    assert shares[0] is None and shares[1:] == pytest.approx([2.0, 8.0])


def test_a_damaged_count_is_unknown() -> None:
    assert split_by_flops(6.0, ["many", float("nan"), 2.0])[2] == pytest.approx(6.0)
    a, b = pack_shares([{"cpu_seconds": "x", "flops": 1.0}, {"cpu_seconds": 4.0, "flops": 1.0}], "p")
    assert a is not None and b is not None and a["share"]["pack_cpu_seconds"] == pytest.approx(4.0)


def test_no_positive_count_splits_equally_and_nothing_known_splits_nothing() -> None:
    assert split_by_flops(9.0, [0.0, 0.0, 0.0]) == pytest.approx([3.0, 3.0, 3.0])
    assert split_by_flops(9.0, [None, None]) == [None, None]


def test_pack_shares_keep_the_own_seconds_and_say_it_is_a_share() -> None:
    costs = [{"cpu_seconds": 5.0, "flops": 3.0}, {"cpu_seconds": 3.0, "flops": 1.0}, None]
    a, b, c = pack_shares(costs, "pack-1")
    assert c is None
    assert a is not None and b is not None
    # the pack's 8 s split 3:1
    assert (a["cpu_seconds"], b["cpu_seconds"]) == pytest.approx((6.0, 2.0))
    assert (a["cpu_seconds_own"], b["cpu_seconds_own"]) == (5.0, 3.0)
    assert a["share"]["pack"] == "pack-1" and a["share"]["pack_cpu_seconds"] == pytest.approx(8.0)


def test_the_first_step_of_each_stage_is_counted_once() -> None:
    flops = StepFlops()
    a, b = torch.ones(4, 8), torch.ones(8, 5)
    with flops.step("prediction"):
        a @ b  # 4 x 8 x 5 multiply-adds = 2 * 160 FLOPs
    with flops.step("prediction"):
        a @ b @ b.T  # not counted: the stage has its count
    assert flops.per_step == {"prediction": 2 * 4 * 8 * 5}
    with flops.step("intermediate"):
        pass
    assert flops.per_step["intermediate"] == 0


def test_cpu_attention_is_counted_as_sdpa() -> None:
    """FlopCounterMode's registry lacks CPU's fused attention kernel; the count has it: QK^T and AV, each
    2 x batch x heads x length^2 x head width."""
    b, h, n, d = 2, 4, 16, 8
    q, k, v = (torch.ones(b, h, n, d) for _ in range(3))
    flops = StepFlops()
    with flops.step("prediction"):
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert flops.per_step["prediction"] == 2 * (2 * b * h * n * n * d)
