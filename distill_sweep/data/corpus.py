"""Pre-training corpora (`corpus=`): documents -> tokens -> fixed-length sequences -> MLM masks, cached.

Sources: `toy` (documents of toy-task sentences generated from a fixed seed), `text_files` (a local folder of
plain-text files, documents separated by blank lines) and `hub` (a `datasets` hub id, streamed). Local files
and hub ids go through the same `datasets.load_dataset(..., streaming=True)` call and the same code after it.

Packing (the reference's single-document segments, without its 10% shorter segments): each document's word
pieces are cut into pieces of `max_seq_length - 2`, each wrapped as [CLS] ... [SEP] and right-padded. The
first `dev_documents` documents are held out (the dev MLM metrics), so no dev text is trained on.

Masking (BERT's rule): per sequence, min(max_predictions, max(1, round(p * n))) of its n word pieces are
chosen uniformly; of those `mask_ratio` become [MASK], `random_ratio` a random non-special token, the rest
stay; labels hold the original ids there and -100 elsewhere. `static` (default) masks once when the cache
is built, as the paper's reference code did: the inputs are deterministic, so a resumed or repeated job sees
exactly the same batches and every student of a sweep is distilled on the same masked text. `dynamic`
(DistilBERT) masks each batch anew, seeded by (seed, epoch, step) so resumes stay exact. The dev slice is
always masked statically (comparable dev metrics). Teacher and student always read the same masked batch.

Cache: `<cache_dir>/corpora/<name>-<key>/` with `.npy` arrays read memory-mapped; the key hashes the corpus
identity (toy generator settings, the files' bytes, or the hub id/config/split/revision), the tokenizer, and
the packing and masking settings. Built into a temporary directory and renamed into place, so concurrent
jobs never read half a cache; `BUILDS` counts the builds of this process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from distill_sweep.data.corpus_settings import (
    CorpusSettings,
    SourceSettings,
    parquet_files,
    sources,
    text_files,
)
from distill_sweep.data.fingerprints import tokenizer_hash
from distill_sweep.data.toy import _part
from distill_sweep.errors import ConfigError
from distill_sweep.models.hub import go_offline_if_hub_unreachable, honour_offline_env
from distill_sweep.models.toy_vocabulary import NOUNS, vocab_hash
from distill_sweep.records.disk import new_dir, reserve, writing

log = logging.getLogger("distill_sweep")

CACHE_VERSION = "1"
IGNORE = -100  # label of a position that is not predicted
BUILDS = {"count": 0}  # caches built by this process (tests check that a re-run builds none)
# what a build that cannot write leaves (_build): its temporary directory is removed, other corpora are untouched
BUILD_KEPT = "the corpus cache was not built and nothing of it is left; the next job that reads it builds it"


# ------------------------------------------------------------------------------------------ documents
def toy_documents(num_documents: int, seed: int) -> Iterator[str]:
    """Documents of 4-8 toy-task sentences (one review part each), deterministic in `seed`."""
    rng = random.Random(seed)
    for _ in range(num_documents):
        sentences = [_part(rng, rng.sample(NOUNS, rng.choice((1, 3))))[0] for _ in range(rng.randint(4, 8))]
        yield " ".join(sentences)


def documents(settings: CorpusSettings) -> Iterator[str]:
    """The corpus' documents in a fixed order (empty ones skipped), at most `max_documents`."""
    if settings.source == "toy":
        assert settings.num_documents is not None
        texts: Iterator[str] = toy_documents(settings.num_documents, settings.seed)
    else:
        texts = (doc for src in sources(settings) for doc in _grouped(_streamed(src), src.rows_per_document))
    count = 0
    for text in texts:
        if settings.max_documents is not None and count >= settings.max_documents:
            return
        if text and text.strip():
            count += 1
            yield text


