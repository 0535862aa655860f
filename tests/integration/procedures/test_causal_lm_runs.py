"""procedure=causal_lm: the tests that run a job, a command or processes (its fast tests:
tests/unit/procedures/test_causal_lm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import CAUSAL_FAST as FAST
from helpers import records, run_cli_preloaded

from distill_sweep.students.prune import prune_layers


def test_sweep_end_to_end_reuses_teacher_and_store_and_reports(tmp_path: Path):
    """fkl and gjsd from the stored top-k, init prune, 2 seeds; the teacher is trained once and the store built
    once, by the sweeper's build job before the grid, and the report prints the decoder table with its t-tests."""
    results, cache = tmp_path / "results", tmp_path / "cache"  # its own cache: nothing built before
    proc = run_cli_preloaded(["-m", *FAST, "procedure.teacher_top_k=6", "objective=fkl,gjsd", "init=prune", "seed=1,2",
                    f"results_dir={results}", f"cache_dir={cache}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = records(results)
    assert len(recs) == 4 and {r["status"] for r in recs} == {"completed"}
    for r in recs:
        assert r["procedure"] == "causal_lm" and r["init"]["name"] == "prune"
        assert r["config"]["task"] is None  # the job reads its own data, not the task
        prune = r["causal_lm"]["prune"]
        assert r["init"]["layers"] == prune["layers"] == prune_layers(prune["scores"], 2)
        assert r["teacher_outputs"]["mode"] == "store"
        assert {"token_accuracy", "perplexity"} <= set(r["final"]["dev"])
        assert r["teacher"]["dev"]["token_accuracy"] > r["teacher"]["majority_baseline"]["token_accuracy"]
    teachers = {r["causal_lm"]["teacher"]["path"] for r in recs}
    assert len(teachers) == 1  # one teacher for the sweep
    assert "building the teacher outputs of 1 task(s) first" in proc.stdout
    assert [r["teacher_outputs"]["built"] for r in recs] == [False] * 4  # the build job built it
    assert {r["causal_lm"]["teacher"]["cache"] for r in recs} == {"reused"}
    assert len(list((cache / "teachers" / "causal_toy").glob("*/teacher.json"))) == 1
    assert len(list((cache / "teacher_outputs" / "causal_toy").glob("*/meta.json"))) == 1
    report = run_cli_preloaded([str(results)], cwd=tmp_path, module="distill_sweep.report")
    assert report.returncode == 0, report.stderr[-2000:]
    assert "Decoder distillation: causal_toy, teacher tiny_llama" in report.stdout and "gjsd vs fkl" in report.stdout
    assert "Table 3:" not in report.stdout  # decoder records stay out of the encoder tables (no Table 3 heading)


def test_dry_run_counts_the_decoder_students_training_tokens(tmp_path: Path):
    """The dry run's cost of decoder jobs: steps x sequences per step x sequence length, per job (by hand: the
    smoke caps give epochs x max_steps_per_epoch steps; the toy corpus' sequences are 32 tokens); the teacher
    the six jobs share is trained once (60 steps of 8 sequences) and their top-k store built once."""
    proc = run_cli_preloaded(["-m", "+dry_run=true", *FAST, "procedure.batch_size=8", "corpus=toy", "corpus.max_seq_length=32",
                    "procedure.teacher_top_k=4", "objective=fkl,rkl", "seed=1,2,3", f"results_dir={tmp_path / 'r'}",
                    f"cache_dir={tmp_path / 'c'}"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs, steps, batch, length = 6, 1 * 4, 8, 32  # procedure.epochs=1 x max_steps_per_epoch=4
    assert f"{jobs} decoder job(s): {jobs * steps * batch * length:.3g} student training tokens" in proc.stdout
    assert f"at most 1 decoder teacher(s) trained first ({60 * batch * length:.3g} tokens" in proc.stdout
    assert "1 top-k store(s) to build" in proc.stdout
    assert not (tmp_path / "r").exists()


def test_step_bench_has_decoder_rows(capsys: pytest.CaptureFixture[str]):
    from distill_sweep.bench import step

    tiny = ["--hidden", "32", "--heads", "2", "--teacher-layers", "2", "--student-layers", "1", "--vocab", "64",
            "--seq", "16", "--batch", "2", "--repeats", "2", "--default-malloc"]
    assert step.main(["--objectives", "vanilla_kd", *tiny, "--decoder"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1].strip() for line in out.split("Decoder step speed")[1].splitlines()
            if line.startswith("| ") and not line.startswith("| decoder objective")]
    assert rows == ["fkl", "rkl", "gjsd", "fkl_hid_seq", "fkl@top-32", "fkl@top-32+tail", "fkl@sampled-32"]
    # bytes per stored position at k = 32 (vocabulary 64: 16-bit ids): 32 x (2 + 2), against 32 x (4 + 4)
    table = out.split("Decoder step speed")[1].splitlines()
    stored = {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in table if line.startswith("| ")}
    assert [stored[r] for r in rows] == ["-"] * 4 + ["128"] * 3
    assert "128 bytes per stored token (float16 log-probabilities, uint16 ids), against 256" in out
