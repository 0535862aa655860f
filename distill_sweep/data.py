"""Task data: GLUE from the hub or from the original GLUE TSV files, the toy task; tokenisation; batching.

Every source ends in the same shape: ``{"train": Dataset, <dev split name>: Dataset, ...}`` with the HF
``nyu-mll/glue`` column names (the task's text fields) plus an integer ``label`` whose ids follow
``task.label_names`` (float for regression), so the rest of the code never knows where data came from.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import logging
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, Sampler, SequentialSampler

from distill_sweep.disk import writing
from distill_sweep.errors import ConfigError, DataError
from distill_sweep.task_files import (
    column_index,
    dev_splits,
    get,
    refuse_binary,
    tsv_columns,
    tsv_paths,
    tsv_subdir,
)
from distill_sweep.toy import generate_toy

log = logging.getLogger(__name__)

# Bump when tokenisation output changes, so old cache files are never reused.
_TOKENIZE_VERSION = "1"
# Above this fraction of unparseable rows a file is treated as the wrong format rather than a few bad
# lines (the original QQP train.tsv has a handful of rows with missing fields; that is all we tolerate).
_MAX_BAD_ROW_FRACTION = 0.01
# Column/batch key prefix of a student's own token ids (student_ids_0, student_ids_1: one per text field).
STUDENT_IDS = "student_ids_"


# --------------------------------------------------------------------------------------------- config
def _check_task_cfg(task_cfg: Any) -> None:
    names = list(get(task_cfg, "label_names") or [])
    regression = bool(get(task_cfg, "is_regression", False))
    num_labels = int(get(task_cfg, "num_labels"))
    if regression and num_labels != 1:
        raise ConfigError(
            f"task {get(task_cfg, 'name')}: is_regression needs num_labels 1, got {num_labels}"
        )
    if not regression and len(names) != num_labels:
        raise ConfigError(
            f"task {get(task_cfg, 'name')}: num_labels {num_labels} but {len(names)} label_names {names}"
        )


# ------------------------------------------------------------------------------------------- loading
def load_raw(task_cfg: Any) -> dict[str, Dataset]:
    """The task's train split and every dev split, columns = text fields + ``label``.

    Sources: ``toy`` (generated), ``glue`` with ``data_dir`` (original GLUE TSVs), ``glue`` without it
    (``datasets.load_dataset(hub_id, hub_config)``). Raises DataError for unreachable/missing/malformed data.
    ``task.max_train_samples`` / ``task.max_dev_samples`` then cut the splits to seeded subsets.
    """
    _check_task_cfg(task_cfg)
    limits = _subset_limits(task_cfg)  # checked before any download
    return _subset_splits(_load_source(task_cfg), task_cfg, *limits)


def _load_source(task_cfg: Any) -> dict[str, Dataset]:
    source = get(task_cfg, "source", "glue")
    if source == "toy":
        recipe = get(task_cfg, "recipe") or {}

        def toy_key(key: str, default: int) -> int:
            # The contract lists these under the recipe; accept them at the task level too.
            return int(get(recipe, key, get(task_cfg, key, default)))

        splits = generate_toy(toy_key("num_train", 3000), toy_key("num_dev", 500), toy_key("seed", 0))
        out = {"train": splits["train"]}
        for name in dev_splits(task_cfg):
            out[name] = splits["validation"]
        return out
    if source != "glue":
        raise ConfigError(f"task.source must be 'glue' or 'toy', got {source!r}")
    if get(task_cfg, "data_dir"):
        return _load_tsv(task_cfg)
    return _load_hub(task_cfg)


# ------------------------------------------------------------------------------------- pilot subsets
def _subset_limits(task_cfg: Any) -> tuple[int | None, int | None, int]:
    """(max_train_samples, max_dev_samples, subset_seed), each checked: null or a positive integer."""
    name = get(task_cfg, "name")
    limits: list[int | None] = []
    for key in ("max_train_samples", "max_dev_samples"):
        value = get(task_cfg, key)
        # bool is an int in Python; `true` here is a typo, not a size
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise ConfigError(
                f"task.{key}={value!r} (task {name}): use a positive integer, or null for the whole split"
            )
        limits.append(value)
    seed = get(task_cfg, "subset_seed", 0)
    seed = 0 if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"task.subset_seed={seed!r} (task {name}): use an integer >= 0")
    return limits[0], limits[1], seed


def _subset_splits(
    raw: dict[str, Dataset], task_cfg: Any, max_train: int | None, max_dev: int | None, seed: int
) -> dict[str, Dataset]:
    # The subset depends on subset_seed alone, never on the training seed: every seed of a pilot sweep
    # trains and evaluates on the same examples.
    out = {}
    for split, ds in raw.items():
        limit = max_train if split == "train" else max_dev
        if limit is None or limit >= len(ds):
            out[split] = ds
            continue
        keep = np.sort(np.random.default_rng(seed).permutation(len(ds))[:limit])
        out[split] = ds.select(keep.tolist())
        log.info("task %s: %s subset of %d/%d examples (subset_seed %d)", get(task_cfg, "name"), split, limit,
                 len(ds), seed)
    return out


def _hub_offline_requested() -> bool:
    true = {"1", "ON", "YES", "TRUE"}
    return any(
        os.environ.get(v, "").upper() in true
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


@contextlib.contextmanager
def _honour_offline_env() -> Iterator[None]:
    """Apply HF_HUB_OFFLINE as set *now*: datasets/huggingface_hub read it once at import time.

    Without this, setting the variable after import (tests, notebooks) still makes load_dataset retry
    the network for ~20 s before failing.
    """
    if not _hub_offline_requested():
        yield
        return
    import datasets.config
    import huggingface_hub.constants as hub_constants

    saved = (datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE)
    datasets.config.HF_HUB_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved


# endpoint -> why it could not be reached (None: reachable); probed at most once per process
_HUB_PROBES: dict[str, str | None] = {}


def hub_unreachable_reason(timeout: float = 3.0) -> str | None:
    """Why the hub endpoint cannot be reached (one HEAD request, once per process), or None if it can.

    Only a failure to connect counts (DNS, refused, timeout): any HTTP answer means the hub is there.
    Goes through huggingface_hub's own HTTP session, so HF_ENDPOINT and proxy settings apply as they do
    for the real downloads.
    """
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    endpoint = constants.ENDPOINT
    if endpoint not in _HUB_PROBES:
        try:
            get_session().head(endpoint, timeout=timeout)
            _HUB_PROBES[endpoint] = None
        except Exception as err:  # noqa: BLE001 - httpx/requests/OS errors alike mean "cannot connect"
            first = str(err).strip().splitlines()[0][:160] if str(err).strip() else ""
            _HUB_PROBES[endpoint] = f"{endpoint}: {type(err).__name__}{': ' + first if first else ''}"
    return _HUB_PROBES[endpoint]


def go_offline_if_hub_unreachable(timeout: float = 3.0) -> str | None:
    """Switch huggingface_hub/datasets/transformers to offline mode if the hub cannot be reached.

    Returns the reason when it did (None otherwise). Without this, every hub call with no network
    retries with backoff (5 retries, ~30 s, two warnings each) before failing; offline, files already
    in the local HF cache still load and anything else fails at once. Process-wide on purpose: the
    next hub call (tokenizer, model) would wait for the same dead network. Call before any hub access.
    """
    if _hub_offline_requested():
        return None  # offline already: _honour_offline_env applies it
    import huggingface_hub.constants as hub_constants

    if hub_constants.HF_HUB_OFFLINE:
        return None
    reason = hub_unreachable_reason(timeout)
    if reason is not None:
        import datasets.config

        datasets.config.HF_HUB_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    return reason


def _load_hub(task_cfg: Any) -> dict[str, Dataset]:
    import datasets

    hub_id, hub_config = get(task_cfg, "hub_id"), get(task_cfg, "hub_config")
    name = get(task_cfg, "name")
    unreachable = go_offline_if_hub_unreachable()
    try:
        with _honour_offline_env():
            dsd = datasets.load_dataset(hub_id, hub_config)
    except Exception as e:  # noqa: BLE001 - any hub failure gets the same actionable message
        # Offline mode, DNS failure, 5xx, missing cache: all mean "cannot get it from the hub here".
        if unreachable:
            why = f"the hub is unreachable ({unreachable}) and it is not in the local cache"
        else:
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
            why = f"{type(e).__name__}{': ' + first if first else ''}; the hub is unreachable or offline"
        raise DataError(
            f"cannot load {hub_id}/{hub_config} from the Hugging Face hub ({why}): use "
            f"task.data_dir=/path/to/glue_data (local GLUE TSVs, e.g. .../{tsv_subdir(task_cfg)}/train.tsv) "
            f"or `make demo` / task=toy"
        ) from e
    if unreachable:
        log.info("the Hugging Face hub is unreachable (%s): loaded %s/%s from the local cache", unreachable,
                 hub_id, hub_config)
    fields = list(get(task_cfg, "text_fields"))
    regression = bool(get(task_cfg, "is_regression", False))
    label_names = list(get(task_cfg, "label_names") or [])
    out: dict[str, Dataset] = {}
    wanted = {"train": "train", **dev_splits(task_cfg)}
    for ours, theirs in wanted.items():
        if theirs not in dsd:
            raise DataError(
                f"{hub_id}/{hub_config} has no split {theirs!r} (has {sorted(dsd)}) for task {name}"
            )
        ds = dsd[theirs]
        missing = [c for c in [*fields, "label"] if c not in ds.column_names]
        if missing:
            raise DataError(f"{hub_id}/{hub_config} split {theirs}: missing columns {missing}")
        feat = ds.features["label"]
        # Guard against silent label-order mismatches between the hub and our label_names.
        if not regression and hasattr(feat, "names") and list(feat.names) != label_names:
            raise DataError(
                f"{hub_id}/{hub_config}: hub label order {list(feat.names)} != task.label_names {label_names}"
            )
        ds = ds.select_columns([*fields, "label"])
        labels = ds["label"]
        _check_labels(list(labels), task_cfg, f"{hub_id}/{hub_config}:{theirs}")
        if regression:
            ds = ds.cast_column("label", datasets.Value("float32"))
        out[ours] = ds
    return out


def _check_labels(labels: list, task_cfg: Any, where: str) -> None:
    if bool(get(task_cfg, "is_regression", False)):
        return
    n = int(get(task_cfg, "num_labels"))
    bad = sorted({y for y in labels if not (0 <= int(y) < n)})
    if bad:
        raise DataError(f"{where}: label ids {bad[:5]} outside 0..{n - 1} (unlabelled test split?)")


def _load_tsv(task_cfg: Any) -> dict[str, Dataset]:
    return {split: read_glue_tsv(path, task_cfg) for split, path in tsv_paths(task_cfg).items()}


def read_glue_tsv(path: str | os.PathLike, task_cfg: Any) -> Dataset:
    """Read one original GLUE TSV into the HF column layout (text fields + ``label``).

    Quirks handled: no quote processing at all (fields may start with an unbalanced ``"``), an optional
    UTF-8 BOM (MRPC), header-less files (CoLA: columns addressed by position), string labels mapped
    through ``label_names`` (RTE, QNLI, MNLI), and rows with the wrong field count (QQP train) skipped
    and counted.
    """
    path = Path(path)
    tsv = get(task_cfg, "tsv")
    fields = list(get(task_cfg, "text_fields"))
    columns = tsv_columns(task_cfg)
    header = bool(get(tsv, "header", True))
    label_type = str(get(tsv, "label_type", "int"))
    label_names = [str(x) for x in (get(task_cfg, "label_names") or [])]
    num_labels = int(get(task_cfg, "num_labels"))

    refuse_binary(path)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # long MNLI parse-tree fields
    try:
        # utf-8-sig drops MRPC's BOM; QUOTE_NONE keeps quotes as plain characters, as GLUE intends.
        f = open(path, encoding="utf-8-sig", newline="")
    except OSError as e:
        raise DataError(f"{path}: cannot open ({e.strerror})") from e
    with f:
        try:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            if header:
                head = next(reader, None)
                if head is None:
                    raise DataError(f"{path}: empty file (expected a header row)")
                width = len(head)
                index = column_index(path, head, columns)
            else:
                width = None  # header-less files are checked by the highest position we read
                index = {key: int(col) for key, col in columns.items()}
            need = max(index.values()) + 1

            rows: dict[str, list] = {k: [] for k in [*fields, "label"]}
            bad = total = 0
            first_bad: int | None = None
            for lineno, row in enumerate(reader, start=2 if header else 1):
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # blank (trailing) line
                total += 1
                if len(row) < need or (width is not None and len(row) != width):
                    bad += 1
                    first_bad = first_bad or lineno
                    continue
                raw_label = row[index["label"]].strip()
                label: int | float
                if label_type == "str":
                    if raw_label not in label_names:
                        raise DataError(
                            f"{path}:{lineno}: unknown label {raw_label!r} (expected one of {label_names})"
                        )
                    label = label_names.index(raw_label)
                elif label_type == "float":
                    try:
                        label = float(raw_label)
                    except ValueError:
                        raise DataError(f"{path}:{lineno}: label {raw_label!r} is not a number") from None
                    if not math.isfinite(label):
                        raise DataError(f"{path}:{lineno}: label {raw_label!r} is not a finite number")
                else:
                    try:
                        label = int(raw_label)
                    except ValueError:
                        raise DataError(f"{path}:{lineno}: label {raw_label!r} is not an integer id") from None
                    if not 0 <= label < num_labels:
                        raise DataError(f"{path}:{lineno}: label {label} outside 0..{num_labels - 1}")
                for k in fields:
                    rows[k].append(row[index[k]])
                rows["label"].append(label)
        except UnicodeDecodeError as e:
            # the reader decodes in chunks, so its line count is where decoding stopped, roughly
            raise DataError(
                f"{path}: not UTF-8 text near line {reader.line_num + 1} (byte {e.object[e.start:e.start + 1]!r} "
                f"cannot be decoded); GLUE TSVs are UTF-8: re-save it as UTF-8"
            ) from None
        except csv.Error as e:
            raise DataError(f"{path}:{reader.line_num}: not a readable TSV ({e})") from None

    if total == 0:
        raise DataError(f"{path}: no data rows{' (only a header row)' if header else ' (empty file)'}")
    if bad:
        if bad > _MAX_BAD_ROW_FRACTION * total:
            raise DataError(
                f"{path}: {bad}/{total} rows have the wrong number of fields (first at line {first_bad}); "
                f"not a GLUE {get(task_cfg, 'name')} file?"
            )
        log.warning("%s: skipped %d/%d malformed rows (first at line %d)", path, bad, total, first_bad)
    from datasets import Features, Value

    feats = Features(
        {
            **{k: Value("string") for k in fields},
            "label": Value("float32" if label_type == "float" else "int64"),
        }
    )
    return Dataset.from_dict(rows, features=feats)


# -------------------------------------------------------------------------------------- tokenisation
def _content_hash(ds: Dataset, columns: list[str]) -> str:
    """Hash of the data itself (in-memory datasets get random fingerprints, so those can't key a cache)."""
    if getattr(ds, "_indices", None) is not None:
        ds = ds.flatten_indices()
    h = hashlib.sha256()
    h.update(str(len(ds)).encode())
    for col in columns:
        h.update(b"\x00" + col.encode() + b"\x00")
        for chunk in ds.data.column(col).chunks:
            h.update(json.dumps(chunk.to_pylist(), ensure_ascii=False).encode())
    return h.hexdigest()


def _tokenizer_hash(tokenizer: Any) -> str:
    h = hashlib.sha256()
    h.update(type(tokenizer).__name__.encode())
    h.update(str(getattr(tokenizer, "name_or_path", "")).encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        # vocab + normaliser + post-processor, i.e. the exact ids. Truncation/padding are left out: the
        # backend records the settings of its last call, which would change the key after any use.
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
        h.update(json.dumps(spec, sort_keys=True).encode())
    else:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    return h.hexdigest()


# A split's fingerprint -> the fingerprint of the same split without a student's own ids (student=bilstm): what
# the teacher reads is the same, so its stored outputs (teacher_outputs) are keyed by this one.
TEACHER_FINGERPRINTS: dict[str, str] = {}


def teacher_fingerprint(ds: Dataset) -> str:
    """The fingerprint of what the teacher reads of the tokenised split `ds`."""
    return TEACHER_FINGERPRINTS.get(ds._fingerprint, ds._fingerprint)


def tokenize_splits(
    raw: Mapping[str, Dataset], tokenizer: Any, task_cfg: Any, cache_dir: str | os.PathLike, words: Any = None
) -> dict[str, Dataset]:
    """Tokenise every split (truncate to ``task.max_seq_length``, no padding), add ``idx`` and ``labels``.

    Output columns: input_ids, attention_mask, [token_type_ids], labels, idx (row index in its split), and
    with ``words`` (a student's own tokenizer, words.WordVocab) ``student_ids_<i>`` per text field i.
    Results are cached under ``cache_dir/tokenized/`` keyed by (data content, tokenizer, max length), so
    a second call with the same inputs loads the arrow file instead of tokenising again.
    """
    fields = list(get(task_cfg, "text_fields"))
    max_len = int(get(task_cfg, "max_seq_length", 128))
    regression = bool(get(task_cfg, "is_regression", False))
    tok_hash = _tokenizer_hash(tokenizer)
    out_dir = Path(cache_dir) / "tokenized"
    out_dir.mkdir(parents=True, exist_ok=True)
    task_name = str(get(task_cfg, "name", "task"))

    def encode(batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        texts = [batch[f] for f in fields]
        enc = tokenizer(*texts, truncation=True, max_length=max_len, padding=False)
        result = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
        result["labels"] = [float(y) if regression else int(y) for y in batch["label"]]
        result["idx"] = list(indices)
        if words is not None:  # the student's word ids, next to the teacher's word pieces of the same rows
            for i, f in enumerate(fields):
                result[f"{STUDENT_IDS}{i}"] = [words.encode(str(t), max_len) for t in batch[f]]
        return result

    out: dict[str, Dataset] = {}
    for split, ds in raw.items():
        parts = [_TOKENIZE_VERSION, _content_hash(ds, [*fields, "label"]), tok_hash, str(max_len), ",".join(fields)]
        key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]
        if words is not None:  # the student's ids make another split; the teacher's columns are the same
            teacher_key, key = key, hashlib.sha256("|".join([*parts, words.digest]).encode()).hexdigest()[:20]
            TEACHER_FINGERPRINTS[key] = teacher_key
        cache_file = out_dir / f"{task_name}-{split}-{key}.arrow"
        with writing(cache_file, "no tokenised split was stored: the next run tokenises it again"):
            out[split] = ds.map(
                encode,
                batched=True,
                with_indices=True,
                remove_columns=ds.column_names,
                cache_file_name=str(cache_file),
                load_from_cache_file=True,
                new_fingerprint=key,
                desc=f"tokenize {task_name}/{split}",
            )
    return out


# --------------------------------------------------------------------------------------------- batches
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


# ------------------------------------------------------------------------------------------- TaskData
@dataclass
class TaskData:
    train: Dataset  # what the student trains on (the augmented split under task.augment)
    dev: dict[str, Dataset]
    label_names: list[str]
    num_labels: int
    is_regression: bool
    teacher_train: Dataset | None = None  # the original training split, the teacher's (None: `train`)

    @property
    def train_size(self) -> int:
        """Training examples actually used (after task.max_train_samples)."""
        return len(self.train)

    @property
    def dev_sizes(self) -> dict[str, int]:
        """Examples per dev split actually evaluated (after task.max_dev_samples)."""
        return {name: len(ds) for name, ds in self.dev.items()}


def load_task_data(task_cfg: Any, tokenizer: Any, cache_dir: str | os.PathLike,
                   augment: Callable[[Dataset], Dataset] | None = None,
                   words: Callable[[Dataset], Any] | None = None) -> TaskData:
    """load_raw + tokenize_splits, packaged for the training loop. `augment`: the raw training split -> the
    split the student trains on (augment.py); the teacher keeps the original. `words`: the raw training
    split -> a student's own tokenizer (words.WordVocab), whose ids every split then carries too."""
    raw = load_raw(task_cfg)
    vocab = words(raw["train"]) if words is not None else None
    if augment is not None:
        raw = {**raw, "train_augmented": augment(raw["train"])}
    tok = tokenize_splits(raw, tokenizer, task_cfg, cache_dir, words=vocab)
    return TaskData(
        train=tok.get("train_augmented", tok["train"]),
        teacher_train=tok["train"],
        dev={name: tok[name] for name in dev_splits(task_cfg)},
        label_names=[str(x) for x in (get(task_cfg, "label_names") or [])],
        num_labels=int(get(task_cfg, "num_labels")),
        is_regression=bool(get(task_cfg, "is_regression", False)),
    )
