"""procedure.vocab=shared_prefix (a student vocabulary that shares ids 0..n-1 with the teacher's), and the decoder
refusals of item 3: the tests that run a job, a command or processes (its fast tests:
tests/unit/procedures/test_shared_vocab.py)."""

from __future__ import annotations

import math
from pathlib import Path

from helpers import FRESH_STUDENT_FAST as FAST
from helpers import WIDE_VOCAB as WIDE
from helpers import records, run_cli_preloaded


def test_a_wider_student_vocabulary_trains_over_the_shared_ids_end_to_end(tmp_path: Path):
    results, cache = tmp_path / "results", tmp_path / "cache"
    proc = run_cli_preloaded([*FAST, "objective=fkl", *WIDE, "max_steps_per_epoch=20", f"results_dir={results}",
                    f"cache_dir={cache}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rec,) = records(results)
    assert rec["status"] == "completed"
    vocabs = rec["causal_lm"]["vocabularies"]
    assert (vocabs["teacher"]["size"], vocabs["student"]["size"], vocabs["shared_ids"]) == (68, 128, 68)
    assert vocabs["metrics"] == {"vocabulary": "shared_ids", "size": 68}  # what its dev metrics read
    assert math.isfinite(rec["epochs"][-1]["loss_fkl"]) and rec["epochs"][-1]["loss_fkl"] > 0
    # learnt beyond a uniform guess over its 128 ids
    assert rec["final"]["dev"]["nll"] < math.log(128) - 0.5
