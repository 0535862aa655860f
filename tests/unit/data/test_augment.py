"""TinyBERT's data augmentation (task.augment=tinybert): eligible words, samples, the stored split, the key."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import save_toy_mlm

from distill_sweep.data.augment import (
    MLMCandidates,
    _EmbeddingNeighbours,
    augment_rows,
    augment_sentence,
    is_candidate,
    words,
)
from distill_sweep.data.augment_settings import AugmentSettings


def test_words_and_the_positions_that_may_change() -> None:
    tokens = words("The staff, surprisingly, wasn't rude: 10 stars!")
    assert tokens == ["the", "staff", ",", "surprisingly", ",", "wasn", "'", "t", "rude", ":", "10", "stars", "!"]
    # stop words (the, wasn, t), punctuation and numbers stay; alphabetic content words may change
    assert [w for w in tokens if is_candidate(w)] == ["staff", "surprisingly", "rude", "stars"]


def test_every_candidate_position_changes_at_p_1_and_duplicates_are_dropped() -> None:
    tokens = ["a", "good", "movie"]
    rng = np.random.default_rng(0)
    # one candidate per position: every sample is the same sentence, so one new sentence out of N = 5
    assert augment_sentence(tokens, {1: ["bad"], 2: ["film"]}, 5, 1.0, rng) == ["a bad film"]
    many = augment_sentence(tokens, {1: ["bad", "great", "fine"], 2: ["film", "show"]}, 20, 0.5, rng)
    assert len(many) == len(set(many)) <= 20 and "a good movie" not in many
    assert all(s.split()[0] == "a" for s in many)  # a position without candidates never changes
    assert len(many) <= 4 * 3 - 1  # (good + 3 candidates) x (movie + 2) sentences, the original excluded


def test_pairs_augment_one_field_at_a_time_and_copy_the_label() -> None:
    rows = {"sentence1": ["nice hotel", "cold soup"], "sentence2": ["great staff", "slow service"], "label": [0, 2]}

    def upper(tokens: list[str], positions: list[int]) -> dict[int, list[str]]:
        return {i: [tokens[i].upper()] for i in positions}  # one candidate: the word in capitals

    out = augment_rows(rows, ["sentence1", "sentence2"], upper, samples=3, p=1.0, seed=0, progress=False)
    assert out["sentence1"][:3] == ["nice hotel", "NICE HOTEL", "nice hotel"]
    assert out["sentence2"][:3] == ["great staff", "great staff", "GREAT STAFF"]
    assert out["label"] == [0, 0, 0, 2, 2, 2] and out["augmented_from"] == [0, 0, 0, 1, 1, 1]


def test_embedding_neighbours_are_the_nearest_by_cosine(tmp_path: Path) -> None:
    file = tmp_path / "glove.txt"
    file.write_text("king 1 0\nqueen 0.9 0.1\nman 0 1\nwoman 0.2 1\ncar -1 0\n")
    near = _EmbeddingNeighbours(AugmentSettings(name="tinybert", embeddings=str(file)))
    # cos(king, queen) = 0.9/0.906 = 0.994, cos(king, woman) = 0.2/1.02 = 0.196, cos(king, man) = 0, car = -1
    assert near.nearest("king", 3) == ["queen", "woman", "man"]
    assert near.nearest("unknown", 3) == []
    limited = _EmbeddingNeighbours(AugmentSettings(name="tinybert", embeddings=str(file), max_embedding_words=2))
    assert limited.nearest("king", 5) == ["queen"]  # only the first words of the file are read


def test_mlm_candidates_are_at_most_k_whole_words(tmp_path: Path) -> None:
    mlm = save_toy_mlm(tmp_path / "mlm", tmp_path / "cache")
    source = MLMCandidates(str(mlm), AugmentSettings(name="tinybert", candidates=5))
    tokens = ["the", "staff", "seemed", "rude"]
    found = source.for_sentence(tokens, [1, 3])
    assert set(found) <= {1, 3} and found
    specials = set(source.tokenizer.all_special_tokens)
    assert all(0 < len(c) <= 5 and not any(w.startswith("##") or w in specials for w in c) for c in found.values())


# ------------------------------------------------------------------- tokenizer families (byte-level BPE, cased)
def _toy_texts(n: int = 64) -> dict[str, list]:
    from distill_sweep.data.toy import generate_toy

    return generate_toy(n, 8, 0)["train"].to_dict()


def _random_mlm(directory: Path, tokenizer, family: str) -> Path:
    """A random tiny masked LM of `tokenizer`'s vocabulary, saved with it (no hub: the vocabulary is trained
    here on the toy text)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, RobertaConfig, RobertaForMaskedLM

    torch.manual_seed(0)
    size = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                intermediate_size=64, pad_token_id=tokenizer.pad_token_id)
    model = (RobertaForMaskedLM(RobertaConfig(**size, max_position_embeddings=130)) if family == "roberta"
             else BertForMaskedLM(BertConfig(**size, max_position_embeddings=128)))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def _byte_level_bpe_mlm(directory: Path, texts: list[str]) -> tuple[Path, dict[str, int]]:
    """RoBERTa's tokenizer class over a byte-level BPE trained on `texts`, and a random MLM of it."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=600, min_frequency=1, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    directory.mkdir(parents=True)
    vocab_file, merges_file = bpe.save_model(str(directory))
    tokenizer = RobertaTokenizerFast(vocab_file, merges_file)  # positional: v4 and v5 name them differently
    return _random_mlm(directory, tokenizer, "roberta"), json.loads(Path(vocab_file).read_text())


def test_byte_level_bpe_rows_hold_only_real_words_of_its_vocabulary(tmp_path: Path) -> None:
    rows = _toy_texts()
    texts = [t for f in ("sentence1", "sentence2") for t in rows[f]]
    mlm, vocab = _byte_level_bpe_mlm(tmp_path / "roberta", texts)
    # The words of the vocabulary: its word-initial entries ('Ġ' = the space byte, which byte-level BPE puts
    # before a word inside a sentence) without the 'Ġ'; the toy text is ASCII, whose bytes spell themselves.
    real = {t[1:] for t in vocab if t.startswith("Ġ") and len(t) > 1}
    source = MLMCandidates(str(mlm), AugmentSettings(name="tinybert", candidates=15))
    some = {k: v[:6] for k, v in rows.items()}
    out = augment_rows(some, ["sentence1", "sentence2"], source.for_sentence, samples=3, p=1.0, seed=0,
                       progress=False)
    changed = 0
    for f in ("sentence1", "sentence2"):
        for text, origin in zip(out[f], out["augmented_from"], strict=True):
            original = some[f][origin].split(" ")
            new = text.split(" ")
            assert len(new) == len(original), (text, some[f][origin])  # one word for one word
            for before, after in zip(original, new, strict=True):
                assert after == before or after in real, (after, text)  # never 'Ġdull', a byte or a piece
                changed += after != before
    assert changed > 50  # the check above saw many replacements
    # a word-initial piece is one word; a continuation piece, a bare byte, the space byte or a special never is
    ids = source.tokenizer.convert_tokens_to_ids
    assert source.whole_word(ids("Ġbland")) == "bland"
    continuation = next(t for t in vocab if t.isalpha() and "Ġ" + t not in vocab)
    assert [source.whole_word(ids(t)) for t in (continuation, "Ã", "Ġ", "<mask>")] == [None] * 4


def _cased_wordpiece_mlm(directory: Path, texts: list[str]) -> Path:
    """BERT's cased tokenizer class over a cased WordPiece trained on `texts`, and a random MLM of it."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    wordpiece = BertWordPieceTokenizer(lowercase=False, strip_accents=False)
    wordpiece.train_from_iterator(texts, vocab_size=400, min_frequency=1, show_progress=False)
    directory.mkdir(parents=True)
    (vocab_file,) = wordpiece.save_model(str(directory))
    return _random_mlm(directory, BertTokenizerFast(vocab_file, do_lower_case=False), "bert")