def _grouped(rows: Iterator[str], n: int) -> Iterator[str]:
    """Every `n` consecutive non-empty rows as one document (the last one may hold fewer)."""
    if n == 1:
        yield from rows
        return
    group: list[str] = []
    for row in rows:
        if row and row.strip():
            group.append(row.strip())
        if len(group) == n:
            yield " ".join(group)
            group = []
    if group:
        yield " ".join(group)


def _streamed(settings: CorpusSettings | SourceSettings) -> Iterator[str]:
    """Local files and hub datasets alike: `datasets` streams the rows, `text_field` holds the text."""
    import datasets

    if settings.source == "text_files":
        files = [str(p) for p in text_files(str(settings.path))]
        args: dict[str, Any] = {"path": "text", "data_files": {"train": files}, "sample_by": "paragraph",
                                "split": "train"}
    elif settings.source == "parquet":
        files = [str(p) for p in parquet_files(str(settings.path), settings.text_field)]
        args = {"path": "parquet", "data_files": {"train": files}, "split": "train"}
    else:
        reason = go_offline_if_hub_unreachable()
        if reason is not None or os.environ.get("HF_DATASETS_OFFLINE") == "1":
            raise ConfigError(f"corpus {settings.hub_id} is streamed from the hub, which cannot be reached "
                              f"({reason or 'offline mode'}); use corpus=text_files corpus.path=<folder>")
        args = {"path": str(settings.hub_id), "name": settings.hub_config, "split": settings.split,
                "revision": settings.revision}
    with honour_offline_env():
        stream = datasets.load_dataset(**args, streaming=True)
        for row in stream:
            yield str(row[settings.text_field])


def identity(settings: CorpusSettings) -> dict[str, Any]:
    """What names the corpus' text in the cache key."""
    if settings.source == "toy":
        return {"toy": vocab_hash(), "num_documents": settings.num_documents, "seed": settings.seed}
    out = _source_identity(settings)
    if settings.also:  # (absent otherwise: the caches of corpora from before the key keep their keys)
        out["also"] = [_source_identity(src) for src in settings.also]
    return out


def _source_identity(src: CorpusSettings | SourceSettings) -> dict[str, Any]:
    if src.source in ("text_files", "parquet"):
        digest = hashlib.sha256()
        root = Path(str(src.path)).expanduser()
        files = text_files(root) if src.source == "text_files" else parquet_files(root, src.text_field)
        for path in files:
            digest.update(str(path.relative_to(root) if path != root else path.name).encode() + b"\x00")
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
        out: dict[str, Any] = {"files": digest.hexdigest()}
        if src.source == "parquet":
            out["text_field"] = src.text_field
    else:
        out = {"hub_id": src.hub_id, "hub_config": src.hub_config, "split": src.split, "revision": src.revision,
               "text_field": src.text_field}
    if src.rows_per_document != 1:
        out["rows_per_document"] = src.rows_per_document
    return out


