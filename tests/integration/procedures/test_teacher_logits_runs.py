"""procedure.teacher_logits (full | top_k | top_k_tail | sampled) in a causal_lm job: the tests that run a job, a
command or processes (its fast tests: tests/unit/procedures/test_teacher_logits.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from helpers import LOGITS_FAST as FAST
from helpers import compose_cfg, run_cli_preloaded

from distill_sweep.cli.run_job import run_job
from distill_sweep.job.prepare import prepare


def test_a_job_of_each_sparse_estimator_reads_its_own_compact_store(tmp_path: Path, shared_cache: Path):
    where = [f"results_dir={tmp_path}/r", f"cache_dir={shared_cache}"]
    tail = run_job(compose_cfg([*FAST, *where, "objective=gjsd", "procedure.teacher_logits=top_k_tail",
                                "procedure.teacher_top_k=4"]))
    sampled = run_job(compose_cfg([*FAST, *where, "objective=fkl", "procedure.teacher_logits=sampled",
                                   "procedure.teacher_top_k=4"]))
    full = run_job(compose_cfg([*FAST, *where, "objective=fkl", "procedure.teacher_logits=top_k_full",
                                "procedure.teacher_top_k=4"]))
    assert full["epochs"][-1]["loss_fkl"] > 0
    for record, mode, store in ((tail, "top_k_tail", "top_k"), (sampled, "sampled", "sampled"),
                                (full, "top_k_full", "top_k")):
        assert record["status"] == "completed"
        info = record["teacher_outputs"]
        assert info["mode"] == "store" and info["teacher_logits"] == mode and info["store_mode"] == store
        assert info["bytes_per_token"] == 4 * 4  # float16 + uint16, k = 4 (the toy vocabulary: 68 tokens)
        # per trained token: the two arrays (N, L, k) over the target positions (prompts and padding are stored)
        arrays = [np.load(Path(info["path"]) / f"{name}.npy", mmap_mode="r") for name in ("values", "indices")]
        stored = sum(a.size * a.dtype.itemsize for a in arrays)
        n, width, k = arrays[0].shape
        assert stored == n * width * 4 * 4 and k == 4
        # every row's first position and its padding are stored but not trained on (instruction data: its prompts
        # too): more bytes per trained token than per stored position (hand-worked: test_sparse_store.py)
        assert info["bytes_per_trained_token"] > info["bytes_per_token"]
    assert Path(sampled["teacher_outputs"]["path"]).name.split("-")[-2] == "sampled4"


def test_top_k_at_k1_is_refused_by_the_cli_in_one_line_and_writes_nothing(tmp_path: Path):
    """teacher_top_k=1 under top_k would train nothing (its loss is 0: test_sparse_estimators.py); the command exits
    non-zero with one line before any work, while top_k_tail and sampled at k = 1 are still jobs."""
    out = run_cli_preloaded([*FAST, "objective=fkl", "procedure.teacher_top_k=1", f"results_dir={tmp_path}/r",
                   f"cache_dir={tmp_path}/c"], cwd=tmp_path, env={"OMP_NUM_THREADS": "1"})
    assert out.returncode != 0
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "teacher_top_k=1 trains nothing" in lines[0], out.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()
    for mode in ("top_k_full", "top_k_tail", "sampled"):
        prepare(compose_cfg([*FAST, "objective=fkl", f"procedure.teacher_logits={mode}", "procedure.teacher_top_k=1",
                             f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c"]))
