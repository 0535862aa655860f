"""A synthetic sentence-pair task the project generates itself (no download); its words and tokenizer are
models/toy_vocabulary.py's.

Design: a two-part "review" with negation scope. Each part is 1 or 3 clauses
``the NOUN COPULA [not|never] [very|really|so|quite] ADJ`` joined by "and" / "," / "but" / ";".
A clause's polarity is its adjective's polarity (12 positive, 12 negative adjectives), flipped when the
clause is negated; a part's polarity is the majority over its clauses (odd counts, so no ties). Label:

* ``positive``: both parts positive;  ``negative``: both negative;  ``mixed``: they disagree.

Example: "the soup was not very bland and the staff was rude , the view was lovely" (+1 -1 +1 -> +)
with "the bed seemed never clean" (-) -> ``mixed``.

Why it needs depth: the words alone say little (negations are frequent, so a positive adjective is often
a negative clause), and a negation only binds the adjective 1-2 tokens after it in the same clause. A
1-layer BERT classifier reads only [CLS]'s attention average over token+position embeddings (a weighted
bag of words), so it cannot bind "not" to its adjective; 2+ layers can (a previous-token head, then
pooling signed polarities per segment). The label still correlates with the words, which gives the
from-scratch models a learning signal from the first step (with every single word uninformative, small
models stay at chance for thousands of steps), while a linear model on word counts stays well below what a
multi-layer one reaches (tests/unit/data/test_toy.py).
Labels are sampled balanced (rejection sampling), splits are deterministic by seed and disjoint.
"""

from __future__ import annotations

import random

from datasets import Dataset

from distill_sweep.models.toy_vocabulary import (
    COPULAS,
    INTENSIFIERS,
    JOINERS,
    NEGATIONS,
    NEGATIVE,
    NOUNS,
    POSITIVE,
)

LABEL_NAMES = ["positive", "mixed", "negative"]
TEXT_FIELDS = ("sentence1", "sentence2")
PART_SIZES = ((1, 1), (1, 3), (3, 1))  # clauses in part 1 / part 2: odd, and <= 32 tokens with specials
NEGATION_PROB = 0.35  # high enough that words alone are a poor guide, low enough to leave some signal
INTENSIFIER_PROB = 0.3  # varies the negation-adjective distance (1 or 2 tokens)


def _clause(rng: random.Random, noun: str) -> tuple[list[str], int]:
    positive = rng.random() < 0.5
    negated = rng.random() < NEGATION_PROB
    words = ["the", noun, rng.choice(COPULAS)]
    if negated:
        words.append(rng.choice(NEGATIONS))
    if rng.random() < INTENSIFIER_PROB:
        words.append(rng.choice(INTENSIFIERS))
    words.append(rng.choice(POSITIVE if positive else NEGATIVE))
    return words, (1 if positive else -1) * (-1 if negated else 1)


def _part(rng: random.Random, nouns: list[str]) -> tuple[str, int]:
    """Clauses about ``nouns``; returns the text and its polarity (+1 / -1, majority of clauses)."""
    words: list[str] = []
    total = 0
    for i, noun in enumerate(nouns):
        clause, value = _clause(rng, noun)
        if i:
            words.append(rng.choice(JOINERS))
        words += clause
        total += value
    return " ".join(words), 1 if total > 0 else -1


def label_of(polarity1: int, polarity2: int) -> int:
    """Label id from the two parts' polarities (+1/-1)."""
    if polarity1 == polarity2:
        return LABEL_NAMES.index("positive" if polarity1 > 0 else "negative")
    return LABEL_NAMES.index("mixed")


def _example(rng: random.Random) -> tuple[str, str, int]:
    # Draw the label first and resample until the text has it: balanced classes, while the text itself
    # keeps its natural distribution within each class.
    want = rng.randrange(len(LABEL_NAMES))
    while True:
        k1, k2 = rng.choice(PART_SIZES)
        nouns = rng.sample(NOUNS, k1 + k2)  # no noun repeated within an example
        s1, p1 = _part(rng, nouns[:k1])
        s2, p2 = _part(rng, nouns[k1:])
        if label_of(p1, p2) == want:
            return s1, s2, want


def generate_toy(num_train: int, num_dev: int, seed: int) -> dict[str, Dataset]:
    """Deterministic train/validation splits (columns sentence1, sentence2, label), disjoint and
    duplicate-free."""
    rng = random.Random(seed)
    seen: set[tuple[str, str]] = set()
    splits: dict[str, Dataset] = {}
    for name, n in (("train", num_train), ("validation", num_dev)):
        rows: dict[str, list] = {"sentence1": [], "sentence2": [], "label": []}
        while len(rows["label"]) < n:
            a, b, y = _example(rng)
            if (a, b) in seen:
                continue
            seen.add((a, b))
            rows["sentence1"].append(a)
            rows["sentence2"].append(b)
            rows["label"].append(y)
        splits[name] = Dataset.from_dict(rows)
    return splits
