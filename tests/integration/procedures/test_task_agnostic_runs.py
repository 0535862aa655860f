"""procedure=task_agnostic: the tests that run a job, a command or processes (its fast tests:
tests/unit/procedures/test_task_agnostic.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import AGNOSTIC_BASE as BASE
from helpers import compose_cfg
from safetensors.torch import load_file

from distill_sweep.data import corpus as corpus_mod
from distill_sweep.errors import ConfigError


def _run(overrides: list[str], tmp_path: Path, shared_cache: Path, results: str = "res") -> dict:
    from distill_sweep.cli.run_job import run_job

    return run_job(compose_cfg([*BASE, "student.num_layers=2", f"results_dir={tmp_path / results}",
                                f"cache_dir={shared_cache}", *overrides]))


def _student(record: dict) -> dict[str, torch.Tensor]:
    return load_file(str(Path(record["student_dir"]) / "model.safetensors"))


def test_job_completes_reuses_the_cache_and_resumes_exactly(tmp_path: Path, shared_cache: Path, monkeypatch) -> None:
    from distill_sweep.job import prepare as prepare_mod
    from distill_sweep.training.stages import StageDriver

    first = _run(["objective=att_mse", "checkpoint.keep=true"], tmp_path, shared_cache)
    assert first["status"] == "completed" and first["task"] == "pretrain_toy"
    assert first["best"]["dev"]["mlm_accuracy"] >= 0 and first["task_agnostic"]["accumulation_steps"] == 2
    assert first["student"]["layer_map"] == [[2, 6]]  # map top: the last layer <-> the last layer
    # the saved student is what student=pretrained loads for the GLUE fine-tuning (configs checked)
    prepare_mod.prepare(compose_cfg(["procedure=finetune", "task=toy", "teacher=tiny", "student=pretrained",
                                 f"student.name_or_path={first['student_dir']}"]))

    builds = corpus_mod.BUILDS["count"]
    second = _run(["objective=vanilla_kd"], tmp_path, shared_cache)
    assert second["corpus"]["cache"] == "reused" and corpus_mod.BUILDS["count"] == builds
    assert second["task_agnostic"]["kd"] == {"kd_weight": 0.5, "mlm_weight": 0.5, "temperature": 2.0,
                                             "positions": "masked"}

    class Killed(Exception):
        pass

    on_step = StageDriver._on_step

    def killed_at_step_5(self, stage, n_steps, optimizer, scheduler, progress, loss):  # type: ignore[no-untyped-def]
        on_step(self, stage, n_steps, optimizer, scheduler, progress, loss)
        if progress.steps == 5:
            raise Killed

    monkeypatch.setattr(StageDriver, "_on_step", killed_at_step_5)
    resumed_args = ["objective=att_mse", "checkpoint.every_steps=2"]
    with pytest.raises(Killed):
        _run(resumed_args, tmp_path, shared_cache, results="res2")
    monkeypatch.setattr(StageDriver, "_on_step", on_step)
    resumed = _run(resumed_args, tmp_path, shared_cache, results="res2")
    assert resumed["resumed"] == 1 and resumed["attempts"] == 2
    a, b = _student(first), _student(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed["epochs"] == first["epochs"]


def _model_dir(path: Path, vocab_size: int, arch: str) -> str:
    from transformers import BertConfig

    BertConfig(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
               intermediate_size=128, max_position_embeddings=64, architectures=[arch]).save_pretrained(path)
    return str(path)


def _headless_mlm_dir(path: Path) -> str:
    """A checkpoint whose config names BertForMaskedLM but whose weights are the bare encoder's (no cls.*)."""
    import json

    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=73, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64)
    BertModel(config).save_pretrained(path)
    stated = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**stated, "architectures": ["BertForMaskedLM"]}))
    return str(path)


@pytest.mark.parametrize("case", ["classifier_teacher", "empty_folder", "no_text", "batch", "vocab", "labels",
                                  "hub_offline", "headless_mlm"])
