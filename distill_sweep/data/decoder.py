"""Data for decoder LMs (procedure=causal_lm): sequences, the positions that predict a token, and batches.

Two sources:
* the `corpus` group (corpus.py's packed cache, read unmasked): every token of a packed sequence after its
  first is a target, so the loss covers all non-padding next-token predictions;
* instruction data: prompt/response pairs (`procedure.instructions`: a local JSONL file of objects with
  `prompt_field` and `response_field`, a local Parquet file with those columns, a hub dataset id, or `toy`: the toy task's reviews as prompts with the
  label as an in-vocabulary word as the response). A sequence is [BOS] prompt response [EOS]; only the
  response's tokens and the [EOS] are targets (the loss on the response). With `choices` (classification-style
  data) the dev slice is also scored by the next-token choice: the choice whose first token the model ranks
  highest after the prompt.

A batch holds `input_ids`, `attention_mask` (right padding; the models apply their causal mask), `labels`
(B, S): at position t the token t+1 where that is a target, else IGNORE (already shifted, as the next-token
terms in objectives/causal.py read them), and `idx`, the rows' positions in their split (the top-k store's key).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from distill_sweep.data.corpus import IGNORE, documents, load_corpus
from distill_sweep.data.corpus_settings import CorpusSettings
from distill_sweep.data.decoder_settings import TOY_RESPONSES, InstructionSettings
from distill_sweep.data.instruction_files import as_pair, read_file_pairs
from distill_sweep.data.unknown_tokens import warn_if_unreadable
from distill_sweep.errors import ConfigError
from distill_sweep.models.hub import go_offline_if_hub_unreachable


@dataclass
class Sequences:
    ids: np.ndarray  # (N, L) token ids, pad-filled
    lengths: np.ndarray  # (N,) real tokens
    first_target: np.ndarray  # (N,) position of the first target token (1: all but the first)
    choice: np.ndarray  # (N,) the right choice's index (-1: not a classification-style example)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def targets(self) -> int:
        """The positions a student trains on (CausalData.batch's labels): first_target <= t + 1 < length per row."""
        return int(np.maximum(0, self.lengths - self.first_target).sum())


@dataclass
class CausalData:
    name: str
    train: Sequences
    dev: Sequences
    pad_id: int
    choice_ids: list[int]  # first token of each choice (classification-style data), else []
    info: dict[str, Any]  # the record's `causal_data` entry

    def batch(self, split: Sequences, rows: np.ndarray) -> dict[str, torch.Tensor]:
        lengths = split.lengths[rows]
        width = int(lengths.max())
        ids = np.asarray(split.ids[rows, :width], dtype=np.int64)
        pos = np.arange(width)[None, :]
        attention = (pos < lengths[:, None]).astype(np.int64)
        labels = np.full_like(ids, IGNORE)
        labels[:, :-1] = ids[:, 1:]
        # position t predicts token t+1: a target when first_target <= t+1 < length
        target = (pos + 1 >= split.first_target[rows][:, None]) & (pos + 1 < lengths[:, None])
        labels[~target] = IGNORE
        return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(attention),
                "labels": torch.from_numpy(labels), "idx": torch.from_numpy(np.asarray(rows, dtype=np.int64))}

    def train_batches(self, batch_size: int, seed: int) -> Iterator[dict[str, torch.Tensor]]:
        """One epoch of whole batches (the last partial one dropped) in an order seeded by `seed`."""
        order = np.random.default_rng(seed).permutation(len(self.train))
        for step in range(len(self.train) // batch_size):
            yield self.batch(self.train, np.sort(order[step * batch_size:(step + 1) * batch_size]))

    def dev_batches(self, batch_size: int) -> Iterator[dict[str, torch.Tensor]]:
        for start in range(0, len(self.dev), batch_size):
            yield self.batch(self.dev, np.arange(start, min(start + batch_size, len(self.dev))))

    def dev_choice_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(dev rows that are classification-style examples, their right choice)."""
        rows = np.nonzero(self.dev.choice >= 0)[0]
        return rows, self.dev.choice[rows]

    @property
    def key(self) -> str:
        """The content key of these sequences (what the decoder teacher and its top-k store are keyed by): the
        corpus cache's key, else a digest of the token ids themselves; never a path."""
        return str(self.info.get("cache_key") or self.info["key"])


# ------------------------------------------------------------------------------------ generated responses
def prompts_of(split: Sequences, rows: np.ndarray, room: int) -> list[np.ndarray]:
    """Each row's [BOS] and prompt (the tokens before its first target), the prompt cut from its start to its last
    `room` tokens (as from_instructions cuts it), so that [BOS] + prompt + `max_seq_length - 1 - room` new tokens
    fit max_seq_length."""
    out = []
    for r in rows:
        prompt = split.ids[r, 1:split.first_target[r]]
        out.append(np.concatenate([split.ids[r, :1], prompt[len(prompt) - min(room, len(prompt)):]]))
    return out


def with_responses(prompts: list[np.ndarray], responses: list[list[int]], pad: int) -> Sequences:
    """Sequences [BOS] prompt response (`prompts` with their [BOS]): the targets are the response's tokens, its
    [EOS] among them where it has one (a response cut at max_new_tokens has none, and gets none added: the
    model did not generate it); no choice (-1)."""
    rows = [np.concatenate([p, np.asarray(r, dtype=np.int64)]) for p, r in zip(prompts, responses, strict=True)]
    ids = np.full((len(rows), max(len(r) for r in rows)), pad, dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
    n = len(rows)
    return Sequences(ids, np.array([len(r) for r in rows], dtype=np.int64),
                     np.array([len(p) for p in prompts], dtype=np.int64), np.full(n, -1, dtype=np.int64))


def content_key(train: Sequences, dev: Sequences, choice_ids: list[int]) -> str:
    """sha256 (16 hex) of the splits' token ids, lengths, targets and choices: the same data gives the same key
    wherever its files or tokenizer live."""
    h = hashlib.sha256(json.dumps(choice_ids).encode())
    for split in (train, dev):
        for array in (split.ids, split.lengths, split.first_target, split.choice):
            a = np.ascontiguousarray(array, dtype=np.int64)
            h.update(f"\0{a.shape}\0".encode())
            h.update(a.tobytes())
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------- the corpus
def from_corpus(settings: CorpusSettings, tokenizer: Any, cache_dir: Path) -> CausalData:
    """The packed corpus (corpus.py's cache), unmasked: the masked splits carry the original token in their
    labels wherever they replaced one. A tokenizer without the [CLS]/[SEP]/[MASK] tokens the cache packs with
    (a decoder's, usually) gets the same documents packed in memory with its own BOS/EOS (`packed_in_memory`)."""
    if any(getattr(tokenizer, f"{k}_token_id", None) is None for k in ("cls", "sep", "mask")):
        return packed_in_memory(settings, tokenizer)
    corpus = load_corpus(settings, tokenizer, cache_dir)

    def unmasked(split: Any) -> Sequences:
        ids = np.asarray(split.ids, dtype=np.int64)
        if split.labels is not None:
            labels = np.asarray(split.labels, dtype=np.int64)
            ids = np.where(labels != IGNORE, labels, ids)
        n = len(ids)
        return Sequences(ids, np.asarray(split.lengths, dtype=np.int64), np.ones(n, dtype=np.int64),
                         np.full(n, -1, dtype=np.int64))

    return CausalData(f"causal_{settings.name}", unmasked(corpus.train), unmasked(corpus.dev),
                      int(tokenizer.pad_token_id), [], {"source": "corpus", **corpus.describe()})


def packed_in_memory(settings: CorpusSettings, tokenizer: Any) -> CausalData:
    """The corpus' documents (the same order and dev split as the cache) cut into [BOS] pieces [EOS] sequences of
    `max_seq_length`, held in memory: for a corpus a decoder's tokenizer reads, of the size a job can hold."""
    bos, eos, pad = special_tokens(tokenizer)
    width = settings.max_seq_length - 2
    dev: list[list[int]] = []
    train: list[list[int]] = []
    for n, text in enumerate(documents(settings)):
        pieces = tokenizer(text, add_special_tokens=False)["input_ids"]
        rows = [[bos, *pieces[i:i + width], eos] for i in range(0, len(pieces), width)]
        (dev if n < settings.dev_documents else train).extend(rows)
    if not train:
        raise ConfigError(f"corpus={settings.name} has nothing to train on after its dev_documents="
                          f"{settings.dev_documents}")

    def split(rows: list[list[int]]) -> Sequences:
        ids = np.full((len(rows), settings.max_seq_length), pad, dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = row
        n = len(rows)
        return Sequences(ids, np.array([len(r) for r in rows], dtype=np.int64), np.ones(n, dtype=np.int64),
                         np.full(n, -1, dtype=np.int64))

    train_rows, dev_rows = split(train), split(dev)
    info = {"source": "corpus", "name": settings.name, "packing": "in memory, [BOS] ... [EOS]",
            "key": content_key(train_rows, dev_rows, []), "train_sequences": len(train), "dev_sequences": len(dev)}
    return CausalData(f"causal_{settings.name}", train_rows, dev_rows, pad, [], info)


# ------------------------------------------------------------------------------------------ instructions
def toy_pairs(settings: InstructionSettings) -> list[tuple[str, str]]:
    from distill_sweep.data.toy import (  # the toy task's generator (datasets: lazily)
        LABEL_NAMES,
        generate_toy,
    )

    n_dev = settings.dev_examples
    splits = generate_toy(settings.num_examples - n_dev, n_dev, settings.seed)
    pairs = []
    for split in ("validation", "train"):  # dev first: the first dev_examples are held out
        for row in splits[split]:
            pairs.append((f"{row['sentence1']} ; {row['sentence2']}", TOY_RESPONSES[LABEL_NAMES[row["label"]]]))
    return pairs


def read_pairs(settings: InstructionSettings) -> list[tuple[str, str]]:
    """The (prompt, response) pairs in their order (the first `dev_examples` are the dev slice)."""
    if settings.source == "toy":
        pairs = toy_pairs(settings)
    elif settings.source in ("jsonl", "parquet"):
        pairs = read_file_pairs(settings)  # what the command line checked before the job started
    else:
        from datasets import load_dataset  # a hub dataset only

        go_offline_if_hub_unreachable()
        try:
            rows = load_dataset(settings.hub_id, settings.hub_config, split=settings.split)
        except Exception as err:  # noqa: BLE001 - datasets raises many kinds for a missing dataset
            raise ConfigError(f"procedure.instructions.hub_id={settings.hub_id!r}: cannot load it ({err})") from None
        pairs = [as_pair(r, settings, f"{settings.hub_id} row {n}") for n, r in enumerate(rows)]
    if settings.max_examples is not None:
        pairs = pairs[:settings.max_examples]
    if len(pairs) <= settings.dev_examples:
        raise ConfigError(f"procedure.instructions has {len(pairs)} examples: not more than dev_examples="
                          f"{settings.dev_examples}, so nothing is left to train on")
    return pairs


def special_tokens(tokenizer: Any) -> tuple[int, int, int]:
    """(bos, eos, pad) ids: a decoder tokenizer's own, or the toy tokenizer's [CLS], [SEP], [PAD]."""
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.cls_token_id
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    if bos is None or eos is None:
        raise ConfigError("the tokenizer has neither a BOS/EOS nor a [CLS]/[SEP] token to open and close a sequence")
    return int(bos), int(eos), int(pad)


def from_instructions(settings: InstructionSettings, tokenizer: Any, max_seq_length: int) -> CausalData:
    """Prompt/response pairs tokenised as [BOS] prompt response [EOS] (cut to `max_seq_length` from the
    prompt's start, so the response stays); targets: the response and [EOS]."""
    pairs = read_pairs(settings)
    bos, eos, pad = special_tokens(tokenizer)
    words = settings.choice_words()
    choice_ids = [tokenizer(" " + w if w[:1] != " " else w, add_special_tokens=False)["input_ids"][0] for w in words]
    if len(set(choice_ids)) != len(choice_ids):
        raise ConfigError(f"procedure.instructions.choices={words}: two choices start with the same token, so the "
                          "next-token choice cannot tell them apart")
    prompts = tokenizer([p for p, _ in pairs], add_special_tokens=False)["input_ids"]
    responses = tokenizer([r for _, r in pairs], add_special_tokens=False)["input_ids"]
    warn_if_unreadable([*prompts, *responses], tokenizer, f"the instructions {settings.name!r}")
    rows, firsts, choice, cut = [], [], [], 0
    for (_, response), p, r in zip(pairs, prompts, responses, strict=True):
        room = max_seq_length - 2 - len(r)
        if room < 1:
            raise ConfigError(f"a response of {len(r)} tokens does not fit max_seq_length={max_seq_length}")
        cut += len(p) > room
        p = p[-room:]
        rows.append([bos, *p, *r, eos])
        firsts.append(1 + len(p))
        choice.append(words.index(response.strip()) if response.strip() in words else -1)
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad, dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    firsts_a, choice_a = np.array(firsts, dtype=np.int64), np.array(choice, dtype=np.int64)
    n = settings.dev_examples

    def part(sl: slice) -> Sequences:
        return Sequences(ids[sl], lengths[sl], firsts_a[sl], choice_a[sl])

    train, dev, chosen = part(slice(n, None)), part(slice(0, n)), choice_ids if words else []
    info = {"source": "instructions", "name": settings.name, "examples": len(rows), "dev_examples": n,
            "prompts_cut": cut, "choices": words, "key": content_key(train, dev, chosen),
            "settings": asdict(settings)}
    return CausalData(f"causal_{settings.name}", train, dev, pad, chosen, info)