def test_a_cased_wordpiece_tokenizer_gets_cased_text_and_cased_words(tmp_path: Path) -> None:
    import torch

    rows = _toy_texts()
    for f in ("sentence1", "sentence2"):  # capitals where a cased model would see them: every third word
        rows[f] = [" ".join(w.capitalize() if i % 3 == 0 else w for i, w in enumerate(t.split())) for t in rows[f]]
    mlm = _cased_wordpiece_mlm(tmp_path / "bert", [t for f in ("sentence1", "sentence2") for t in rows[f]])
    source = MLMCandidates(str(mlm), AugmentSettings(name="tinybert", candidates=3))
    vocab = source.tokenizer.get_vocab()
    assert "Soup" in vocab and "soup" in vocab and any(t.startswith("##") for t in vocab)
    # The MLM's top predictions everywhere: 'Soup', then a '##' piece, then 'soup'
    piece = next(t for t in vocab if t.startswith("##"))
    bias = source.model.get_output_embeddings().bias
    bias.data[[vocab["Soup"], vocab[piece], vocab["soup"]]] += torch.tensor([300.0, 200.0, 100.0])
    assert source.for_sentence(["The", "Bed", "was", "ugly"], [1, 3]) == {1: ["Soup", "soup"], 3: ["Soup", "soup"]}
    some = {k: v[:12] for k, v in rows.items()}
    out = augment_rows(some, ["sentence1", "sentence2"], source.for_sentence, samples=4, p=0.5, seed=0,
                       progress=False)
    for f in ("sentence1", "sentence2"):
        for text, origin in zip(out[f], out["augmented_from"], strict=True):
            original = some[f][origin].split(" ")
            for before, after in zip(original, text.split(" "), strict=True):
                # a word that may not change ('The', 'not', ',') keeps its case; one that does is a cased word
                assert after == before if not is_candidate(before) else after in (before, "Soup", "soup"), text
    assert {"The", "Soup"} <= {w for t in out["sentence1"][1:] for w in t.split(" ")}