def test_bad_inputs_are_one_line_before_any_work(case: str, tmp_path: Path) -> None:
    from distill_sweep.cli.run_job import run_job
    from distill_sweep.job.prepare import prepare

    folder = tmp_path / "corpus"
    folder.mkdir()
    overrides = {
        "classifier_teacher": [f"teacher.name_or_path={_model_dir(tmp_path / 'cls', 73, 'BertForSequenceClassification')}"],
        "empty_folder": ["corpus=text_files", f"corpus.path={folder}"],
        "no_text": ["corpus=text_files", f"corpus.path={folder}"],
        "batch": ["procedure.global_batch=24", "procedure.micro_batch=16"],
        "vocab": ["student=pretrained", f"student.name_or_path={_model_dir(tmp_path / 'mlm', 50, 'BertForMaskedLM')}"],
        "labels": ["objective=hid_cls_contrast"],
        "hub_offline": ["corpus=wikitext103", "corpus.max_seq_length=32"],
        "headless_mlm": [f"teacher.name_or_path={_headless_mlm_dir(tmp_path / 'headless')}"],
    }[case]
    expected = {"classifier_teacher": "has no MLM head", "empty_folder": "has no files", "no_text": "hold no text",
                "batch": "not a multiple of procedure.micro_batch", "vocab": "vocabulary has 50 tokens",
                "labels": "needs the class labels", "hub_offline": "cannot be reached",
                "headless_mlm": "has no MLM head"}[case]
    if case == "no_text":
        (folder / "blank.txt").write_text("\n  \n\t\n")
    cfg = compose_cfg([*BASE, f"results_dir={tmp_path / 'res'}", f"cache_dir={tmp_path / 'cache'}", *overrides])
    with pytest.raises(ConfigError, match=expected) as err:
        if case in ("hub_offline", "headless_mlm"):  # known only when the corpus is read (the hub may hold a
            run_job(cfg)  # cached copy) or the teacher's weights are loaded
        else:
            prepare(cfg)
    assert "\n" not in str(err.value)
    if case in ("hub_offline", "headless_mlm"):  # refused before any training: no failed record left behind
        assert not list((tmp_path / "res").rglob("result.json"))
    else:
        assert not (tmp_path / "res").exists()  # nothing written


def test_a_random_mlm_teacher_is_refused_unless_allowed_and_the_record_says_so(tmp_path: Path,
                                                                              shared_cache: Path) -> None:
    from distill_sweep.cli.run_job import run_job

    strict = [o for o in BASE if not o.startswith("guards.")]
    with pytest.raises(ConfigError, match=r"not clearly better than the unigram baseline") as err:
        run_job(compose_cfg([*strict, "objective=vanilla_kd", f"results_dir={tmp_path / 'a'}",
                             f"cache_dir={shared_cache}"]))
    assert "\n" not in str(err.value)
    assert not list((tmp_path / "a").rglob("student"))  # refused before the student was built or trained
    record = _run(["objective=vanilla_kd"], tmp_path, shared_cache)
    teacher = record["teacher"]
    assert record["status"] == "completed" and teacher["weak_allowed"] is True
    assert teacher["dev"]["mlm_accuracy"] < teacher["majority_baseline"]["mlm_accuracy"] + 0.02


def test_distilbert_triple_loss_job(tmp_path: Path, shared_cache: Path) -> None:
    from distill_sweep.cli.run_job import run_job

    record = run_job(compose_cfg(["experiment=distilbert", "corpus.num_documents=100", "corpus.dev_documents=20",
                                  "procedure.epochs=1", f"results_dir={tmp_path}", f"cache_dir={shared_cache}"]))
    assert record["status"] == "completed" and record["init"]["layers"] == [1, 3, 5]
    assert record["config"]["task"] is None  # the job reads the corpus, not the task
    kd = record["task_agnostic"]["kd"]
    assert (kd["kd_weight"] * 7, kd["mlm_weight"] * 7, kd["positions"], kd["temperature"]) == \
        (pytest.approx(5.0), pytest.approx(2.0), "all", 2.0)
    assert record["config"]["objective"]["terms"]["hid_cos"]["weight"] * 7 == pytest.approx(1.0)
    assert record["student"]["layer_map"] == [[3, 6]] and {"loss_hid_cos", "loss_kd", "loss_mlm"} <= \
        record["epochs"][0].keys()


def test_minilmv2_relations_distil_a_narrower_student_with_other_heads(tmp_path: Path, shared_cache: Path) -> None:
    # teacher 64 wide, 4 heads; student 32 wide, 2 heads: 4 relation heads split both
    record = _run(["objective=rel_kl", "objective.terms.rel_kl.relation_heads=4", "student=fresh",
                   "student.num_layers=2", "student.hidden_size=32", "student.num_attention_heads=2",
                   "student.intermediate_size=64"], tmp_path, shared_cache)
    assert record["status"] == "completed" and record["epochs"][0]["loss_rel_kl"] > 0
    with pytest.raises(ConfigError, match="relation_heads=48 does not divide"):
        _run(["objective=rel_kl", "student=fresh", "student.hidden_size=32", "student.num_attention_heads=2"],
             tmp_path, shared_cache, results="bad")
