"""procedure=task_agnostic: the KD-on-MLM loss by hand, masking, packing, accumulation, the corpus cache, local
text files, a kill/resume, and bad inputs refused before any work."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import compose_cfg, plain
from safetensors.torch import load_file

from distill_sweep.config.parse import parse
from distill_sweep.data import corpus as corpus_mod
from distill_sweep.data.corpus import IGNORE, load_corpus, mask_tokens, pack
from distill_sweep.data.corpus_settings import CorpusSettings
from distill_sweep.errors import ConfigError
from distill_sweep.procedures.sequences import accumulated
from distill_sweep.procedures.task_agnostic import mlm_kd_loss

BASE = ["procedure=task_agnostic", "teacher=tiny_mlm", "logger=none", "threads=1", "corpus.num_documents=100",
        "corpus.dev_documents=20", "procedure.epochs=1", "guards.allow_weak_teacher=true"]  # a random teacher


def test_mlm_kd_loss_worked_by_hand() -> None:
    # one sequence of 3 tokens, vocabulary 2; only position 1 is masked (label 1)
    s = torch.tensor([[[1.0, 0.0], [0.0, 0.0], [2.0, 1.0]]])
    t = torch.tensor([[[1.0, 0.0], [math.log(9.0), 0.0], [2.0, 1.0]]])  # the same as s but at position 1
    labels = torch.tensor([[IGNORE, 1, IGNORE]])
    valid = torch.ones(1, 3)
    kd, mlm = mlm_kd_loss(s, t, labels, valid, temperature=2.0, positions="masked")
    # T = 2: teacher softmax([ln 9 / 2, 0]) = softmax([ln 3, 0]) = [3/4, 1/4]; student [1/2, 1/2]
    kl = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    assert float(kd) == pytest.approx(4.0 * kl, rel=1e-6)  # x T^2
    assert float(mlm) == pytest.approx(math.log(2.0), rel=1e-6)  # CE of a uniform student at the masked token
    kd_all, _ = mlm_kd_loss(s, t, labels, valid, temperature=2.0, positions="all")
    assert float(kd_all) == pytest.approx(4.0 * kl / 3, rel=1e-6)  # the other two positions agree: KL 0


def _tiny_mlm(layers: int, seed: int) -> torch.nn.Module:
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    return BertForMaskedLM(cfg)


@pytest.mark.parametrize("positions", ["masked", "all"])
def test_mlm_heads_run_only_where_the_loss_reads_them(positions: str) -> None:
    from distill_sweep.models.loading import mlm_head
    from distill_sweep.procedures.task_agnostic import KDForm, pretrain_loss

    teacher, student = _tiny_mlm(2, 0).eval(), _tiny_mlm(1, 1)
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(5, 50, (3, 8), generator=g)
    mask = torch.ones(3, 8, dtype=torch.long)
    mask[2, 5:] = 0  # a padded row
    labels = torch.full((3, 8), IGNORE)
    labels[0, 1], labels[1, 3], labels[1, 6], labels[2, 2] = 7, 8, 9, 10  # 4 masked tokens
    batch = {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids),
             "labels": labels}
    rows = {"student": [], "teacher": []}
    for who, model in (("student", student), ("teacher", teacher)):
        mlm_head(model).register_forward_hook(lambda _m, inp, _o, who=who: rows[who].append(inp[0].shape[0]))
    kd = KDForm(kd_weight=0.7, mlm_weight=0.3, temperature=2.0, positions=positions)
    loss, parts = pretrain_loss(student, teacher, None, kd)(batch)
    (grad,) = torch.autograd.grad(loss, [student.bert.embeddings.word_embeddings.weight])
    expected_rows = 4 if positions == "masked" else int(mask.sum())
    assert rows == {"student": [expected_rows], "teacher": [expected_rows]}  # not 3 x 8 positions each

    # the same loss as the dense forward (every position's logits), read at the same positions
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        t_logits = teacher(**inputs).logits
    kd_v, mlm = mlm_kd_loss(student(**inputs).logits, t_logits, labels, mask, temperature=2.0, positions=positions)
    dense = 0.7 * kd_v + 0.3 * mlm
    (dense_grad,) = torch.autograd.grad(dense, [student.bert.embeddings.word_embeddings.weight])
    assert loss.item() == pytest.approx(dense.item(), rel=1e-6)
    assert parts["kd"] == pytest.approx(kd_v.item(), rel=1e-6) and parts["mlm"] == pytest.approx(mlm.item(), rel=1e-6)
    assert torch.allclose(grad, dense_grad, atol=1e-6)
    assert mlm_head(student) is student.cls  # the head is back after the forward

    # an objective of terms only (att_mse): no head runs at all
    from distill_sweep.objectives import parse_objective
    from distill_sweep.objectives.core import build_objective

    settings = parse_objective(plain(compose_cfg(["objective=att_mse"]).objective))
    terms = build_objective(settings, student_config=student.config, teacher_config=teacher.config,
                            layer_map=[(1, 2)], train_labels=torch.zeros(4, dtype=torch.long), num_labels=2)
    rows["student"].clear(), rows["teacher"].clear()
    loss, parts = pretrain_loss(student, teacher, terms, None)(batch)
    assert rows == {"student": [], "teacher": []} and set(parts) == {"att_mse"} and torch.isfinite(loss)


def test_accumulated_gradient_is_the_mean_of_micro_batches() -> None:
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(3))
    batch = {"input_ids": torch.randn(4, 3), "labels": torch.randn(4)}

    def loss_fn(b: dict) -> tuple[torch.Tensor, dict]:
        return ((b["input_ids"] @ w - b["labels"]) ** 2).mean(), {"part": 1.0}

    full, _ = loss_fn(batch)
    (expected,) = torch.autograd.grad(full, [w])
    loss, parts = accumulated(loss_fn, [w], micro_batch=2)(batch)
    loss.backward()
    assert float(loss.detach()) == pytest.approx(float(full.detach()), rel=1e-6)  # equal halves: mean of means = mean
    assert torch.allclose(w.grad, expected, atol=1e-6)
    assert parts == {"part": 1.0}


def test_pack_cuts_documents_into_cls_sep_sequences() -> None:
    assert pack(list(range(10)), 6, 100, 101) == [[100, 0, 1, 2, 3, 101], [100, 4, 5, 6, 7, 101], [100, 8, 9, 101]]


def test_masking_rates_on_a_fixed_seed() -> None:
    settings = parse(CorpusSettings, {"name": "t", "source": "toy", "num_documents": 10, "max_predictions": 20}, "c")
    n, width, mask_id = 2000, 32, 4
    ids = np.full((n, width), 7, dtype=np.int64)
    ids[:, 2:] = np.arange(10, 40)[None, :]  # distinct tokens, so a replaced one is seen
    lengths = np.full(n, width)
    lengths[:5] = 3  # one word piece: still one prediction
    masked, labels = mask_tokens(ids, lengths, np.random.default_rng(0), settings, mask_id, np.arange(5, 60))
    chosen = labels != IGNORE
    assert (chosen.sum(1)[5:] == round(30 * 0.15)).all() and (chosen.sum(1)[:5] == 1).all()
    assert not chosen[:, 0].any() and not chosen[np.arange(n), lengths - 1].any()  # [CLS] and [SEP] never
    assert (labels[chosen] == ids[chosen]).all() and (masked[~chosen] == ids[~chosen]).all()
    as_mask = (masked[chosen] == mask_id).mean()
    replaced = ((masked[chosen] != mask_id) & (masked[chosen] != ids[chosen])).mean()
    assert as_mask == pytest.approx(0.8, abs=0.015)
    assert replaced == pytest.approx(0.1 * (1 - 1 / 55), abs=0.015)  # a random draw may hit the same token
    capped = parse(CorpusSettings, {"name": "t", "source": "toy", "num_documents": 10, "max_predictions": 5,
                                    "mlm_probability": 0.5}, "c")
    _, labels = mask_tokens(ids[5:50], lengths[5:50], np.random.default_rng(0), capped, mask_id, np.arange(5, 60))
    assert ((labels != IGNORE).sum(1) == 5).all()


def test_text_files_corpus_packs_local_files(tmp_path: Path, shared_cache: Path) -> None:
    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    folder = tmp_path / "texts"
    (folder / "sub").mkdir(parents=True)
    docs = [f"the food was {adj} and the staff was rude" for adj in ("good", "bad", "cold", "nice", "warm")]
    (folder / "a.txt").write_text(f"{docs[0]}\n\n{docs[1]}\n\n\n{docs[2]}\n")
    (folder / "sub" / "b.txt").write_text(f"{docs[3]}\n\n{docs[4]}")
    (folder / ".hidden").write_text("not read")
    settings = parse(CorpusSettings, {"name": "mine", "source": "text_files", "path": str(folder), "dev_documents": 1,
                                      "max_seq_length": 8, "masking": "dynamic"}, "corpus")
    tokenizer = build_toy_tokenizer(shared_cache)
    packed = load_corpus(settings, tokenizer, tmp_path / "cache")
    assert packed.meta["documents"] == 5 and packed.meta["dev_sequences"] == 2  # 10 pieces -> 6 + 4
    assert len(packed.train) == 8 and packed.train.labels is None  # dynamic: stored unmasked
    first = packed.train.ids[0, :packed.train.lengths[0]].tolist()
    assert tokenizer.decode(first) == "[CLS] the food was bad and the [SEP]"


def _sentences_parquet(path: Path, sentences: list[str], column: str = "text") -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({column: sentences, "other": list(range(len(sentences)))}), path)
    return path


def test_corpus_of_several_sources_with_sentences_grouped_into_documents(tmp_path: Path, shared_cache: Path) -> None:
    from distill_sweep.data.corpus import documents
    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    folder = tmp_path / "wiki"
    folder.mkdir()
    (folder / "a.txt").write_text("the food was good\n\nthe staff was rude\n")
    sentences = [f"the {noun} was {adj}" for noun in ("food", "room", "staff") for adj in ("good", "bad", "cold")]
    _sentences_parquet(tmp_path / "books" / "part-0.parquet", sentences[:5])
    _sentences_parquet(tmp_path / "books" / "deeper" / "part-1.parquet", sentences[5:])
    settings = parse(CorpusSettings, {
        "name": "mine", "source": "text_files", "path": str(folder), "dev_documents": 1, "max_seq_length": 8,
        "also": [{"source": "parquet", "path": str(tmp_path / "books"), "rows_per_document": 4}]}, "corpus")
    # the text files' two documents, then the parquet rows 4 sentences to a document, files in path order
    # (books/deeper/part-1 before books/part-0)
    assert list(documents(settings)) == ["the food was good", "the staff was rude\n", " ".join(sentences[5:9]),
                                         " ".join(sentences[0:4]), sentences[4]]
    packed = load_corpus(settings, build_toy_tokenizer(shared_cache), tmp_path / "cache")
    assert packed.meta["documents"] == 5
    alone = parse(CorpusSettings, {"name": "mine", "source": "text_files", "path": str(folder), "dev_documents": 1,
                                   "max_seq_length": 8}, "corpus")
    assert corpus_mod.cache_key(alone, build_toy_tokenizer(shared_cache)) != packed.key  # the sources are keyed


def test_corpus_built_in_chunks_is_the_corpus_built_at_once(tmp_path: Path, shared_cache: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    settings = parse(CorpusSettings, {"name": "toy", "source": "toy", "num_documents": 60, "dev_documents": 10,
                                      "max_seq_length": 16}, "corpus")
    tokenizer = build_toy_tokenizer(shared_cache)
    whole = load_corpus(settings, tokenizer, tmp_path / "whole")
    monkeypatch.setattr(corpus_mod, "CHUNK_ROWS", 7)  # chunks of 7 rows: raw files appended, masked in pieces
    chunked = load_corpus(settings, tokenizer, tmp_path / "chunked")
    assert len(whole.train) > 7 * 3 and len(whole.dev) > 7
    for name in ("train", "dev"):
        a, b = getattr(whole, name), getattr(chunked, name)
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.labels, b.labels)
        assert np.array_equal(a.lengths, b.lengths)
    assert not list((tmp_path / "chunked" / "corpora").glob(".*"))  # no temporary directory left


@pytest.mark.parametrize("case, message", [
    ("no_parquet", "is not a .parquet file or a folder holding some"),
    ("no_column", "has no column 'text'"),
])
def test_parquet_sources_refused_before_any_work(tmp_path: Path, case: str, message: str) -> None:
    from distill_sweep.job.identity import identify

    books = tmp_path / "books"
    books.mkdir()
    if case == "no_column":
        _sentences_parquet(books / "p.parquet", ["a sentence"], column="sentence")
    cfg = compose_cfg([*BASE, "corpus=text_files", f"corpus.path={books}", "corpus.source=parquet"])
    with pytest.raises(ConfigError, match=message):
        identify(cfg)


def _run(overrides: list[str], tmp_path: Path, shared_cache: Path, results: str = "res") -> dict:
    from distill_sweep.cli.run_job import run_job

    return run_job(compose_cfg([*BASE, "student.num_layers=2", f"results_dir={tmp_path / results}",
                                f"cache_dir={shared_cache}", *overrides]))


def _student(record: dict) -> dict[str, torch.Tensor]:
    return load_file(str(Path(record["student_dir"]) / "model.safetensors"))


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
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


def test_corpus_config_leaves_other_jobs_hashes_alone() -> None:
    from distill_sweep.job.identity import identify

    plain = identify(compose_cfg(["task=toy", "teacher=tiny"]))
    with_corpus = identify(compose_cfg(["task=toy", "teacher=tiny", "+corpus=toy"]))
    assert plain.digest == with_corpus.digest
    agnostic = identify(compose_cfg([*BASE]))
    other_task = identify(compose_cfg([*BASE, "task=rte"]))
    assert agnostic.digest == other_task.digest  # the task is ignored: not hashed
    assert json.loads(json.dumps(agnostic.settings.task.name)) == "pretrain_toy"


# ------------------------------------------------------------------------------ DistilBERT and MiniLMv2
def test_unigram_accuracy_worked_by_hand() -> None:
    from distill_sweep.procedures.task_agnostic import unigram_accuracy

    # masked tokens over two batches: 5, 5 | 7, 5 -> always predicting 5 is right 3 times in 4
    batches = [{"labels": torch.tensor([[IGNORE, 5, 5]])}, {"labels": torch.tensor([[7, IGNORE, 5]])}]
    assert unigram_accuracy({"validation": lambda: iter(batches)}) == pytest.approx(0.75)


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


def test_hid_cos_worked_by_hand() -> None:
    from distill_sweep.models.capture import Features
    from distill_sweep.objectives.cosine import HidCos
    from distill_sweep.objectives.inputs import LossInputs

    # one example, 3 positions, the last one padding; layer 1 of each model (embeddings unused by the term)
    s = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [5.0, 5.0]]])
    t = torch.tensor([[[3.0, 0.0], [1.0, 1.0], [-5.0, 1.0]]])
    batch = {"attention_mask": torch.tensor([[1, 1, 0]]), "input_ids": torch.zeros(1, 3, dtype=torch.long)}
    x = LossInputs(Features(logits=torch.zeros(1, 2), hidden_states=(s, s)),
                   Features(logits=torch.zeros(1, 2), hidden_states=(t, t)), batch, layer_map=((1, 1),))
    # cos = 1 (same direction) and 2 / (2 * sqrt 2) = 1/sqrt 2; the pad position is left out
    expect = ((1 - 1.0) + (1 - 1 / math.sqrt(2))) / 2
    assert float(HidCos(None).forward(x)) == pytest.approx(expect, abs=1e-6)


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