def test_an_mlm_whose_tokenizer_has_no_mask_token_is_refused(tmp_path: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    from distill_sweep.config.schema import TeacherSettings
    from distill_sweep.data.augment import check
    from distill_sweep.errors import ConfigError

    mlm = save_toy_mlm(tmp_path / "mlm", tmp_path / "cache")
    check(AugmentSettings(name="tinybert", mlm=str(mlm)), TeacherSettings(name="tiny"))  # the toy MLM passes
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(mlm))
    bare = PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend_tokenizer, unk_token="[UNK]",
                                   pad_token="[PAD]")
    bare.save_pretrained(str(mlm))
    with pytest.raises(ConfigError, match="its tokenizer has no mask token"):
        check(AugmentSettings(name="tinybert", mlm=str(mlm)), TeacherSettings(name="tiny"))


# ------------------------------------------------------------------------------------- Tang et al. (2019)
def test_tang_rules_on_a_fixed_sentence() -> None:
    from distill_sweep.data.augment import pos_tagger, tang_sample, words_by_pos

    tokens = words("the staff seemed rude but the coffee was wonderful")
    tags = pos_tagger()(tokens)
    assert tags[:4] == ["DT", "NN", "VBD", "JJ"]  # a real tagger, offline
    vocab = words_by_pos([tokens, ["a", "great", "film"]], [tags, pos_tagger()(["a", "great", "film"])])
    assert vocab["JJ"] == ["rude", "wonderful", "great"] and vocab["NN"] == ["staff", "coffee", "film"]
    rng = np.random.default_rng(0)
    masked = tang_sample(tokens, tags, vocab, AugmentSettings(name="tang", p_mask=1.0, p_pos=0.0, p_ngram=0.0),
                         "[MASK]", rng)
    assert masked == ["[MASK]"] * len(tokens)
    swapped = tang_sample(tokens, tags, vocab, AugmentSettings(name="tang", p_mask=0.0, p_pos=1.0, p_ngram=0.0),
                          "[MASK]", rng)
    # every word replaced by a training-set word of its own part of speech
    assert len(swapped) == len(tokens) and all(w in vocab[t] for w, t in zip(swapped, tags, strict=True))
    for _ in range(20):  # n-gram sampling: one contiguous span of 1..2 words of the sentence is kept
        span = tang_sample(tokens, tags, vocab, AugmentSettings(name="tang", p_mask=0.0, p_pos=0.0, p_ngram=1.0,
                                                                max_ngram=2), "[MASK]", rng)
        assert 1 <= len(span) <= 2 and " ".join(span) in " ".join(tokens)


def test_tang_samples_per_example_without_repeats() -> None:
    from distill_sweep.data.augment import tang_rows

    rows = {"sentence": ["the staff seemed rude", "good"], "label": [0, 1]}
    out = tang_rows(rows, ["sentence"], AugmentSettings(name="tang"), 20, "[MASK]", progress=False)
    first = [s for s, origin in zip(out["sentence"], out["augmented_from"], strict=True) if origin == 0]
    assert first[0] == "the staff seemed rude" and len(first) == len(set(first)) <= 21
    # a one-word example has few distinct variants: "good", "[MASK]" and its adjectives ("rude")
    second = [s for s, origin in zip(out["sentence"], out["augmented_from"], strict=True) if origin == 1]
    assert second[0] == "good" and set(second) <= {"good", "[MASK]", "rude"} and len(second) <= 3
    assert out["label"] == [0] * len(first) + [1] * len(second)


def test_tang_keeps_the_case_a_cased_teacher_reads() -> None:
    from distill_sweep.data.augment import tang_rows

    rows = {"sentence": ["The Staff at Luigi's was RUDE .", "Good food , nice staff ."], "label": [0, 1]}
    out = tang_rows(rows, ["sentence"], AugmentSettings(name="tang"), 20, "[MASK]", progress=False)
    cased = {w for s in rows["sentence"] for w in s.split()} | {"Luigi", "'", "s", "[MASK]"}
    new = [s for s, origin in zip(out["sentence"], out["augmented_from"], strict=True) if s not in rows["sentence"]]
    assert len(new) > 10
    # every word of every sample is a word of the training set as written there (lower-casing made "the", "rude")
    assert {w for s in new for w in s.split()} <= cased
    assert any("RUDE" in s.split() or "The" in s.split() for s in new)
