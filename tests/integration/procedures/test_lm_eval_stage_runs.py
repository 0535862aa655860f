"""procedure.lm_eval (the lm-eval stage of decoder jobs): the tests that run a job, a command or processes (its
fast tests: tests/unit/procedures/test_lm_eval_stage.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from helpers import LM_EVAL_INSTRUCT as INSTRUCT
from helpers import compose_cfg

from distill_sweep.data.lm_eval_files import docs_hash, toy_task_rows
from distill_sweep.records.lm_eval_results import read_samples

TASKS = "procedure.lm_eval.tasks=[toy_instruct_rouge,toy_instruct_choice]"


def test_the_stage_scores_the_student_as_lm_eval_scores_the_saved_model(tmp_path: Path, monkeypatch):
    from lm_eval import simple_evaluate

    from distill_sweep.cli.run_job import run_job
    from distill_sweep.procedures import lm_eval_stage

    saved = tmp_path / "student"
    evaluate = lm_eval_stage.evaluate

    def keep_student(model, tokenizer, settings, batch_size, **kw):  # the model the stage scores first: the student
        if not saved.exists():
            model.save_pretrained(saved)
            lm_eval_stage.harness_tokenizer(tokenizer)[0].save_pretrained(saved)
        return evaluate(model, tokenizer, settings, batch_size, **kw)

    monkeypatch.setattr(lm_eval_stage, "evaluate", keep_student)
    cfg = compose_cfg([*INSTRUCT, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c", TASKS,
                       "procedure.lm_eval.limit=12"])
    record = run_job(cfg)
    assert record["status"] == "completed", record.get("error")
    block = record["lm_eval"]
    # lm_eval's own run, from the directory (its `hf` model loader), on the same tasks
    own = simple_evaluate(model="hf", model_args={"pretrained": str(saved), "add_bos_token": True},
                          tasks=["toy_instruct_rouge", "toy_instruct_choice"], limit=12, bootstrap_iters=0, device="cpu",
                          task_manager=lm_eval_stage.task_manager(lm_eval_stage.LMEvalSettings()), log_samples=True)
    for task, metrics in {"toy_instruct_rouge": ("rouge_l", "exact_match"), "toy_instruct_choice": ("acc",)}.items():
        for m in metrics:
            assert math.isclose(block["scores"][task][m], own["results"][task][f"{m},none"], abs_tol=1e-9), (task, m)
    # the multiple-choice task's chance level, what the report flags a teacher or student at: a uniform guess among
    # each document's choices (the generate-until task has none)
    rows = toy_task_rows()[:12]
    assert block["chance"] == {"toy_instruct_choice": {"acc": np.mean([1 / len(r["choices"]) for r in rows])}}
    # the per-example file: one value per document, whose mean is the record's score, keyed by the docs' hash
    out_dir = next((tmp_path / "r").rglob("result.json")).parent
    samples = read_samples(out_dir)
    assert samples is not None
    want = docs_hash(toy_task_rows()[:12])  # the first 12 documents of the shipped file, as the harness reads them
    for task, got in samples.items():
        assert got.docs_hash == want == block["docs"][task]["docs_hash"]
        assert list(got.doc_id) == list(range(12))
        for m, values in got.metrics.items():
            assert math.isclose(float(np.mean(values)), block["scores"][task][m], abs_tol=1e-12)
    # the teacher: scored once on the same documents, its scores those of the stage on the cached teacher itself
    from transformers import AutoModelForCausalLM

    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    teacher = block["teacher"]
    assert teacher["cache"] == "built" and teacher["docs"] == block["docs"]
    cached = AutoModelForCausalLM.from_pretrained(record["causal_lm"]["teacher"]["path"])
    direct = evaluate(cached, build_toy_tokenizer(tmp_path / "tok"), lm_eval_stage.LMEvalSettings(
        tasks=["toy_instruct_rouge", "toy_instruct_choice"], limit=12), 16)
    assert teacher["scores"]["toy_instruct_choice"]["acc"] == direct["results"]["toy_instruct_choice"]["acc,none"]
    assert teacher["scores"]["toy_instruct_rouge"]["rouge_l"] == direct["results"]["toy_instruct_rouge"]["rouge_l,none"]
    again = run_job(compose_cfg([*INSTRUCT, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c", TASKS,
                                 "procedure.lm_eval.limit=12", "seed=2"]))
    assert again["lm_eval"]["teacher"] == {**teacher, "cache": "reused"}
