"""Generation-based dev metrics (data/generation_metrics.py): normalisation, exact match and ROUGE-L F1, each on
examples worked by hand."""

from __future__ import annotations

import pytest

from distill_sweep.data.generation_metrics import (
    EXACT_MATCH,
    ROUGE_L,
    exact_match,
    generation_scores,
    lcs_length,
    normalise,
    rouge_l,
)


def test_normalise_strips_and_collapses_whitespace_but_keeps_case_and_punctuation():
    assert normalise("  the  soup\twas\n good ") == "the soup was good"
    assert normalise("Good.") == "Good."
    assert exact_match(" good ", "good") == 1.0 and exact_match("a  b", "a b") == 1.0
    assert exact_match("Good", "good") == 0.0 and exact_match("good.", "good") == 0.0


@pytest.mark.parametrize("a,b,length", [
    ("the cat sat on the mat", "the cat is on the mat", 5),  # the cat . on the mat
    ("a b c d", "b d e", 2),  # b d
    ("c b a", "a b c", 1),  # order counts: one token in common order
    ("a b a b", "b a b a", 3),  # b a b (or a b a)
    ("", "a b", 0),
])
def test_longest_common_subsequence(a: str, b: str, length: int):
    assert lcs_length(a.split(), b.split()) == length
    assert lcs_length(b.split(), a.split()) == length  # symmetric


@pytest.mark.parametrize("response,reference,f1", [
    # LCS 5 of 6 and 6 tokens: P = R = 5/6
    ("the cat sat on the mat", "the cat is on the mat", 5 / 6),
    # LCS 2: P = 2/4, R = 2/3, F1 = 2 (1/2)(2/3) / (1/2 + 2/3) = 4/7
    ("a b c d", "b d e", 4 / 7),
    # LCS 1: P = R = 1/3
    ("c b a", "a b c", 1 / 3),
    # a prefix: LCS 1, P = 1, R = 1/2, F1 = 2/3
    ("good", "good food", 2 / 3),
    ("  good   food ", "good food", 1.0),
    ("bad", "good", 0.0),
    ("", "good", 0.0),
    ("", "  ", 1.0),  # both empty after normalisation
])
def test_rouge_l_f1_by_hand(response: str, reference: str, f1: float):
    assert rouge_l(response, reference) == pytest.approx(f1, abs=1e-12)


def test_scores_are_means_over_the_examples():
    got = generation_scores(["good", "bad", "a b c d"], ["good", "good", "b d e"])
    assert got[EXACT_MATCH] == pytest.approx(1 / 3)
    assert got[ROUGE_L] == pytest.approx((1.0 + 0.0 + 4 / 7) / 3)
    with pytest.raises(ValueError, match="2 responses for 1 references"):
        generation_scores(["a", "b"], ["a"])
