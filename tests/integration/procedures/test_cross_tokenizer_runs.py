"""A decoder student with its own tokenizer (student.tokenizer): the tests that run a job, a command or processes
(its fast tests: tests/unit/procedures/test_cross_tokenizer.py)."""

from __future__ import annotations

import math
from pathlib import Path

from helpers import FRESH_STUDENT_FAST as FAST
from helpers import records, run_cli_preloaded


def test_uld_trains_a_student_with_its_own_tokenizer_end_to_end(tmp_path: Path):
    results, cache = tmp_path / "results", tmp_path / "cache"
    proc = run_cli_preloaded([*FAST, "objective=uld", "student.tokenizer=toy_pieces", "max_steps_per_epoch=30",
                    f"results_dir={results}", f"cache_dir={cache}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rec,) = records(results)
    assert rec["status"] == "completed"
    vocabs = rec["causal_lm"]["vocabularies"]
    assert (vocabs["teacher"]["size"], vocabs["student"]["size"]) == (68, 107)
    last = rec["epochs"][-1]
    assert last["loss_uld"] > 0 and math.isfinite(last["loss_uld"]) and math.isfinite(last["loss_nll"])
    # the student's dev metrics are on its own tokens: it has learnt beyond a uniform guess over its 107 tokens
    assert rec["final"]["dev"]["nll"] < math.log(107) - 0.5
