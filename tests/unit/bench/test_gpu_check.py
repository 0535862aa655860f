"""`python -m distill_sweep.bench.gpu_check` (`make gpu-check`) on a machine without CUDA: it runs, skips what needs
CUDA in one line each, measures the rest at tiny sizes and says in its JSON what it skipped."""

from __future__ import annotations

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