def cache_key(settings: CorpusSettings, tokenizer: Any) -> str:
    packing = {"max_seq_length": settings.max_seq_length, "max_documents": settings.max_documents,
               "dev_documents": settings.dev_documents}
    masking = {k: getattr(settings, k) for k in ("masking", "mlm_probability", "max_predictions", "mask_ratio",
                                                 "random_ratio", "mask_seed")}
    blob = json.dumps({"version": CACHE_VERSION, "corpus": identity(settings), "tokenizer": tokenizer_hash(tokenizer),
                       "packing": packing, "masking": masking}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# -------------------------------------------------------------------------------------- pack and mask
def pack(pieces: list[int], max_seq_length: int, cls_id: int, sep_id: int) -> list[list[int]]:
    """One document's word pieces as [CLS] piece [SEP] sequences of at most `max_seq_length` tokens."""
    width = max_seq_length - 2
    return [[cls_id, *pieces[i:i + width], sep_id] for i in range(0, len(pieces), width)]


def mask_tokens(ids: np.ndarray, lengths: np.ndarray, rng: np.random.Generator, settings: CorpusSettings,
                mask_id: int, random_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(masked input ids, labels) for packed sequences `ids` (N, L) whose first `lengths[i]` tokens are
    [CLS] pieces [SEP]: only word pieces (positions 1..length-2) are chosen."""
    inputs, labels = ids.copy(), np.full_like(ids, IGNORE)
    for row, length in enumerate(lengths.tolist()):
        n = length - 2
        if n < 1:
            continue
        k = min(settings.max_predictions, max(1, int(round(n * settings.mlm_probability))))
        chosen = 1 + rng.choice(n, size=k, replace=False)
        labels[row, chosen] = ids[row, chosen]
        draw = rng.random(k)
        to_mask = chosen[draw < settings.mask_ratio]
        to_random = chosen[(draw >= settings.mask_ratio) & (draw < settings.mask_ratio + settings.random_ratio)]
        inputs[row, to_mask] = mask_id
        inputs[row, to_random] = rng.choice(random_ids, size=len(to_random))
    return inputs, labels


def special_ids(tokenizer: Any) -> dict[str, Any]:
    """[CLS], [SEP], [PAD], [MASK] ids and the ids a random replacement may take (no special token)."""
    ids = {k: getattr(tokenizer, f"{k}_token_id") for k in ("cls", "sep", "pad", "mask")}
    missing = [k for k, v in ids.items() if v is None]
    if missing:
        raise ConfigError(f"the tokenizer has no {missing[0]} token: MLM distillation needs [CLS], [SEP], [PAD] "
                          "and [MASK]")
    special = set(tokenizer.all_special_ids)
    ids["random"] = np.array([i for i in range(len(tokenizer)) if i not in special], dtype=np.int64)
    return ids


# ---------------------------------------------------------------------------------------------- cache
@dataclass
class Split:
    ids: np.ndarray  # (N, L) packed ids (masked for a static split), pad-filled
    lengths: np.ndarray  # (N,) real tokens per sequence
    labels: np.ndarray | None  # (N, L) static labels, or None (dynamic masking)

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@dataclass
class PackedCorpus:
    settings: CorpusSettings
    key: str
    path: Path
    train: Split
    dev: Split
    meta: dict[str, Any]
    built: bool  # built by this call (else read from the cache)
    special: dict[str, Any] = field(repr=False, default_factory=dict)

    def batch(self, split: Split, rows: np.ndarray, rng: np.random.Generator | None = None) -> dict[str, torch.Tensor]:
        """The batch of `rows` (trimmed to its longest sequence); a dynamic split is masked with `rng`."""
        lengths = split.lengths[rows]
        width = int(lengths.max())
        ids = np.asarray(split.ids[rows, :width], dtype=np.int64)
        if split.labels is None:
            assert rng is not None, "dynamic masking needs a generator"
            ids, labels = mask_tokens(ids, lengths, rng, self.settings, int(self.special["mask"]),
                                      self.special["random"])
        else:
            labels = np.asarray(split.labels[rows, :width], dtype=np.int64)
        attention = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
        return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(attention),
                "token_type_ids": torch.zeros(ids.shape, dtype=torch.long), "labels": torch.from_numpy(labels)}

    def train_batches(self, batch_size: int, seed: int) -> Iterator[dict[str, torch.Tensor]]:
        """One epoch of whole batches (the last partial one dropped) in an order seeded by `seed`."""
        order = np.random.default_rng(seed).permutation(len(self.train))
        for step in range(len(self.train) // batch_size):
            rows = np.sort(order[step * batch_size:(step + 1) * batch_size])
            rng = np.random.default_rng([seed, step]) if self.train.labels is None else None
            yield self.batch(self.train, rows, rng)

    def dev_batches(self, batch_size: int) -> Iterator[dict[str, torch.Tensor]]:
        for start in range(0, len(self.dev), batch_size):
            yield self.batch(self.dev, np.arange(start, min(start + batch_size, len(self.dev))))

    def describe(self) -> dict[str, Any]:
        """The record's `corpus` entry."""
        return {"name": self.settings.name, "source": self.settings.source, "cache_key": self.key,
                "cache": "built" if self.built else "reused", "path": str(self.path), **self.meta}


def load_corpus(settings: CorpusSettings, tokenizer: Any, cache_dir: str | os.PathLike) -> PackedCorpus:
    """The packed, masked corpus from the cache, built first if it is not there."""
    special = special_ids(tokenizer)
    key = cache_key(settings, tokenizer)
    path = Path(cache_dir) / "corpora" / f"{settings.name}-{key}"
    built = False
    if not (path / "meta.json").exists():
        _build(settings, tokenizer, special, path)
        built = True
    meta = json.loads((path / "meta.json").read_text())

    def split(name: str, static: bool) -> Split:
        labels = np.load(path / f"{name}_labels.npy", mmap_mode="r") if static else None
        ids = "ids" if static else "ids_unmasked"
        return Split(np.load(path / f"{name}_{ids}.npy", mmap_mode="r"), np.load(path / f"{name}_lengths.npy"),
                     labels)

    return PackedCorpus(settings, key, path, split("train", settings.masking == "static"), split("dev", True),
                        meta, built, special)


def _build(settings: CorpusSettings, tokenizer: Any, special: dict[str, Any], path: Path) -> None:
    """Stream the documents, pack them into raw row files chunk by chunk (memory: one chunk, not the corpus),
    then write the `.npy` arrays, masking chunk by chunk with one generator in row order: dev first, so its
    masks do not depend on the training set's size."""
    from tqdm.auto import tqdm

    log.info("building corpus %s (tokenise, pack to %d, mask) into %s", settings.name, settings.max_seq_length,
             path)
    with writing(path, BUILD_KEPT):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = new_dir(path.parent, f".{path.name}-")  # the umask's mode, not mkdtemp's 0700
    try:
        rows = {name: _RowWriter(tmp / f"{name}.raw", settings.max_seq_length, int(special["pad"]))
                for name in ("dev", "train")}
        n_docs, batch = 0, []

        def flush() -> None:
            if not batch:  # a number of documents that is a multiple of 1000: the tokenizer refuses an empty list
                return
            for pieces in tokenizer(batch, add_special_tokens=False)["input_ids"]:
                target = "dev" if flushed[0] < settings.dev_documents else "train"  # documents in stream order
                flushed[0] += 1
                rows[target].add(pack(pieces, settings.max_seq_length, special["cls"], special["sep"]))
            batch.clear()

        flushed = [0]
        for text in tqdm(documents(settings), desc=f"corpus {settings.name}", unit=" docs"):
            batch.append(text)
            n_docs += 1
            if len(batch) == 1000:
                flush()
        flush()
        for writer in rows.values():
            writer.close()
        if n_docs <= settings.dev_documents or not rows["train"].count:
            raise ConfigError(f"corpus={settings.name} has {n_docs} document(s): not more than its dev_documents="
                              f"{settings.dev_documents}, so nothing is left to train on")
        rng = np.random.default_rng(settings.mask_seed)
        sizes = {}
        for name, writer in rows.items():  # dev first (see above)
            ids, lengths = writer.read()
            with writing(tmp / f"{name}_lengths.npy", BUILD_KEPT):
                np.save(tmp / f"{name}_lengths.npy", lengths)
            if name == "train" and settings.masking == "dynamic":
                _copy_npy(tmp / f"{name}_ids_unmasked.npy", ids)
            else:
                _mask_npy(tmp / f"{name}_ids.npy", tmp / f"{name}_labels.npy", ids, lengths, rng, settings, special)
            sizes[name] = {"sequences": int(len(lengths)), "tokens": int(lengths.sum())}
            del ids
            (tmp / f"{name}.raw").unlink()
        meta = {"documents": n_docs, "train_sequences": sizes["train"]["sequences"],
                "train_tokens": sizes["train"]["tokens"], "dev_sequences": sizes["dev"]["sequences"],
                "dev_tokens": sizes["dev"]["tokens"], "settings": asdict(settings)}
        with writing(tmp / "meta.json", BUILD_KEPT):
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing half-built is left behind
        raise
    try:
        os.replace(tmp, path)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (path / "meta.json").exists():  # else another job renamed its identical copy first
            with writing(path, BUILD_KEPT):
                raise err
    BUILDS["count"] += 1


CHUNK_ROWS = 65536  # packed rows held in memory at once while a corpus is built (32 MB at 128 tokens)


class _RowWriter:
    """One split's packed rows appended to a raw int32 file (pad-filled to `width`), a chunk at a time."""

    def __init__(self, path: Path, width: int, pad: int) -> None:
        self.path, self.width, self.pad = path, width, pad
        with writing(path, BUILD_KEPT):
            self.file = open(path, "wb")  # noqa: SIM115  (closed by close())
        self.pending: list[list[int]] = []
        self.lengths: list[np.ndarray] = []
        self.count = 0

    def add(self, rows: list[list[int]]) -> None:
        self.pending += rows
        if len(self.pending) >= CHUNK_ROWS:
            self._write()

    def _write(self) -> None:
        block = np.full((len(self.pending), self.width), self.pad, dtype=np.int32)
        for i, row in enumerate(self.pending):
            block[i, :len(row)] = row
        with writing(self.path, BUILD_KEPT):
            self.file.write(block.tobytes())
        self.lengths.append(np.array([len(r) for r in self.pending], dtype=np.int32))
        self.count += len(self.pending)
        self.pending = []

    def close(self) -> None:
        if self.pending:
            self._write()
        with writing(self.path, BUILD_KEPT):
            self.file.close()

    def read(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids (N, width), memory-mapped; lengths (N,))."""
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, dtype=np.int32)
        if not self.count:
            return np.zeros((0, self.width), dtype=np.int32), lengths
        return np.memmap(self.path, dtype=np.int32, mode="r", shape=(self.count, self.width)), lengths


def _copy_npy(target: Path, ids: np.ndarray) -> None:
    if not len(ids):  # a memory map of nothing cannot be opened
        with writing(target, BUILD_KEPT):
            np.save(target, np.asarray(ids))
        return
    out = _array(target, ids.shape)
    for start in range(0, len(ids), CHUNK_ROWS):
        out[start:start + CHUNK_ROWS] = ids[start:start + CHUNK_ROWS]
    with writing(target, BUILD_KEPT):
        out.flush()


def _array(file: Path, shape: tuple[int, ...]) -> np.memmap:
    """A new int32 .npy array memory-mapped for writing, its blocks reserved (a full disk: DiskWriteError now,
    not SIGBUS while it is filled)."""
    with writing(file, BUILD_KEPT):
        array = np.lib.format.open_memmap(file, mode="w+", dtype=np.int32, shape=shape)
        reserve(file)
    return array


def _mask_npy(ids_path: Path, labels_path: Path, ids: np.ndarray, lengths: np.ndarray, rng: np.random.Generator,
              settings: CorpusSettings, special: dict[str, Any]) -> None:
    """Static masks, chunk by chunk: mask_tokens draws row by row, so the chunks give the whole split's masks."""
    if not len(ids):
        for file in (ids_path, labels_path):
            with writing(file, BUILD_KEPT):
                np.save(file, np.asarray(ids))
        return
    masked, labels = _array(ids_path, ids.shape), _array(labels_path, ids.shape)
    for start in range(0, len(ids), CHUNK_ROWS):
        stop = start + CHUNK_ROWS
        chunk_ids, chunk_labels = mask_tokens(np.asarray(ids[start:stop]), lengths[start:stop], rng, settings,
                                              special["mask"], special["random"])
        masked[start:stop], labels[start:stop] = chunk_ids, chunk_labels
    for array in (masked, labels):
        with writing(array.filename, BUILD_KEPT):
            array.flush()
