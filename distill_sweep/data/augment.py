"""Offline data augmentation of the training split (`task.augment`), generated once and stored by content.

`task.augment=tinybert` is TinyBERT's augmentation (Jiao et al. 2020, its `data_augmentation.py`):

* each text field is split into words (words and punctuation, their case kept); a candidate position is an
  alphabetic word outside a stop-word list;
* a word that is ONE word piece of the MLM's tokenizer gets the masked LM's top K = 15 predictions, the
  input being ``[CLS] sentence with the word masked [SEP] original sentence [SEP]``; of those, only pieces the
  tokenizer reads as a whole word are kept, as text (`MLMCandidates.whole_word`: WordPiece's pieces without
  ``##``, byte-level BPE's 'Ġ' pieces decoded, SentencePiece's '▁' pieces; never a sub-word continuation, a
  bare byte or a special token);
* a word of several pieces gets its K nearest neighbours by cosine in a word-embedding file (GloVe in the
  paper: `embeddings=<path>`, its first 100k words); without one, the MLM predicts the whole word masked as
  one mask token (our fallback: the original code has no path without GloVe);
* N times: every candidate position is replaced with probability p = 0.4 by one of its candidates drawn
  uniformly; unseen sentences are kept. The original comes first. Sentence pairs augment one field at a time,
  the other kept. Labels are copied from the original: the teacher supplies the soft targets (through the
  teacher-output store, which an augmented split written once makes exact).

The augmented split is keyed by the training split's content, the augmenter's settings and the MLM (its hub
id, or a digest of its local files), built under a file lock and written atomically as one parquet file in
`cache_dir/augmented/<task>/`; every job that asks for the same key reads it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from distill_sweep.config.parse import as_dict
from distill_sweep.config.schema import TaskSettings, TeacherSettings
from distill_sweep.data.augment_settings import AugmentSettings, samples_for
from distill_sweep.data.fingerprints import content_hash
from distill_sweep.errors import ConfigError
from distill_sweep.models.loading import has_mlm_head, model_error_message, model_source, read_model_config
from distill_sweep.records.disk import writing
from distill_sweep.records.locks import waiting_lock

log = logging.getLogger("distill_sweep")
AUGMENT_VERSION = 3  # bump when the generated sentences change (2: case kept, candidates decoded to words; 3: tang too)
# The stop words TinyBERT's augmenter leaves alone (NLTK's English list, which its code copies).
STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself
it its itself they them their theirs themselves what which who whom this that these those am is are was were be
been being have has had having do does did doing a an the and but if or because as until while of at by for with
about against between into through during before after above below to from up down in out on off over under
again further then once here there when where why how all any both each few more most other some such no nor not
only own same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn doesn hadn
hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
""".split())
_WORDS = re.compile(r"[^\W\d_]+|\d+|[^\w\s]", re.UNICODE)


def mlm_source(settings: AugmentSettings, teacher: TeacherSettings) -> str:
    """The masked LM's hub id or directory; ConfigError when there is none (a teacher built from a config)."""
    source = settings.mlm or teacher.name_or_path
    if not source:
        raise ConfigError("task.augment=tinybert needs a masked LM: the teacher has no pre-trained weights "
                          "(teacher.name_or_path is null); set task.augment={name: tinybert, mlm: <hub id or "
                          "directory of a BERT MLM>}")
    return str(source)


def check(settings: AugmentSettings, teacher: TeacherSettings) -> None:
    """Refuse, from files alone, an augmentation that cannot run: no MLM, one without an MLM head, a tokenizer
    without a mask token, or a missing embedding file (the dry run, which reads no file, does not call this)."""
    if settings.name != "tinybert":  # tang needs no model
        return

    if settings.embeddings is not None and not Path(settings.embeddings).expanduser().is_file():
        raise ConfigError(f"task.augment.embeddings={settings.embeddings!r} is not a file (a GloVe-style text file: "
                          "a word and its vector per line)")

    source = mlm_source(settings, teacher)
    config = read_model_config(source, "task.augment.mlm", bool(teacher.trust_remote_code))
    if has_mlm_head(config) is False:
        raise ConfigError(f"task.augment.mlm={source!r} is not a masked LM (its config.json names "
                          f"{config.architectures}): the augmenter needs its MLM head")
    if load_mlm_tokenizer(source).mask_token is None:
        raise ConfigError(f"task.augment.mlm={source!r}: its tokenizer has no mask token, so the augmenter cannot "
                          "ask the MLM for a word")


def load_mlm_tokenizer(source: str) -> Any:
    """The MLM's tokenizer (its files only); ConfigError when they cannot be read."""
    from transformers import AutoTokenizer

    path = model_source(source, "task.augment.mlm")
    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise ConfigError(model_error_message(path, err, "task.augment.mlm")) from None


