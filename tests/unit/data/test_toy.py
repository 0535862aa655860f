"""The synthetic toy task: determinism, balance, the labelling rule, and its offline tokenizer."""

from collections import Counter

import numpy as np

from distill_sweep.data.toy import LABEL_NAMES, generate_toy
from distill_sweep.models.toy_vocabulary import NEGATIVE, POSITIVE, build_toy_tokenizer, vocabulary


def rows(ds):
    return list(zip(ds["sentence1"], ds["sentence2"], ds["label"], strict=True))


def test_deterministic_by_seed():
    a, b, c = generate_toy(200, 50, seed=1), generate_toy(200, 50, seed=1), generate_toy(200, 50, seed=2)
    assert rows(a["train"]) == rows(b["train"]) and rows(a["validation"]) == rows(b["validation"])
    assert rows(a["train"]) != rows(c["train"])
    assert len(a["train"]) == 200 and len(a["validation"]) == 50


def test_labels_balanced_and_dev_disjoint():
    d = generate_toy(3000, 500, seed=0)
    counts = Counter(d["train"]["label"])
    assert set(counts) == {0, 1, 2} and len(LABEL_NAMES) == 3
    assert all(abs(n / 3000 - 1 / 3) < 0.03 for n in counts.values())
    train_pairs = {(a, b) for a, b, _ in rows(d["train"])}
    assert not train_pairs & {(a, b) for a, b, _ in rows(d["validation"])}


def polarity(part: str) -> int:
    """The documented rule, re-implemented from the text: per clause, adjective polarity flipped by
    not/never; majority over clauses."""
    total = 0
    for clause in part.replace(",", ";").replace(" but ", " ; ").replace(" and ", " ; ").split(";"):
        words = clause.split()
        value = 1 if words[-1] in POSITIVE else -1
        assert words[-1] in POSITIVE + NEGATIVE
        total += -value if ("not" in words or "never" in words) else value
    return 1 if total > 0 else -1


def test_labels_follow_the_negation_rule():
    for a, b, label in rows(generate_toy(300, 0, seed=5)["train"]):
        pa, pb = polarity(a), polarity(b)
        expected = "mixed" if pa != pb else ("positive" if pa > 0 else "negative")
        assert LABEL_NAMES[label] == expected, (a, b)
    # a worked example: +1 (not bland) -1 (rude) +1 (lovely) -> positive; "never clean" -> negative
    assert polarity("the soup was not very bland and the staff was rude , the view was lovely") == 1
    assert polarity("the bed seemed never clean") == -1


def test_words_alone_are_a_weak_guide():
    # A linear model on per-segment word counts gets far below what the 6-layer model reaches (~0.9);
    # the rest needs binding each negation to its adjective.
    from sklearn.linear_model import LogisticRegression

    d = generate_toy(3000, 1000, seed=3)
    vocab = {w: i for i, w in enumerate(vocabulary())}

    def featurise(ds):
        X = np.zeros((len(ds), 2 * len(vocab)))
        for r, (a, b, _) in enumerate(rows(ds)):
            for w in a.split():
                X[r, vocab[w]] += 1
            for w in b.split():
                X[r, len(vocab) + vocab[w]] += 1
        return X, np.array(ds["label"])

    acc = LogisticRegression(max_iter=500).fit(*featurise(d["train"])).score(*featurise(d["validation"]))
    assert acc < 0.6


def test_tokenizer_round_trip_pairs_and_reload(tmp_path):
    tok = build_toy_tokenizer(tmp_path)
    saved = list(tmp_path.glob("toy_tokenizer-*/tokenizer.json"))
    assert len(saved) == 1
    d = generate_toy(50, 10, seed=0)["train"]
    enc = tok(list(d["sentence1"]), list(d["sentence2"]))
    for p, h, ids, types in zip(
        d["sentence1"], d["sentence2"], enc["input_ids"], enc["token_type_ids"], strict=True
    ):
        assert tok.unk_token_id not in ids
        assert len(ids) <= 32
        sep = ids.index(tok.sep_token_id)
        assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
        assert tok.decode(ids[1:sep]) == p and tok.decode(ids[sep + 1 : -1]) == h
        assert types == [0] * (sep + 1) + [1] * (len(ids) - sep - 1)
    for name in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"):
        assert name in tok.get_vocab()
    assert tok.pad_token == "[PAD]" and tok.mask_token == "[MASK]"

    mtime = saved[0].stat().st_mtime_ns
    again = build_toy_tokenizer(tmp_path)  # loaded from the saved copy, not rebuilt
    assert saved[0].stat().st_mtime_ns == mtime
    assert again(list(d["sentence1"]), list(d["sentence2"]))["input_ids"] == enc["input_ids"]
    assert len(again) == len(vocabulary())
