"""A malformed instruction file on the command line: one line naming the file and the line, exit 2, before any job
starts, nothing written (no record, no tokenizer, no Hydra directory); for one job and for a sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import run_cli_preloaded

JOB = ["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama", "student.num_layers=2",
       "objective=fkl", "procedure.data=instructions", "procedure.instructions.source=jsonl",
       "procedure.instructions.dev_examples=4"]


@pytest.mark.parametrize("sweep", [False, True], ids=["one-job", "sweep"])
def test_a_null_response_is_refused_before_any_job_starts(tmp_path: Path, sweep: bool) -> None:
    rows = [{"prompt": f"q{i}", "response": f"a{i}"} for i in range(40)]
    rows[25]["response"] = None  # trained on as the text 'None' before
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = set(tmp_path.iterdir())
    args = [*JOB, f"procedure.instructions.path={data}", f"results_dir={tmp_path / 'r'}",
            f"cache_dir={tmp_path / 'c'}", f"hydra.run.dir={tmp_path / 'h'}", f"hydra.sweep.dir={tmp_path / 'h'}"]
    proc = run_cli_preloaded([*args, "seed=1,2", "-m"] if sweep else args, cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, f"rc {proc.returncode}\n{proc.stderr[-3000:]}"
    assert lines[0].endswith(f"{data} line 26: 'response' is null, not a string"), lines[0]
    assert set(tmp_path.iterdir()) == before  # no results, cache (tokenizer) or Hydra directory
