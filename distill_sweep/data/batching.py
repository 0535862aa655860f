"""Batching: right-padding collation, length-grouped and sorted batch samplers, and the one DataLoader factory."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import numpy as np
import torch
from datasets import Dataset
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, Sampler, SequentialSampler

# Column/batch key prefix of a student's own token ids (student_ids_0, student_ids_1: one per text field).
STUDENT_IDS = "student_ids_"


def collate(features: Mapping[str, list], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a batch (dict of per-example lists) to its longest sequence; return the contract's dict."""
    ids = features["input_ids"]
    n, width = len(ids), max(len(x) for x in ids)
    input_ids = torch.full((n, width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    has_types = "token_type_ids" in features
    types = torch.zeros((n, width), dtype=torch.long) if has_types else None
    for i, seq in enumerate(ids):
        input_ids[i, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
        attention[i, : len(seq)] = 1
        if types is not None:
            types[i, : len(seq)] = torch.as_tensor(features["token_type_ids"][i], dtype=torch.long)
    labels = features["labels"]
    batch = {
        "input_ids": input_ids,
        "attention_mask": attention,
        "labels": torch.as_tensor(labels, dtype=torch.float if isinstance(labels[0], float) else torch.long),
        "idx": torch.as_tensor(features["idx"], dtype=torch.long),
    }
    if types is not None:
        batch["token_type_ids"] = types
    for key in features:
        if key.startswith(STUDENT_IDS):  # a student's own ids: right-padded with its PAD id 0
            rows = features[key]
            padded = torch.zeros((n, max(len(x) for x in rows)), dtype=torch.long)
            for i, seq in enumerate(rows):
                padded[i, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
            batch[key] = padded
    return batch


class _Collate:
    """Picklable collate (DataLoader workers need to pickle it)."""

    def __init__(self, pad_token_id: int) -> None:
        self.pad_token_id = pad_token_id

    def __call__(self, features: Mapping[str, list]) -> dict[str, torch.Tensor]:
        return collate(features, self.pad_token_id)


def row_lengths(ds: Dataset) -> np.ndarray:
    """Tokens per row (int64), read from the arrow column's list offsets without decoding the rows."""
    import pyarrow.compute as pc

    if getattr(ds, "_indices", None) is not None:  # a selection of another table: decode (rare, small)
        return np.fromiter((len(x) for x in ds["input_ids"]), dtype=np.int64, count=len(ds))
    return pc.list_value_length(ds.data.column("input_ids")).to_numpy().astype(np.int64)


# Rows sorted by length within a random group of this many batches: HF Trainer's "megabatch" factor. A
# larger group pads less and mixes less; 50 gives padded/real ~1.0 on GLUE-like lengths at batch 32.
GROUP_BATCHES = 50


class LengthGroupedBatches(Sampler[list[int]]):
    """Batches of rows of similar length, in a random order that is a function of `seed` alone.

    A seeded permutation of the rows is cut into groups of `GROUP_BATCHES` batches; each group is sorted by
    length (longest first, ties in permutation order) and cut into batches; then the batch order is shuffled
    with the same generator. Every epoch (its own seed) therefore draws new groups, and a replayed epoch the
    same batches: resume from a checkpoint stays exact.
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int) -> None:
        self.lengths, self.batch_size, self.seed = np.asarray(lengths), int(batch_size), int(seed)

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng(self.seed)
        order = rng.permutation(len(self.lengths))
        group = self.batch_size * GROUP_BATCHES
        batches: list[np.ndarray] = []
        for start in range(0, len(order), group):
            rows = order[start:start + group]
            rows = rows[np.argsort(-self.lengths[rows], kind="stable")]
            batches.extend(rows[i:i + self.batch_size] for i in range(0, len(rows), self.batch_size))
        for b in rng.permutation(len(batches)):
            yield batches[b].tolist()


class SortedBatches(Sampler[list[int]]):
    """Every row once, batched in order of length (longest first): evaluation and teacher-output builds,
    whose results do not depend on the order of the rows."""

    def __init__(self, lengths: np.ndarray, batch_size: int) -> None:
        self.order, self.batch_size = np.argsort(-np.asarray(lengths), kind="stable"), int(batch_size)

    def __len__(self) -> int:
        return math.ceil(len(self.order) / self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        for i in range(0, len(self.order), self.batch_size):
            yield self.order[i:i + self.batch_size].tolist()


def make_loader(
    ds: Dataset,
    batch_size: int,
    *,
    shuffle: bool,
    seed: int,
    pad_token_id: int,
    num_workers: int = 0,
    by_length: bool = False,
) -> DataLoader:
    """Batches padded per batch. The sampler yields whole index lists, so each batch is one
    ``ds[indices]`` arrow read instead of ``batch_size`` row reads. Shuffling draws from a private
    generator seeded with ``seed``: the epoch orders are the same on every run, and differ between epochs.
    ``by_length``: batches of similar lengths (less padding): `LengthGroupedBatches` when shuffling, else
    `SortedBatches` (row order then differs from the split's: only for consumers that follow ``idx``).
    """
    cols = [
        c for c in ("input_ids", "attention_mask", "token_type_ids", "labels", "idx") if c in ds.column_names
    ] + [c for c in ds.column_names if c.startswith(STUDENT_IDS)]
    lengths = row_lengths(ds) if by_length else None
    ds = ds.with_format(None, columns=cols)
    batches: Sampler[list[int]]
    if lengths is not None:
        batches = LengthGroupedBatches(lengths, batch_size, seed) if shuffle else SortedBatches(lengths, batch_size)
    else:
        sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(int(seed))) if shuffle \
            else SequentialSampler(ds)
        batches = BatchSampler(sampler, batch_size=batch_size, drop_last=False)
    return DataLoader(
        ds,
        sampler=batches,
        batch_size=None,  # the sampler already batches; ds[list] returns a dict of lists
        collate_fn=_Collate(pad_token_id),
        num_workers=num_workers,
        # iter(DataLoader) draws a base seed; without its own generator it takes it from the global RNG,
        # which would shift dropout's random stream and break bit-exact resume from a checkpoint.
        generator=torch.Generator().manual_seed(int(seed)),
    )
