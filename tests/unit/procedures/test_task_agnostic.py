"""procedure=task_agnostic: the KD-on-MLM loss by hand, masking, packing, accumulation, the corpus cache, local
text files, a kill/resume, and bad inputs refused before any work."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import AGNOSTIC_BASE as BASE
from helpers import compose_cfg, plain

from distill_sweep.config.parse import parse
from distill_sweep.data import corpus as corpus_mod
from distill_sweep.data.corpus import IGNORE, load_corpus, mask_tokens, pack
from distill_sweep.data.corpus_settings import CorpusSettings
from distill_sweep.errors import ConfigError
from distill_sweep.procedures.sequences import accumulated
from distill_sweep.procedures.task_agnostic import mlm_kd_loss


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
