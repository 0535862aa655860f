"""procedure.lm_eval (the lm-eval stage of decoder jobs): its refusals, the hash when off, the shipped task data, the
stage on a trained student (its scores against lm_eval's own run on the saved model) and the per-example file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import CAUSAL_BASE, CAUSAL_BASE_HASH, compose_cfg
from helpers import LM_EVAL_INSTRUCT as INSTRUCT

from distill_sweep.data.lm_eval_files import TOY_FILE, toy_task_rows
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.procedures import lm_eval_stage
from distill_sweep.records.lm_eval_results import SAMPLES, read_samples
from distill_sweep.records.predictions import PredictionsError


def test_off_keeps_every_hash_and_on_makes_another_job(tmp_path: Path):
    def hashed(*extra: str) -> str:
        return identify(compose_cfg([*CAUSAL_BASE, f"results_dir={tmp_path}", *extra])).digest

    assert hashed() == CAUSAL_BASE_HASH  # the pinned hash of the decoder base job, from before the key
    assert hashed("procedure.lm_eval.tasks=[]") == CAUSAL_BASE_HASH
    assert hashed("procedure.lm_eval.tasks=[toy_instruct_rouge]") != CAUSAL_BASE_HASH


@pytest.mark.parametrize("overrides,message", [
    pytest.param(["procedure.lm_eval.tasks=[no_such_task_anywhere]"],
                 r"procedure.lm_eval.tasks: 'no_such_task_anywhere' is not an lm-eval task",
                 marks=pytest.mark.slow),  # lm-eval's import and task index: over 2 s, `make test-fast` leaves it out
    (["procedure.lm_eval.tasks=[toy_instruct_rouge]", "procedure.lm_eval.include_path=/no/such/dir"],
     r"procedure.lm_eval.include_path=/no/such/dir: not a directory of task YAMLs"),
    (["procedure.lm_eval.limit=4"], r"procedure.lm_eval.tasks is empty, so the lm-eval stage is off"),
    (["procedure.lm_eval.tasks=[toy_instruct_rouge]", "procedure.lm_eval.limit=0"],
     r"procedure.lm_eval.limit=0: must be >= 1"),
])
def test_bad_lm_eval_settings_are_refused_in_one_line_before_any_work(overrides, message, tmp_path: Path):
    cfg = compose_cfg([*INSTRUCT, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c", *overrides])
    with pytest.raises(ConfigError, match=message) as refused:
        prepare(cfg)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_the_stage_is_refused_for_a_procedure_that_is_not_causal_lm(tmp_path: Path):
    cfg = compose_cfg(["logger=none", "threads=1", "procedure=task_specific", "task=toy", "teacher=tiny",
                       f"results_dir={tmp_path}/r", "+procedure.lm_eval.tasks=[toy_instruct_rouge]"])
    with pytest.raises(ConfigError, match=r"procedure.lm_eval: unknown setting") as refused:
        prepare(cfg)
    assert "\n" not in str(refused.value) and not (tmp_path / "r").exists()


def test_the_stage_is_refused_on_several_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Rank 0 alone runs the harness, and an FSDP-sharded student cannot run a forward on one rank: one line."""
    for key, value in {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(key, value)  # (as torchrun sets them)
    with pytest.raises(ConfigError, match=r"procedure.lm_eval.tasks runs in one process, and this job would start 2"):
        identify(compose_cfg([*INSTRUCT, f"results_dir={tmp_path}/r", "procedure.lm_eval.tasks=[toy_instruct_rouge]"]))


@pytest.mark.slow  # indexes the harness's own tasks (seconds)
def test_a_malformed_task_yaml_in_include_path_is_refused_by_name(tmp_path: Path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "mine.yaml").write_text("task: my_task\noutput_type: [unclosed\n")
    cfg = compose_cfg([*INSTRUCT, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c",
                       "procedure.lm_eval.tasks=[my_task]", f"procedure.lm_eval.include_path={tmp_path / 'tasks'}"])
    with pytest.raises(ConfigError, match=r"'my_task' is not an lm-eval task .*include_path=.*tasks names it"):
        prepare(cfg)
    assert not (tmp_path / "r").exists()


def test_the_shipped_task_file_is_the_toy_instructions_it_is_made_from():
    rows = [json.loads(line) for line in TOY_FILE.read_text().splitlines()]
    assert rows == toy_task_rows()
    assert all(r["choices"][r["label"]] == r["response"] for r in rows) and len({r["prompt"] for r in rows}) > 40


def test_the_per_example_file_is_checked_on_read(tmp_path: Path):
    from distill_sweep.records.lm_eval_results import TaskSamples, write_samples

    write_samples(tmp_path, {"t": TaskSamples("abc", np.arange(3), {"acc": np.array([1.0, 0.0, 1.0])})})
    got = read_samples(tmp_path)
    assert got is not None and got["t"].docs_hash == "abc" and list(got["t"].metrics["acc"]) == [1.0, 0.0, 1.0]
    path = tmp_path / SAMPLES
    with np.load(path) as data:  # the same layout, one value changed, the checksum kept
        arrays = {k: data[k] for k in data.files}
    arrays["acc/t"] = np.array([1.0, 1.0, 1.0])
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    with pytest.raises(PredictionsError, match=r"acc/t does not match its checksum"):
        read_samples(tmp_path)
    path.write_bytes(path.read_bytes()[:40])  # cut short
    with pytest.raises(PredictionsError, match=r"unreadable"):
        read_samples(tmp_path)
    assert read_samples(tmp_path / "none") is None


@pytest.mark.parametrize("yaml, message", [
    ("task: my_rolling\noutput_type: loglikelihood_rolling\ndoc_to_text: ''\ndoc_to_target: '{{prompt}}'\n",
     r"'my_rolling' cannot be scored by the stage: its output type loglikelihood_rolling gives each document a "
     r"\(log-likelihood, length\) pair"),
    ("task: my_f1\noutput_type: multiple_choice\ndoc_to_text: '{{prompt}}'\ndoc_to_choice: '{{choices}}'\n"
     "doc_to_target: '{{label}}'\nmetric_list: [{metric: acc}, {metric: f1}]\n",
     r"'my_f1' cannot be scored by the stage: its metric 'f1' is aggregated over the corpus \(f1\)"),
])
def test_a_task_the_stage_cannot_score_is_refused_before_any_training(yaml: str, message: str, tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture):
    """Its per-document values are pairs, not numbers: the stage used to fail on them after training (a TypeError
    traceback, a failed record, the training lost on every run). One line at the job's check, and lm_eval's own
    warnings kept out of the log."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "mine.yaml").write_text(
        f"dataset_path: json\ndataset_kwargs: {{data_files: {{test: {TOY_FILE}}}}}\ntest_split: test\n{yaml}")
    name = yaml.split()[1]
    cfg = compose_cfg([*INSTRUCT, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c",
                       f"procedure.lm_eval.tasks=[toy_instruct_rouge,{name}]",
                       f"procedure.lm_eval.include_path={tmp_path / 'tasks'}"])
    with pytest.raises(ConfigError, match=message) as refused:
        prepare(cfg)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()
    assert not [r for r in caplog.records if r.name.startswith("lm_eval")]


def test_the_harness_reads_a_user_jsonl_as_the_student_was_trained(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    """A user's task over a JSONL file (the documented MiniLLM-style route: include_path, dataset_path json): the
    harness's multiple-choice acc of a toy-vocabulary model equals the choice worked here from the model's logits
    after [BOS] prompt, the layout of the training sequences (data/decoder.py), so the tokenizer given to the
    harness opens each text as training did."""
    import torch
    from tiny_models import tiny_llama

    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
    from distill_sweep.procedures.causal_lm_settings import LMEvalSettings
    from distill_sweep.procedures.lm_eval_stage import evaluate

    tokenizer = build_toy_tokenizer(tmp_path / "tok")
    model = tiny_llama(layers=2)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    torch.manual_seed(3)
    with torch.no_grad():  # a model whose choices differ from document to document
        model.lm_head.weight.normal_(0, 2.0)
    rows = toy_task_rows(rows=20, seed=5)
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "tasks" / "mine.yaml").write_text(
        "task: my_choice\ndataset_path: json\n"
        f"dataset_kwargs: {{data_files: {{test: {tmp_path / 'tasks' / 'pairs.jsonl'}}}}}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{prompt}}'\ndoc_to_choice: '{{choices}}'\n"
        "doc_to_target: '{{label}}'\nmetric_list: [{metric: acc}]\n")
    torch.manual_seed(11)
    np.random.seed(11)
    want = (torch.rand(3), np.random.rand(3))
    torch.manual_seed(11)
    np.random.seed(11)
    caplog.set_level("INFO")
    out = evaluate(model, tokenizer, LMEvalSettings(tasks=["my_choice"], include_path=str(tmp_path / "tasks")), 8)
    # lm_eval's warnings to its command-line users ("Please do not launch via accelerate ...") stay out of the log
    assert not [r for r in caplog.records if r.name.startswith("lm_eval")]
    # the harness seeds the global generators; the stage puts them back (a pack member beside it draws on)
    assert torch.equal(torch.rand(3), want[0]) and np.array_equal(np.random.rand(3), want[1])
    labels = [tokenizer.convert_tokens_to_ids(w) for w in rows[0]["choices"]]
    right = []
    for r in rows:  # [BOS]=[CLS], the prompt's words; the choice: the label word most likely next
        ids = [tokenizer.cls_token_id, *tokenizer(r["prompt"], add_special_tokens=False).input_ids]
        with torch.no_grad():
            last = model(input_ids=torch.tensor([ids])).logits[0, -1]
        right.append(int(torch.argmax(last[labels])) == r["label"])
    assert 0 < sum(right) < len(right)  # not a constant answer: the check can tell layouts apart
    assert math.isclose(out["results"]["my_choice"]["acc,none"], sum(right) / len(right), abs_tol=1e-12)


def test_a_multiple_choice_tasks_chance_is_the_mean_of_one_over_its_choices():
    """Documents of 2, 4 and 4 choices (one loglikelihood request each): a uniform guess scores (1/2 + 1/4 + 1/4) / 3
    = 1/3 on acc and acc_norm; a score that is no count of right picks gets none."""
    samples = [{"doc_id": i, "arguments": [("q", f" c{j}") for j in range(k)], "filter": "none"}
               for i, k in enumerate((2, 4, 4))]
    got = lm_eval_stage.chance_of(samples, {"acc": 0.5, "acc_norm": 0.5, "brier_score": 0.3})
    assert got == pytest.approx({"acc": 1 / 3, "acc_norm": 1 / 3})
    assert lm_eval_stage.chance_of([], {"acc": 0.5}) == {}
