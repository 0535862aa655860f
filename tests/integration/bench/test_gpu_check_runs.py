"""`python -m distill_sweep.bench.gpu_check` (`make gpu-check`) on a machine without CUDA: the tests that run a
job, a command or processes (its fast tests: tests/unit/bench/test_gpu_check.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from distill_sweep.bench import gpu_check

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the run without CUDA")


def _run(tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "gpu_check.json"
    code = gpu_check.main(["--device", "cpu", *args, "--json", str(out)])
    return code, json.loads(out.read_text())


def test_without_cuda_the_cuda_parts_are_skipped_one_line_each(tmp_path: Path, capsys) -> None:
    code, data = _run(tmp_path, "--parts", "tests,decoder")
    assert code == 0 and data["cuda"] is False and data["device"] == "cpu"
    assert data["parts"]["tests"]["status"] == "skipped"
    assert data["skipped"] == [
        "skipped: the tests marked cuda (no CUDA device)",
        "skipped: the decoder step at GPU sizes, in bf16, and its peak memory (no CUDA device: tiny sizes)"]
    printed = capsys.readouterr().out
    assert all(printed.count(line) == 1 for line in data["skipped"])
    # the decoder step ran at the tiny sizes, on whole logits and in chunks: tokens/s per sequence length, no peak
    # memory on CPU
    rows = data["parts"]["decoder"]["rows"]
    for loss in ("unchunked", "chunked"):
        measured = [r for r in rows if r["loss"] == loss]
        assert [r["seq"] for r in measured] == list(gpu_check.gpu_decoder.CPU.seqs)
        assert all(r["tokens_per_s"] > 0 and r["peak_gib"] is None and not r["note"] for r in measured)
    assert "pack" not in data["parts"]
    # the printed tables as the docs' benchmark pages read them
    assert any("table" in b and b["table"]["columns"][0] == "sequence" for b in data["blocks"])


def test_the_whole_check_runs_on_cpu_with_a_tiny_pack(tmp_path: Path) -> None:
    code, data = _run(tmp_path)
    assert code == 0, data["parts"]
    assert [data["parts"][p]["status"] for p in gpu_check.PARTS] == ["skipped", "ran", "ran"]
    assert "skipped: bench.pack at the paper's size in bf16, and its MFU (no CUDA device: a tiny fp32 pack on CPU)" \
        in data["skipped"]
    texts = [b["text"] for b in data["parts"]["pack"]["blocks"] if "text" in b]
    assert any(t.startswith("results unchanged: per-epoch losses and dev metrics identical in 2/2") for t in texts)
    assert data["parts"]["pack"]["arguments"] == gpu_check.PACK_CPU
