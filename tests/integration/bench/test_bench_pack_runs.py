"""bench_pack on CPU with two members and two steps per epoch: the tests that run a job, a command or processes
(its fast tests: tests/unit/bench/test_bench_pack.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distill_sweep.bench import pack


def _rows(out: str) -> dict[str, list[str]]:
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] not in ("student", "measure"):
            rows[cells[0]] = cells
    return rows


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
