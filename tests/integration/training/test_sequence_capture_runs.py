"""A decoder student's per-sequence dev summaries (training/prediction_capture.SequenceCapture, fed by
teachers/decoder.lm_evaluator's sink): the tests that run a job, a command or processes (its fast tests:
tests/unit/training/test_sequence_capture.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import run_cli_preloaded

from distill_sweep.records.predictions import read_predictions


def test_a_jobs_file_recomputes_its_records_final_dev_metrics(tmp_path: Path):
    results = tmp_path / "results"
    proc = run_cli_preloaded(["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama",
                    "procedure.teacher_steps=60", "procedure.epochs=2", "max_steps_per_epoch=3",
                    "student.num_layers=2", "objective=fkl", f"results_dir={results}", f"cache_dir={tmp_path / 'cache'}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = results.rglob("result.json")
    record = json.loads(path.read_text())
    got = read_predictions(path.parent)
    assert got is not None and got.preds == {} and set(got.sequences) == {"validation"}
    assert got.epoch == record["epochs"][-1]["epoch"]  # the final epoch: the decoder table's
    assert record["data"]["dev_hash"] == got.dev_hash  # the record names the dev content its file holds
    summary, final = got.sequences["validation"], record["final"]["dev"]
    assert len(summary.nll) == record["data"]["dev_size"]
    assert summary.token_accuracy() == pytest.approx(final["token_accuracy"], abs=1e-12)
    assert summary.perplexity() == pytest.approx(final["perplexity"], rel=1e-6)
    assert float(summary.nll.sum() / summary.targets.sum()) == pytest.approx(math.log(final["perplexity"]), rel=1e-6)
