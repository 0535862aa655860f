"""`python -m distill_sweep.bench.gpu_check` (`make gpu-check`) on a machine without CUDA: it runs, skips what needs
CUDA in one line each, measures the rest at tiny sizes and says in its JSON what it skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from distill_sweep.bench import gpu_check

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the run without CUDA")


@pytest.mark.parametrize("args,message", [(["--parts", "tests,bogus"], "--parts: bogus"),
                                          (["--device", "cuda"], "--device cuda: torch sees no CUDA device")])
def test_bad_arguments_are_one_line_before_any_work(args: list[str], message: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        gpu_check.main([*args, "--json", str(tmp_path / "out.json")])
    assert exited.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.slow  # the tiny decoder step runs for real: 4-10 s on the 2-core machine
def test_on_cpu_no_part_is_failed_or_cut_by_the_clock_of_a_loaded_box(tmp_path: Path, monkeypatch, capsys) -> None:
    """Its CPU parts are sized by steps: a box whose pack bench takes 150 s (a 2-core machine shared with other
    jobs; the limit was 120 s) and whose decoder rows take minutes each still runs every part whole and exits 0.
    The slow box is simulated: the pack's process answers after "150 s" unless stopped sooner by a timeout, and
    the decoder step's clock advances 1000 s at every reading (its steps themselves run for real)."""
    import subprocess
    import sys

    real_run = subprocess.run

    def slow_pack(command, **kwargs):
        if "distill_sweep.bench.pack" not in command:
            return real_run(command, **kwargs)  # (git, for the JSON's commit)
        if kwargs.get("timeout") is not None and kwargs["timeout"] < 150:
            raise subprocess.TimeoutExpired(command, kwargs["timeout"])
        Path(command[command.index("--json") + 1]).write_text('{"blocks": []}')
        return subprocess.CompletedProcess(command, 0, "the pack's tables", "")

    clock = iter(range(0, 10**9, 1000))
    monkeypatch.setattr(gpu_check.subprocess, "run", slow_pack)
    monkeypatch.setattr(gpu_check.gpu_decoder.time, "perf_counter", lambda: float(next(clock)))
    monkeypatch.setattr(sys, "argv", ["gpu_check"])
    out = tmp_path / "gpu_check.json"
    assert gpu_check.main(["--device", "cpu", "--parts", "pack,decoder", "--json", str(out)]) == 0
    assert "ran over" not in capsys.readouterr().out
    parts = json.loads(out.read_text())["parts"]
    assert parts["pack"]["status"] == parts["decoder"]["status"] == "ran"
    assert all(r["tokens_per_s"] is not None and not r["note"] for r in parts["decoder"]["rows"])
