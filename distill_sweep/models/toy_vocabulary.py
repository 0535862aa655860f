"""The toy language's words and its offline tokenizers (no download): the word-level toy tokenizer and `toy_pieces`,
the same words cut into pieces. The toy task that writes sentences in these words is data/toy.py's.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

log = logging.getLogger("distill_sweep")

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
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def vocabulary() -> list[str]:
    """The fixed word list (independent of the seed, so every generated split shares one tokenizer)."""
    words = {"the", *NOUNS, *POSITIVE, *NEGATIVE, *COPULAS, *NEGATIONS, *INTENSIFIERS, *JOINERS}
    return list(SPECIAL_TOKENS) + sorted(words)


def vocab_hash() -> str:
    """A short hash of `vocabulary()` (names what is cached over it)."""
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
    # a fresh directory of the umask's mode (records.disk.new_dir's way; mkdtemp's 0700 would keep a shared cache's
    # tokenizer from the lab's other users; this module is below records)
    tmp = target.parent / f".{name}-{os.getpid()}-{secrets.token_hex(6)}"
    tmp.mkdir()
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
