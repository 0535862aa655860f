"""Task data: GLUE from the hub or from the original GLUE TSV files, the toy task; tokenisation (batching:
batching.py).

Every source ends in the same shape: ``{"train": Dataset, <dev split name>: Dataset, ...}`` with the HF
``nyu-mll/glue`` column names (the task's text fields) plus an integer ``label`` whose ids follow
``task.label_names`` (float for regression), so the rest of the code never knows where data came from.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset

from distill_sweep.config.schema import TaskSettings
from distill_sweep.data.batching import STUDENT_IDS
from distill_sweep.data.fingerprints import TEACHER_FINGERPRINTS, content_hash, tokenizer_hash
from distill_sweep.data.task_files import (
    dev_splits,
    read_rows,
    tsv_paths,
    tsv_subdir,
)
from distill_sweep.data.toy import generate_toy
from distill_sweep.data.unknown_tokens import SAMPLE_ROWS, warn_if_unreadable
from distill_sweep.errors import ConfigError, DataError, DiskWriteError
from distill_sweep.models.hub import go_offline_if_hub_unreachable, honour_offline_env
from distill_sweep.records.disk import set_aside, writing

log = logging.getLogger(__name__)

# Bump when tokenisation output changes, so old cache files are never reused.
_TOKENIZE_VERSION = "1"


# ------------------------------------------------------------------------------------------- loading
def load_raw(task_cfg: TaskSettings) -> dict[str, Dataset]:
    """The task's train split and every dev split, columns = text fields + ``label``.

    Sources: ``toy`` (generated), ``glue`` with ``data_dir`` (original GLUE TSVs), ``glue`` without it
    (``datasets.load_dataset(hub_id, hub_config)``). Raises DataError for unreachable/missing/malformed data.
    ``task.max_train_samples`` / ``task.max_dev_samples`` then cut the splits to seeded subsets.
    """
    return _subset_splits(_load_source(task_cfg), task_cfg)


def _load_source(task_cfg: TaskSettings) -> dict[str, Dataset]:
    source = task_cfg.source
    if source == "toy":
        recipe = task_cfg.recipe
        splits = generate_toy(3000 if recipe.num_train is None else recipe.num_train,
                              500 if recipe.num_dev is None else recipe.num_dev, recipe.seed or 0)
        out = {"train": splits["train"]}
        for name in dev_splits(task_cfg):
            out[name] = splits["validation"]
        return out
    if source != "glue":
        raise ConfigError(f"task.source must be 'glue' or 'toy', got {source!r}")
    if task_cfg.data_dir:
        return _load_tsv(task_cfg)
    return _load_hub(task_cfg)


# ------------------------------------------------------------------------------------- pilot subsets
def _subset_splits(raw: dict[str, Dataset], task_cfg: TaskSettings) -> dict[str, Dataset]:
    # The subset depends on subset_seed alone, never on the training seed: every seed of a pilot sweep
    # trains and evaluates on the same examples.
    max_train, max_dev, seed = task_cfg.max_train_samples, task_cfg.max_dev_samples, task_cfg.subset_seed
    out = {}
    for split, ds in raw.items():
        limit = max_train if split == "train" else max_dev
        if limit is None or limit >= len(ds):
            out[split] = ds
            continue
        keep = np.sort(np.random.default_rng(seed).permutation(len(ds))[:limit])
        out[split] = ds.select(keep.tolist())
        log.info("task %s: %s subset of %d/%d examples (subset_seed %d)", task_cfg.name, split, limit,
                 len(ds), seed)
    return out


def _load_hub(task_cfg: TaskSettings) -> dict[str, Dataset]:
    import datasets

    hub_id, hub_config = task_cfg.hub_id, task_cfg.hub_config
    name = task_cfg.name
    unreachable = go_offline_if_hub_unreachable()
    try:
        with honour_offline_env():
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
    fields = list(task_cfg.text_fields)
    regression = bool(task_cfg.is_regression)
    label_names = list(task_cfg.label_names or [])
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


def _check_labels(labels: list, task_cfg: TaskSettings, where: str) -> None:
    if bool(task_cfg.is_regression):
        return
    n = int(task_cfg.num_labels)
    bad = sorted({y for y in labels if not (0 <= int(y) < n)})
    if bad:
        raise DataError(f"{where}: label ids {bad[:5]} outside 0..{n - 1} (unlabelled test split?)")


def _load_tsv(task_cfg: TaskSettings) -> dict[str, Dataset]:
    return {split: read_glue_tsv(path, task_cfg) for split, path in tsv_paths(task_cfg).items()}


def read_glue_tsv(path: str | os.PathLike, task_cfg: TaskSettings) -> Dataset:
    """Read one original GLUE TSV into the HF column layout (text fields + ``label``): the rows as
    task_files.read_rows parses them (its quirks: no quote processing, a BOM, header-less files, string labels,
    a few malformed rows skipped and counted)."""
    path = Path(path)
    parsed = read_rows(path, task_cfg)
    if parsed.bad:
        log.warning("%s: skipped %d/%d malformed rows (first at line %d)", path, parsed.bad, parsed.total,
                    parsed.first_bad)
    from datasets import Features, Value

    feats = Features(
        {
            **{k: Value("string") for k in task_cfg.text_fields},
            "label": Value("float32" if task_cfg.tsv is not None and task_cfg.tsv.label_type == "float" else "int64"),
        }
    )
    return Dataset.from_dict(parsed.rows, features=feats)


def tokenize_splits(
    raw: Mapping[str, Dataset], tokenizer: Any, task_cfg: TaskSettings, cache_dir: str | os.PathLike, words: Any = None
) -> dict[str, Dataset]:
    """Tokenise every split (truncate to ``task.max_seq_length``, no padding), add ``idx`` and ``labels``.

    Output columns: input_ids, attention_mask, [token_type_ids], labels, idx (row index in its split), and
    with ``words`` (a student's own tokenizer, words.WordVocab) ``student_ids_<i>`` per text field i.
    Results are cached under ``cache_dir/tokenized/`` keyed by (data content, tokenizer, max length), so
    a second call with the same inputs loads the arrow file instead of tokenising again.
    """
    fields = list(task_cfg.text_fields)
    max_len = int(task_cfg.max_seq_length)
    regression = bool(task_cfg.is_regression)
    tok_hash = tokenizer_hash(tokenizer)
    out_dir = Path(cache_dir) / "tokenized"
    out_dir.mkdir(parents=True, exist_ok=True)
    task_name = str(task_cfg.name)

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
        parts = [_TOKENIZE_VERSION, content_hash(ds, [*fields, "label"]), tok_hash, str(max_len), ",".join(fields)]
        key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]
        if words is not None:  # the student's ids make another split; the teacher's columns are the same
            teacher_key, key = key, hashlib.sha256("|".join([*parts, words.digest]).encode()).hexdigest()[:20]
            TEACHER_FINGERPRINTS[key] = teacher_key
        cache_file = out_dir / f"{task_name}-{split}-{key}.arrow"

        def tokenized(ds: Dataset = ds, cache_file: Path = cache_file, key: str = key, split: str = split) -> Dataset:
            with writing(cache_file, "no tokenised split was stored: the next run tokenises it again"):
                return ds.map(encode, batched=True, with_indices=True, remove_columns=ds.column_names,
                              cache_file_name=str(cache_file), load_from_cache_file=True, new_fingerprint=key,
                              desc=f"tokenize {task_name}/{split}")

        cached = cache_file.exists()
        try:
            out[split] = tokenized()
        except (OSError, ValueError, DiskWriteError) as err:
            if not cached:
                raise
            # a damaged cached split (a partial copy, a crash mid-write): set aside, tokenised again
            aside = set_aside(cache_file)
            log.warning("the tokenised split %s cannot be read (%s): moved it to %s, tokenising it again",
                        cache_file, str(err.__cause__ or err).splitlines()[0][:160], aside)
            out[split] = tokenized()
    return out


# ------------------------------------------------------------------------------------------- TaskData
@dataclass
class TaskData:
    train: Dataset  # what the student trains on (the augmented split under task.augment)
    dev: dict[str, Dataset]
    label_names: list[str]
    num_labels: int
    is_regression: bool
    teacher_train: Dataset | None = None  # the original training split, the teacher's (None: `train`)
    # a tuning trial's: the whole training split its `train` rows were taken from (data/holdout.py); the
    # teacher-output store is built from it, so trials and grid jobs share one store
    tuning_from: Dataset | None = None
    # a tuning trial's: the reported dev splits its `dev` (the holdout) replaced; read by the teacher's fine-tuning
    # alone, whose cached score every job of its cache key reads as the teacher's dev score (data/holdout.py)
    reported_dev: dict[str, Dataset] | None = None

    @property
    def train_size(self) -> int:
        """Training examples actually used (after task.max_train_samples)."""
        return len(self.train)

    @property
    def dev_sizes(self) -> dict[str, int]:
        """Examples per dev split actually evaluated (after task.max_dev_samples)."""
        return {name: len(ds) for name, ds in self.dev.items()}


def load_task_data(task_cfg: TaskSettings, tokenizer: Any, cache_dir: str | os.PathLike,
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
    warn_if_unreadable(tok["train"]["input_ids"][:SAMPLE_ROWS], tokenizer, f"{task_cfg.name}'s training text")
    return TaskData(
        train=tok.get("train_augmented", tok["train"]),
        teacher_train=tok["train"],
        dev={name: tok[name] for name in dev_splits(task_cfg)},
        label_names=[str(x) for x in (task_cfg.label_names or [])],
        num_labels=int(task_cfg.num_labels),
        is_regression=bool(task_cfg.is_regression),
    )
