"""procedure.teacher_logits (full | top_k | top_k_tail | sampled) in a causal_lm job: the hashes of jobs from before
the key, the refusals of what an estimator cannot serve, and a job of each sparse estimator run from its store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import CAUSAL_BASE, CAUSAL_BASE_HASH, compose_cfg, run_cli_preloaded

from distill_sweep.cli.run_job import run_job
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare

BASE = CAUSAL_BASE
FAST = [*BASE, "procedure.teacher_steps=60", "procedure.epochs=1", "max_steps_per_epoch=4"]

# config hashes of these jobs (sha256 of the hashed config's JSON: settings, no float results, so the same on any
# machine), computed by the code before procedure.teacher_logits existed (commit 8259e3c)
EARLIER = [
    ([], CAUSAL_BASE_HASH),
    (["procedure.teacher_top_k=4", "objective=fkl"], "508c0d7a9335830ca5d8566cf40f62e16c3f94022fc31706b113b86573f9bfad"),
    (["procedure.data=instructions", "objective=gjsd", "procedure.teacher_top_k=8"],
     "d183ef5761edec8556296f6c2b6df5145d2558debc9b30621234faed9d4ee386"),
]


@pytest.mark.parametrize("overrides,digest", EARLIER)
def test_earlier_jobs_keep_their_hash_and_naming_their_estimator_is_the_same_job(overrides, digest, tmp_path: Path):
    def hashed(extra: list[str]) -> str:
        return identify(compose_cfg([*BASE, f"results_dir={tmp_path}", *overrides, *extra])).digest

    assert hashed([]) == digest
    same = "procedure.teacher_logits=" + ("top_k" if any("teacher_top_k" in o for o in overrides) else "full")
    assert hashed([same]) == digest
    if any("teacher_top_k" in o for o in overrides):  # another estimator is another job
        assert hashed(["procedure.teacher_logits=top_k_tail"]) != digest


@pytest.mark.parametrize("overrides,message", [
    (["procedure.teacher_logits=sampled"], r"teacher_logits=sampled stores k tokens per position: set "
                                           r"procedure.teacher_top_k"),
    (["procedure.teacher_logits=full", "procedure.teacher_top_k=4"], "teacher_logits=full reads all the teacher's "
                                                                     "logits live: leave procedure.teacher_top_k null"),
    (["objective=rkl", "procedure.teacher_logits=sampled", "procedure.teacher_top_k=4"],
     "estimates forward KL without bias, and only it: term rkl is not linear"),
    (["objective=fkl", "objective.terms.fkl.temperature=2.0", "procedure.teacher_logits=top_k_tail",
      "procedure.teacher_top_k=4"], r"teacher_logits=top_k_tail stores the teacher's probabilities at T = 1 .*"
                                    r"term fkl has temperature 2.0"),
    (["objective=gjsd", "procedure.teacher_logits=top_k_full", "procedure.teacher_top_k=4"],
     "teacher_logits=top_k_full compares the teacher's k tokens with the student's full softmax, a forward KL: term "
     "gjsd is not fkl"),
    (["objective=fkl", "procedure.teacher_top_k=1"], r"procedure.teacher_logits=top_k with procedure.teacher_top_k=1 "
                                                     r"trains nothing .* or procedure.teacher_logits=top_k_full, "
                                                     r"top_k_tail or sampled"),
    (["objective=gjsd", "procedure.teacher_logits=top_k", "procedure.teacher_top_k=1"], r"teacher_top_k=1 trains "
                                                                                        r"nothing"),
])
def test_what_an_estimator_cannot_serve_is_refused_before_any_work(overrides, message, tmp_path: Path):
    cfg = compose_cfg([*FAST, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c", *overrides])
    with pytest.raises(ConfigError, match=message):
        prepare(cfg)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


@pytest.mark.slow  # trains a tiny teacher and two students: over 2 s
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
