"""student=bilstm (Tang et al. 2019): the logit-MSE loss worked by hand, the word vocabulary on fixed sentences,
batches that carry both tokenizers' ids for the same rows, the siamese pair features, a toy job end to end
(its checkpointed student reloaded gives the recorded dev score), and the one-line refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from helpers import compose_cfg, plain, task_settings

from distill_sweep.data.batching import STUDENT_IDS, make_loader
from distill_sweep.data.glue import tokenize_splits
from distill_sweep.data.student_words import PAD_ID, UNK_ID, WordVocab, load_or_build, read_vectors
from distill_sweep.models.inits import StudentInit
from distill_sweep.objectives import parse_objective
from distill_sweep.objectives.prediction import prediction_loss
from distill_sweep.students import BuildInputs, student_type
from distill_sweep.students.bilstm import BiLSTMClassifier, build, describe
from distill_sweep.students.bilstm_settings import BiLSTMSettings
from distill_sweep.training.loop import model_inputs

pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------------------------------- loss
def test_logit_mse_loss_worked_by_hand() -> None:
    z_s = [[1.0, 0.0, -1.0], [0.5, 2.0, 0.0]]
    z_t = [[2.0, 1.0, -3.0], [0.5, 0.0, 1.0]]
    labels = [0, 2]
    alpha = 0.3
    # CE by hand: -log softmax(z_s)[y], averaged over the batch
    ce = sum(-(z[y] - math.log(sum(math.exp(v) for v in z))) for z, y in zip(z_s, labels)) / 2
    # ||z_t - z_s||^2 summed over classes, averaged over the batch: (1 + 1 + 4 + 0 + 4 + 1) / 2 = 5.5
    mse = sum(sum((a - b) ** 2 for a, b in zip(s, t)) for s, t in zip(z_s, z_t)) / 2
    assert mse == 5.5
    want = (1 - alpha) * ce + alpha * mse
    for temperature in (1.0, 7.0):  # the logit form has no temperature
        got = prediction_loss(torch.tensor(z_s), torch.tensor(z_t), torch.tensor(labels), alpha=alpha,
                              temperature=temperature, regression=False, kd_loss="mse")
        assert float(got) == pytest.approx(want, rel=1e-6)
    kl = prediction_loss(torch.tensor(z_s), torch.tensor(z_t), torch.tensor(labels), alpha=alpha, temperature=1.0,
                         regression=False)
    assert float(kl) != pytest.approx(want, rel=1e-3)  # the default is still the KL term


def test_logit_mse_objective_and_unchanged_hashes() -> None:
    mse = parse_objective(plain(compose_cfg(["objective=logit_mse"]).objective))
    assert mse.kd_loss == "mse" and mse.stages == ["prediction"] and not mse.terms
    assert mse.to_dict()["kd_loss"] == "mse"
    vanilla = parse_objective(plain(compose_cfg(["objective=vanilla_kd"]).objective))
    assert vanilla.kd_loss == "kl" and "kd_loss" not in vanilla.to_dict()  # jobs hashed before the key keep their hash


# ------------------------------------------------------------------------------------------- vocabulary
def test_word_vocabulary_on_fixed_sentences() -> None:
    vocab = WordVocab.build(["The cat sat .", "the dog sat"], fields=["sentence"])
    # by frequency (sat, the: 2), ties alphabetical; specials first
    assert vocab.words == ["[PAD]", "[UNK]", "sat", "the", ".", "cat", "dog"]
    assert (PAD_ID, UNK_ID) == (0, 1)
    assert vocab.encode("The bird sat!") == [3, UNK_ID, 2, UNK_ID]  # lowercased; "bird" and "!" unknown
    assert vocab.encode("the the cat", max_length=2) == [3, 3]
    assert vocab.encode("") == [UNK_ID]  # never an empty row
    assert vocab.encode("the [MASK] sat") == [3, UNK_ID, 2]  # an augmented row's mask: one unknown word, not three
    assert WordVocab.build(["The cat sat .", "the dog sat"], fields=["s"], min_count=2).words == \
        ["[PAD]", "[UNK]", "sat", "the"]
    assert WordVocab.build(["The cat sat .", "the dog sat"], fields=["s"], max_size=3).words == ["[PAD]", "[UNK]", "sat"]
    assert vocab.digest != WordVocab.build(["a cat"], fields=["sentence"]).digest


def test_a_vocabulary_that_cannot_be_written_is_one_line_and_built_by_the_next_run(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    import errno
    import os

    from distill_sweep.data import student_words
    from distill_sweep.errors import DiskWriteError

    train = Dataset.from_dict({"sentence": ["good food .", "bad food"], "label": [0, 1]})
    dump = json.dump

    def half_then_no_space(data, f, **kwargs) -> None:
        f.write('{"words": ["[PAD]"')
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(student_words.json, "dump", half_then_no_space)
    with pytest.raises(DiskWriteError) as err:
        load_or_build(train, ["sentence"], tmp_path, "t")
    assert "\n" not in str(err.value) and str(err.value).endswith(
        ".json: No space left on device [ENOSPC]; no vocabulary was stored: the next run builds it again")
    assert sorted(p.name for p in (tmp_path / "vocab").iterdir() if not p.name.endswith(".lock")) == []
    monkeypatch.setattr(student_words.json, "dump", dump)
    vocab, path = load_or_build(train, ["sentence"], tmp_path, "t")
    assert path.is_file() and vocab.words == ["[PAD]", "[UNK]", "food", ".", "bad", "good"]


def test_vocabulary_is_shared_through_the_cache_and_reads_vectors(tmp_path: Path) -> None:
    train = Dataset.from_dict({"sentence": ["good food .", "bad food"], "label": [0, 1]})
    first, path = load_or_build(train, ["sentence"], tmp_path, "t")
    assert first.words == ["[PAD]", "[UNK]", "food", ".", "bad", "good"]
    data = json.loads(path.read_text())
    data["words"].append("marker")  # the second job reads the file, it does not rebuild
    path.write_text(json.dumps(data))
    second, again = load_or_build(train, ["sentence"], tmp_path, "t")
    assert again == path and second.words == [*first.words, "marker"]
    other, other_path = load_or_build(train, ["sentence"], tmp_path, "t", min_count=2)
    assert other_path != path and other.words == ["[PAD]", "[UNK]", "food"]
    vectors = tmp_path / "vec.txt"
    vectors.write_text("3 2\nFood 1 2\nfood 9 9\nzebra 3 4\nbad 5 6\n")  # word2vec header; first spelling wins
    matrix, found = read_vectors(vectors, first, 2)
    assert found == 2
    assert matrix[first.ids["food"]].tolist() == [1.0, 2.0] and matrix[first.ids["bad"]].tolist() == [5.0, 6.0]
    assert matrix[first.ids["good"]].tolist() == [0.0, 0.0]


def test_batches_carry_both_tokenizations_aligned_with_idx(shared_cache: Path) -> None:
    from distill_sweep.models.toy_vocabulary import build_toy_tokenizer

    tokenizer = build_toy_tokenizer(shared_cache)
    s1 = ["the food was good", "the staff was not very rude , the tea was cold", "the bed was clean",
          "the soup was bland but the view was lovely", "the pool was dirty"]
    s2 = ["the menu was nice", "the cake was stale", "the wifi was slow and the bath was ugly", "the tea was warm",
          "the zebra was purple"]
    raw = {"train": Dataset.from_dict({"sentence1": s1, "sentence2": s2, "label": [0, 1, 2, 1, 2]})}
    task = task_settings("toy", max_seq_length=32)  # toy's two text fields: sentence1, sentence2
    vocab = WordVocab.build(s1[:4] + s2[:4], fields=task.text_fields)  # row 4's "dirty", "zebra": unknown
    (tok,) = tokenize_splits(raw, tokenizer, task, shared_cache / "bilstm-tok", words=vocab).values()
    assert {f"{STUDENT_IDS}0", f"{STUDENT_IDS}1", "input_ids", "idx"} <= set(tok.column_names)
    batch = next(iter(make_loader(tok, 5, shuffle=True, seed=3, pad_token_id=int(tokenizer.pad_token_id),
                                  by_length=True)))
    assert batch["idx"].tolist() != list(range(5))  # shuffled: alignment is by idx, not by position
    for row, i in enumerate(batch["idx"].tolist()):
        for field, text in ((0, s1[i]), (1, s2[i])):
            ids = batch[f"{STUDENT_IDS}{field}"][row]
            want = vocab.encode(text)
            assert ids[: len(want)].tolist() == want and not ids[len(want):].any()  # right-padded with 0
        pieces = tokenizer(s1[i], s2[i])["input_ids"]
        assert batch["input_ids"][row, : len(pieces)].tolist() == pieces
    row4 = batch["idx"].tolist().index(4)
    assert UNK_ID in batch[f"{STUDENT_IDS}0"][row4].tolist() and UNK_ID in batch[f"{STUDENT_IDS}1"][row4].tolist()
    # each model reads its own ids: the BiLSTM its words, a BERT (no input_keys) the word pieces
    model = BiLSTMClassifier(describe(BiLSTMSettings(), None), len(vocab), 3, 2)  # type: ignore[arg-type]
    assert set(model_inputs(batch, model)) == {f"{STUDENT_IDS}0", f"{STUDENT_IDS}1"}
    assert set(model_inputs(batch)) == {"input_ids", "attention_mask"} | ({"token_type_ids"} & set(batch))
    assert model(**model_inputs(batch, model)).logits.shape == (5, 3)


# ------------------------------------------------------------------------------------------------ model
def _model(fields: int, seed: int = 0, **settings: int) -> BiLSTMClassifier:
    torch.manual_seed(seed)
    s = BiLSTMSettings(embedding_dim=8, hidden_size=5, mlp_hidden=7, dropout=0.0, **settings)
    return BiLSTMClassifier(describe(s, None), 20, 3, fields).eval()  # type: ignore[arg-type]


def test_pair_features_and_padding_invariance() -> None:
    h1, h2 = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 1.0]])
    assert BiLSTMClassifier.pair_features(h1, h2).tolist() == [[1.0, -2.0, 3.0, 1.0, 3.0, -2.0, 2.0, 3.0]]
    model = _model(2)
    a = torch.tensor([[4, 5, 6, 0, 0], [7, 8, 9, 10, 11]])  # row 0 padded
    b = torch.tensor([[4, 5, 6, 0, 0], [3, 2, 0, 0, 0]])
    with torch.no_grad():
        h_a, h_b = model.encode(a), model.encode(b)
        assert h_a.shape == (2, 10)  # forward and backward states, hidden 5 each
        alone = model.encode(torch.tensor([[4, 5, 6]]))
        torch.testing.assert_close(h_a[0], alone[0])  # padding never enters the recurrence
        torch.testing.assert_close(h_b[0], alone[0])
        feats = BiLSTMClassifier.pair_features(h_a, h_b)
        assert feats.shape == (2, 40)
        # the same sentence twice (in batches of different widths): |h1 - h2| is zero to float rounding
        torch.testing.assert_close(feats[0, 30:], torch.zeros(10))
        assert feats[1, 30:].abs().sum() > 1e-3
        torch.testing.assert_close(feats[0, 20:30], alone[0] * alone[0])
        # the classifier reads the pair features: swapping the sentences changes [h1, h2] but not the rest
        torch.testing.assert_close(model.pair_features(h_b, h_a)[:, 20:], feats[:, 20:])
        assert model(a, b).logits.shape == (2, 3)
        single = _model(1)
        assert single.mlp[0].in_features == 10 and single(a).logits.shape == (2, 3)
    with pytest.raises(ValueError, match="student_ids_1"):
        model(a)


def test_state_dict_round_trip_gives_identical_outputs(tmp_path: Path) -> None:
    model = _model(2, seed=1)
    torch.save(model.state_dict(), tmp_path / "s.pt")
    other = _model(2, seed=2)
    a, b = torch.tensor([[4, 5, 6, 0], [7, 8, 9, 10]]), torch.tensor([[1, 2, 0, 0], [3, 0, 0, 0]])
    with torch.no_grad():
        assert not torch.equal(other(a, b).logits, model(a, b).logits)
        other.load_state_dict(torch.load(tmp_path / "s.pt", weights_only=True))
        assert torch.equal(other(a, b).logits, model(a, b).logits)


def test_build_reads_the_vocabulary_and_optional_vectors(tmp_path: Path) -> None:
    vocab = WordVocab.build(["good food", "bad food"], fields=["sentence"])
    vectors = tmp_path / "v.txt"
    vectors.write_text("good 1 2 3\nunseen 4 5 6\n")
    settings = BiLSTMSettings(embedding_dim=3, hidden_size=4, mlp_hidden=4, embeddings=str(vectors))
    inputs = BuildInputs(arch=describe(settings, None), teacher=None, init=StudentInit("bilstm", "bilstm", [], []),  # type: ignore[arg-type]
                         num_labels=2, label_names=["a", "b"], tokenizer=vocab)
    model = build(settings, inputs)
    assert model.embed.weight.shape == (len(vocab), 3) and model.input_keys == (f"{STUDENT_IDS}0",)
    assert model.embed.weight[vocab.ids["good"]].tolist() == [1.0, 2.0, 3.0]
    assert not model.embed.weight[PAD_ID].any()
    kind = student_type("bilstm")
    assert kind.tokenizer is not None and not kind.uses_init and not kind.has_layers


def test_the_architecture_offers_the_objectives_no_layer_features() -> None:
    from distill_sweep.errors import ConfigError
    from distill_sweep.objectives import check_compatible
    from distill_sweep.students import model_info

    info = model_info(describe(BiLSTMSettings(), None))  # type: ignore[arg-type]
    assert (info.hidden_states, info.qkv, info.num_layers) == (False, False, 1)
    teacher = model_info(compose_cfg(["teacher=tiny"]).teacher.config)
    for name, needs in (("hid_cls", "hidden states"), ("att_kl", "query/key/value")):
        objective = parse_objective(plain(compose_cfg([f"objective={name}"]).objective))
        with pytest.raises(ConfigError, match=needs):
            check_compatible(objective, info, teacher, [(1, 6)])
    check_compatible(parse_objective(plain(compose_cfg(["objective=logit_mse"]).objective)), info, teacher, [(1, 6)])
