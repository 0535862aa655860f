"""bench_pack on CPU with two members and two steps per epoch: a row per student and the totals, positive rates,
the same samples trained alone and in the pack, results unchanged; the MFU arithmetic and the peaks by hand; a
member whose pack record differs is named."""

from __future__ import annotations

from typing import Any

import pytest

from distill_sweep.bench import pack


def test_mfu_is_the_achieved_rate_over_the_peak() -> None:
    assert pack.mfu(2.0e12, 4.0, 1.0) == pytest.approx(0.5)  # 0.5 TFLOP/s achieved of 1 TFLOP/s
    assert pack.mfu(989e12 * 3, 6.0, 989.0) == pytest.approx(0.5)
    assert pack.mfu(1e12, 1.0, None) is None and pack.mfu(1e12, 0.0, 1.0) is None


def test_known_devices_have_their_dense_peak_and_others_none() -> None:
    assert pack.peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.0
    assert pack.peak_tflops("NVIDIA H100 80GB HBM3", "fp32") == 67.0
    assert pack.peak_tflops("NVIDIA H200", "bf16") == 989.0
    assert pack.peak_tflops("NVIDIA H100 PCIe", "bf16") == 756.0
    assert pack.peak_tflops("NVIDIA A100-SXM4-80GB", "bf16") == 312.0
    assert pack.peak_tflops("NVIDIA GeForce RTX 4090", "bf16") is None
    assert pack.peak_tflops("cpu", "fp32") is None


def _record(losses: list[float], accuracy: float = 0.5) -> dict[str, Any]:
    epochs = [{"stage": "intermediate", "epoch": i + 1, "train_loss": loss, "loss_hid_seq": loss,
               "dev": {"accuracy": accuracy}} for i, loss in enumerate(losses)]
    return {"objective": "hid_seq", "status": "completed", "epochs": epochs, "best": epochs[-1]}


def test_a_member_that_differs_from_its_job_alone_is_named() -> None:
    assert pack.difference(_record([1.0, 0.5]), _record([1.0, 0.5])) is None
    assert pack.difference(_record([1.0, 0.5]), _record([1.0, 0.5 + 1e-9])) == \
        "hid_seq intermediate epoch 2 loss_hid_seq: 0.5 alone, 0.500000001 in the pack"
    assert "dev" in pack.difference(_record([1.0]), _record([1.0], accuracy=0.6))
    assert pack.difference(_record([1.0]), {"objective": "hid_seq"}) == "hid_seq in the pack: status None (None)"


@pytest.mark.parametrize("args", [["--steps", "0"], ["--batch", "-2"], ["--threads", "-1"], ["--steps", "two"]])
def test_a_bad_size_is_one_error_line_before_any_work(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        pack.parse_args(args)
    assert exit_.value.code == 2
    (error,) = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert f"argument {args[0]}" in error


def test_two_different_objectives_are_needed() -> None:
    with pytest.raises(SystemExit, match="two or more different objectives"):
        pack.main(["--objectives", "hid_seq,hid_seq"])