def words(text: str, lowercase: bool = True) -> list[str]:
    """Words, numbers and punctuation marks, in order (BERT's basic tokenisation, roughly); lower-cased unless
    `lowercase` is false (TinyBERT's augmentation keeps the case, which a cased tokenizer reads)."""
    return _WORDS.findall(text.lower() if lowercase else text)


def is_candidate(word: str) -> bool:
    return word.isalpha() and word.lower() not in STOP_WORDS


# ---------------------------------------------------------------------------------------- candidates
class MLMCandidates:
    """Replacement words from a masked LM (and a word-embedding file for multi-piece words)."""

    def __init__(self, source: str, settings: AugmentSettings, device: Any = None) -> None:
        import torch
        from transformers import AutoModelForMaskedLM

        self.tokenizer = load_mlm_tokenizer(source)
        path = model_source(source, "task.augment.mlm")
        try:
            self.model = AutoModelForMaskedLM.from_pretrained(path).eval()
        except (OSError, ValueError) as err:
            raise ConfigError(model_error_message(path, err, "task.augment.mlm")) from None
        self.device = torch.device(device or "cpu")
        self.model.to(self.device)
        self.k, self.batch_size = settings.candidates, settings.batch_size
        self.neighbours = _EmbeddingNeighbours(settings) if settings.embeddings else None
        self.special = set(self.tokenizer.all_special_ids)
        self._words: dict[int, str | None] = {}  # whole_word's answers by token id

    def pieces(self, word: str) -> list[str]:
        """The tokenizer's pieces of `word` as it stands inside a sentence (after a space: byte-level BPE
        spells a word there with a leading 'Ġ')."""
        return self.tokenizer.tokenize(" " + word)

    def whole_word(self, token_id: int) -> str | None:
        """The text of a vocabulary entry that the tokenizer reads as one whole word, else None.

        The entry's text (its bytes or '▁' decoded, '##' left as is) must come back as this one entry: inside a
        sentence ('Ġdull' -> 'dull') or at a text's start, where byte-level BPE spells the word without its
        'Ġ' (then only when the word inside a sentence is one entry too). So WordPiece's '##' pieces, BPE's
        continuation pieces, bare bytes and special tokens are never words.
        """
        if token_id not in self._words:
            piece = self.tokenizer.convert_ids_to_tokens(token_id)
            text = self.tokenizer.convert_tokens_to_string([piece]).strip()
            inside = self.pieces(text) if text and not any(c.isspace() for c in text) else []
            whole = len(inside) == 1 and (inside == [piece] or self.tokenizer.tokenize(text) == [piece])
            self._words[token_id] = text if whole and token_id not in self.special else None
        return self._words[token_id]

    def for_sentence(self, tokens: list[str], positions: list[int]) -> dict[int, list[str]]:
        """Candidates per position of `tokens` (only positions that have some)."""
        out: dict[int, list[str]] = {}
        to_mask = []
        for i in positions:
            if self.neighbours is not None and len(self.pieces(tokens[i])) > 1:
                found = self.neighbours.nearest(tokens[i], self.k)
                if found:
                    out[i] = found
                continue
            to_mask.append(i)  # one piece, or several without an embedding file: the MLM, word masked whole
        original = " ".join(tokens)
        for start in range(0, len(to_mask), self.batch_size):
            chunk = to_mask[start:start + self.batch_size]
            masked = [" ".join(self.tokenizer.mask_token if j == i else w for j, w in enumerate(tokens)) for i in chunk]
            for i, found in zip(chunk, self._predict(masked, original), strict=True):
                if found:
                    out[i] = found
        return out

    def _predict(self, masked: list[str], original: str) -> list[list[str]]:
        import torch

        enc = self.tokenizer(masked, [original] * len(masked), padding=True, truncation=True, max_length=512,
                             return_tensors="pt").to(self.device)
        with torch.inference_mode():
            logits = self.model(**enc).logits
        out = []
        for row in range(len(masked)):
            where = (enc["input_ids"][row] == self.tokenizer.mask_token_id).nonzero().flatten()
            if not len(where):  # the mask fell to truncation
                out.append([])
                continue
            top = logits[row, where[0]].topk(self.k).indices.tolist()
            found = (self.whole_word(t) for t in top)
            out.append(list(dict.fromkeys(w for w in found if w)))  # 'Ġdull' and 'dull' are one word
        return out


