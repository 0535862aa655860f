"""bench_pack on CPU with two members and two steps per epoch: a row per student and the totals, positive rates,
the same samples trained alone and in the pack, results unchanged; the MFU arithmetic and the peaks by hand; a
member whose pack record differs is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from distill_sweep.bench import pack


def _rows(out: str) -> dict[str, list[str]]:
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] not in ("student", "measure"):
            rows[cells[0]] = cells
    return rows


@pytest.mark.slow  # eight toy jobs (two build jobs, two warm-ups, two alone twice) and two packs: ~15 s
def test_the_bench_measures_two_members_alone_and_packed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        one_thread) -> None:
    out_json = tmp_path / "pack.json"
    code = pack.main(["--objectives", "hid_seq,vanilla_kd", "--steps", "2", "--threads", "1", "--num-dev", "32",
                      "--device", "cpu", "--peak-tflops", "0.5", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = _rows(out)
    # hid_seq: an intermediate and a prediction stage, vanilla_kd one, each 2 steps of 32 rows
    assert rows["hid_seq"][1] == "128" and rows["vanilla_kd"][1] == "64" and rows["all 2 students"][1] == "192"
    for name in ("hid_seq", "vanilla_kd", "all 2 students"):
        alone, packed = float(rows[name][2]), float(rows[name][3])
        assert alone > 0 and packed > 0, name
        assert float(rows[name][4].removesuffix("x")) == pytest.approx(packed / alone, abs=0.02), name
    wall = rows["wall seconds (set-up, evaluation, checkpoints included)"]
    assert float(wall[1]) > 0 and float(wall[2]) > 0
    flops = rows["training FLOPs (FlopCounterMode)"]
    assert float(flops[1]) >= float(flops[2]) > 0  # the pack never does more than its jobs alone
    seconds = float(rows["training seconds (the steps)"][2])
    achieved = float(rows["achieved TFLOP/s (FLOPs / training seconds)"][2])
    # from the printed figures: seconds to 0.01 (+-0.005), FLOPs and TFLOP/s to 4 significant digits
    assert achieved == pytest.approx(float(flops[2]) / seconds / 1e12, rel=0.005 / seconds + 1e-3)
    mfu = rows["MFU (peak 0.5 TFLOP/s, fp32)"]
    assert float(mfu[2].removesuffix("%")) == pytest.approx(100 * achieved / 0.5, rel=0.01)
    assert float(mfu[1].removesuffix("%")) > 0
    assert "identical in 2/2 members" in out
    data = json.loads(out_json.read_text())
    assert data["bench"] == "pack" and any("table" in b for b in data["blocks"])


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
