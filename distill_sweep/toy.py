"""A synthetic sentence-pair task the project generates itself (no download), plus its offline tokenizer.

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

import datetime as dt
import hashlib
import json
import logging
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

log = logging.getLogger("distill_sweep")
LABEL_NAMES = ["positive", "mixed", "negative"]
TEXT_FIELDS = ("sentence1", "sentence2")

NOUNS = (
    "food staff room bed view music service price coffee bread pool wifi lobby bath garden menu waiter "
    "soup cake tea shower beach breakfast sheets"
).split()
POSITIVE = "good great nice clean fresh tasty friendly quiet cheap lovely warm perfect".split()
NEGATIVE = "bad awful rude dirty stale bland noisy slow cold ugly poor broken".split()
COPULAS = ("was", "is", "seemed", "looked")
NEGATIONS = ("not", "never")
INTENSIFIERS = ("very", "really", "so", "quite")
JOINERS = ("and", ",", "but", ";")
PART_SIZES = ((1, 1), (1, 3), (3, 1))  # clauses in part 1 / part 2: odd, and <= 32 tokens with specials
NEGATION_PROB = 0.35  # high enough that words alone are a poor guide, low enough to leave some signal
INTENSIFIER_PROB = 0.3  # varies the negation-adjective distance (1 or 2 tokens)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def vocabulary() -> list[str]:
    """The fixed word list (independent of the seed, so every generated split shares one tokenizer)."""
    words = {"the", *NOUNS, *POSITIVE, *NEGATIVE, *COPULAS, *NEGATIONS, *INTENSIFIERS, *JOINERS}
    return list(SPECIAL_TOKENS) + sorted(words)


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


def _vocab_hash() -> str:
    return hashlib.sha256(json.dumps(vocabulary()).encode()).hexdigest()[:10]


def _build_backend() -> Tokenizer:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {w: i for i, w in enumerate(vocabulary())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return tok


# the special tokens every offline tokenizer names (the toy vocabularies all start with them)
SPECIAL_TOKEN_NAMES = {"unk_token": "[UNK]", "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                       "mask_token": "[MASK]"}


def saved_tokenizer(cache_dir: str | os.PathLike, name: str, words: list[str], backend: Callable[[], Tokenizer],
                    **fast: Any) -> PreTrainedTokenizerFast:
    """The offline tokenizer `name` over `words` (built by `backend`), saved once under ``cache_dir`` and always
    loaded from there.

    The directory name carries a hash of the word list, so a changed vocabulary never reuses a stale
    tokenizer. Concurrent jobs may race to build it: each writes a private temp dir and renames it into
    place; the loser simply uses the winner's copy (both are identical).
    """
    from transformers import PreTrainedTokenizerFast

    target = Path(cache_dir) / f"{name}-{hashlib.sha256(json.dumps(words).encode()).hexdigest()[:10]}"
    if (target / "tokenizer.json").exists():
        try:
            return PreTrainedTokenizerFast.from_pretrained(str(target))
        except Exception as err:  # noqa: BLE001 - damaged (a partial copy, an edited file): built again
            # (records.disk.set_aside's naming; this module is below records, so it renames here)
            aside = target.with_name(f"{target.name}.corrupt-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S.%fZ}")
            os.replace(target, aside)
            log.warning("the cached tokenizer %s cannot be loaded (%s): moved it to %s, building it again", target,
                        str(err).splitlines()[0][:160] if str(err) else type(err).__name__, aside)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    PreTrainedTokenizerFast(tokenizer_object=backend(), **SPECIAL_TOKEN_NAMES, **fast).save_pretrained(str(tmp))
    try:
        os.replace(tmp, target)
    except OSError:  # someone else renamed theirs first
        shutil.rmtree(tmp, ignore_errors=True)
    return PreTrainedTokenizerFast.from_pretrained(str(target))


def build_toy_tokenizer(cache_dir: str | os.PathLike) -> PreTrainedTokenizerFast:
    """The toy tokenizer (word level, [CLS] a [SEP] b [SEP]), saved once under ``cache_dir`` (`saved_tokenizer`)."""
    return saved_tokenizer(cache_dir, "toy_tokenizer", vocabulary(), _build_backend,
                           model_input_names=["input_ids", "token_type_ids", "attention_mask"])


# ----------------------------------------------------------------------------- a second toy vocabulary
# The toy words cut into pieces: a word of up to 3 letters stays whole, a longer one is its first 3 letters and the
# rest as a "##" continuation ("good" -> "goo" "##d"). Another vocabulary of another size, other ids and longer
# sequences than `vocabulary()`, for a student whose tokenizer is not its teacher's (procedure=causal_lm,
# student.tokenizer=toy_pieces), with the same special tokens so [CLS]/[SEP] still open and close a sequence.
PIECE_HEAD = 3


def word_pieces(word: str) -> list[str]:
    return [word] if len(word) <= PIECE_HEAD else [word[:PIECE_HEAD], "##" + word[PIECE_HEAD:]]


def pieces_vocabulary() -> list[str]:
    pieces = {p for w in vocabulary()[len(SPECIAL_TOKENS):] for p in word_pieces(w)}
    return list(SPECIAL_TOKENS) + sorted(pieces)


def build_toy_pieces_tokenizer(cache_dir: str | os.PathLike) -> PreTrainedTokenizerFast:
    """The `toy_pieces` tokenizer (WordPiece over `pieces_vocabulary()`), saved once under ``cache_dir`` as the toy
    one is."""

    def backend() -> Tokenizer:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers

        vocab = {w: i for i, w in enumerate(pieces_vocabulary())}
        tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", continuing_subword_prefix="##"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tok.decoder = decoders.WordPiece(prefix="##")
        return tok

    return saved_tokenizer(cache_dir, "toy_pieces_tokenizer", pieces_vocabulary(), backend)