class _EmbeddingNeighbours:
    """Nearest words by cosine among the first `max_embedding_words` of a GloVe-style text file."""

    def __init__(self, settings: AugmentSettings) -> None:
        vocab, vectors = [], []
        with open(Path(settings.embeddings).expanduser(), encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip().split(" ")
                if len(parts) < 2:
                    continue
                vocab.append(parts[0])
                vectors.append(np.asarray(parts[1:], dtype=np.float32))
                if len(vocab) >= settings.max_embedding_words:
                    break
        if not vocab or len({len(v) for v in vectors}) != 1:
            raise ConfigError(f"task.augment.embeddings={settings.embeddings!r}: expected lines of a word and a "
                              "vector of one fixed length")
        matrix = np.stack(vectors)
        self.matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        self.vocab, self.index = vocab, {w: i for i, w in enumerate(vocab)}

    def nearest(self, word: str, k: int) -> list[str]:
        i = self.index.get(word, self.index.get(word.lower()))  # GloVe's common files are lower-cased
        if i is None:
            return []
        order = np.argsort(-(self.matrix @ self.matrix[i]), kind="stable")
        return [self.vocab[j] for j in order[order != i][:k]]  # never the word itself


# -------------------------------------------------------------------------------------------- samples
def augment_sentence(tokens: list[str], candidates: dict[int, list[str]], samples: int, p: float,
                     rng: np.random.Generator) -> list[str]:
    """Up to `samples` new sentences: each candidate position replaced with probability p by a uniform
    choice among its candidates; sentences already produced (or the original) are not repeated."""
    seen = {" ".join(tokens)}
    out = []
    positions = sorted(candidates)
    for _ in range(samples):
        new = list(tokens)
        for i in positions:
            if rng.random() < p:
                new[i] = candidates[i][int(rng.integers(len(candidates[i])))]
        sentence = " ".join(new)
        if sentence not in seen:
            seen.add(sentence)
            out.append(sentence)
    return out


def augment_rows(rows: dict[str, list], fields: list[str], candidates: Callable[[list[str], list[int]],
                 dict[int, list[str]]], samples: int, p: float, seed: int, progress: bool = True
                 ) -> dict[str, list]:
    """The augmented split (columns as `rows`): each example, then its variants, field by field; words keep
    their case (the MLM's tokenizer lower-cases them if it is uncased)."""
    from tqdm.auto import tqdm

    out: dict[str, list] = {k: [] for k in rows}
    out["augmented_from"] = []
    n = len(rows[fields[0]])
    for row in tqdm(range(n), desc="augment", disable=not progress):
        example = {k: rows[k][row] for k in rows}
        _append(out, example, row)
        for f, name in enumerate(fields):
            tokens = words(str(example[name]), lowercase=False)
            found = candidates(tokens, [i for i, w in enumerate(tokens) if is_candidate(w)])
            rng = np.random.default_rng([seed, row, f])
            for sentence in augment_sentence(tokens, found, samples, p, rng):
                _append(out, {**example, name: sentence}, row)
    return out


def _append(out: dict[str, list], example: dict[str, Any], origin: int) -> None:
    for key, value in example.items():
        out[key].append(value)
    out["augmented_from"].append(origin)


# ------------------------------------------------------------------------------------- Tang et al. (2019)
def pos_tagger() -> Callable[[list[str]], list[str]]:
    """Part-of-speech tags of a word list: TextBlob's Pattern tagger, whose lexicon ships inside the package
    (no download; spaCy's and NLTK's models do not come from the package index)."""
    from textblob.en.taggers import PatternTagger

    tagger = PatternTagger()

    def tag(tokens: list[str]) -> list[str]:
        tags = [t for _, t in tagger.tag(" ".join(tokens), tokenize=False)]
        return tags if len(tags) == len(tokens) else ["NN"] * len(tokens)  # (never seen: one tag per word)

    return tag


def words_by_pos(texts: list[list[str]], tags: list[list[str]]) -> dict[str, list[str]]:
    """Each part of speech -> the distinct words the training set has with it (first-seen order)."""
    out: dict[str, dict[str, None]] = {}
    for tokens, sentence_tags in zip(texts, tags, strict=True):
        for word, tag in zip(tokens, sentence_tags, strict=True):
            out.setdefault(tag, {})[word] = None
    return {tag: list(found) for tag, found in out.items()}


def tang_sample(tokens: list[str], tags: list[str], vocab: dict[str, list[str]], settings: AugmentSettings,
                mask_token: str, rng: np.random.Generator) -> list[str]:
    """One sample of Tang et al.'s rules: per word one draw u, u < p_mask masks it, u < p_mask + p_pos puts a
    random word of the same part of speech; then with probability p_ngram only one random n-gram of the
    result is kept (n uniform in 1..max_ngram, at most the sentence)."""
    out = []
    for word, tag in zip(tokens, tags, strict=True):
        u = rng.random()
        if u < settings.p_mask:
            out.append(mask_token)
        elif u < settings.p_mask + settings.p_pos:
            choices = vocab.get(tag) or [word]
            out.append(choices[int(rng.integers(len(choices)))])
        else:
            out.append(word)
    if out and rng.random() < settings.p_ngram:
        n = min(int(rng.integers(1, settings.max_ngram + 1)), len(out))
        start = int(rng.integers(len(out) - n + 1))
        out = out[start:start + n]
    return out


def tang_rows(rows: dict[str, list], fields: list[str], settings: AugmentSettings, samples: int, mask_token: str,
              progress: bool = True) -> dict[str, list]:
    """The augmented split: each example, then up to `samples` new ones (every text field transformed in each
    sample; duplicates and the original dropped); the part-of-speech vocabulary is the training set's."""
    from tqdm.auto import tqdm

    tag = pos_tagger()
    n = len(rows[fields[0]])
    # the case kept, as for tinybert: a cased teacher (RoBERTa's) reads it; an uncased one lower-cases it itself
    tokens = {f: [words(str(t), lowercase=False) for t in rows[f]] for f in fields}
    tags = {f: [tag(t) if t else [] for t in tokens[f]] for f in fields}
    vocab = words_by_pos([t for f in fields for t in tokens[f]], [t for f in fields for t in tags[f]])
    out: dict[str, list] = {k: [] for k in rows}
    out["augmented_from"] = []
    for row in tqdm(range(n), desc="augment", disable=not progress):
        example = {k: rows[k][row] for k in rows}
        _append(out, example, row)
        seen = {tuple(" ".join(tokens[f][row]) for f in fields)}
        rng = np.random.default_rng([settings.seed, row])
        for _ in range(samples):
            new = tuple(" ".join(tang_sample(tokens[f][row], tags[f][row], vocab, settings, mask_token, rng))
                        for f in fields)
            if new not in seen:
                seen.add(new)
                _append(out, {**example, **dict(zip(fields, new, strict=True))}, row)
    return out


# ------------------------------------------------------------------------------------------- the store
def store_key(train: Any, fields: list[str], settings: AugmentSettings, task: str, mlm: str) -> str:
    """`mlm`: the masked LM's identity (tinybert), or what else the samples depend on (tang: the mask token and
    the tagger's version)."""
    spec = {k: v for k, v in as_dict(settings).items() if k != "batch_size"}
    spec["samples"] = samples_for(settings, task)
    key = {"version": AUGMENT_VERSION, "train": content_hash(train, [*fields, "label"]), "fields": fields,
           "settings": spec, "mlm": _model_identity(mlm) if settings.name == "tinybert" else mlm}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _model_identity(source: str) -> str:
    """A local directory by the content of its files; a hub id by its name."""
    path = Path(source).expanduser()
    if not path.is_dir():
        return source
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(file.relative_to(path)).encode())
        with open(file, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def augmented_train(train: Any, task_settings: TaskSettings, teacher: TeacherSettings, settings: AugmentSettings, cache_dir: Path,
                    device: Any = None, mask_token: str = "[MASK]") -> tuple[Any, dict[str, Any]]:
    """The augmented training split (a Dataset) and what the record says about it; built at most once per key
    whatever the number of concurrent jobs. `mask_token`: the teacher tokenizer's (tang masks words with it)."""
    from importlib.metadata import version

    from datasets import Dataset

    fields, task = list(task_settings.text_fields), str(task_settings.name)
    if settings.name == "tinybert":
        mlm = mlm_source(settings, teacher)
    else:
        mlm = json.dumps({"mask_token": mask_token, "textblob": version("textblob")})
    key = store_key(train, fields, settings, task, mlm)
    target = Path(cache_dir) / "augmented" / task / f"{settings.name}-{key}.parquet"
    target.parent.mkdir(parents=True, exist_ok=True)
    built = False
    with waiting_lock(Path(f"{target}.lock"), "another job is generating this augmented split"):
        if not target.exists():
            start = time.perf_counter()
            log.info("augmenting %s's %d training examples (%s, N=%d): once for every job of this key", task,
                     len(train), settings.name, samples_for(settings, task))
            if settings.name == "tinybert":
                source = MLMCandidates(mlm, settings, device)
                rows = augment_rows(train.to_dict(), fields, source.for_sentence, samples_for(settings, task),
                                    settings.p, settings.seed)
            else:
                rows = tang_rows(train.to_dict(), fields, settings, samples_for(settings, task), mask_token)
            partial = target.with_name(f"{target.name}.partial")
            try:
                with writing(target, "no augmented split was stored: the next run builds it again"):
                    Dataset.from_dict(rows).to_parquet(str(partial))
                    os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)  # what a failed write left (after the rename, nothing is there)
            built = True
            log.info("augmented split %s: %d rows (%.1fs)", target, len(rows["augmented_from"]),
                     time.perf_counter() - start)
    out = Dataset.from_parquet(str(target), keep_in_memory=True).remove_columns(["augmented_from"])
    return out, {"name": settings.name, "key": key, "path": str(target), "built": built,
                 "original_rows": len(train), "rows": len(out), "samples": samples_for(settings, task)}
