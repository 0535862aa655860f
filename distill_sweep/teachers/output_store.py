"""The teacher-output store: a frozen teacher's logits for every training example, computed once and read by
every job that distils from the same teacher on the same data.

In a Table 3 grid 72 jobs per task distil from one fine-tuned teacher; without the store each of them runs
that teacher over the training set at every epoch of every logit-reading stage. The store is

* keyed by content: the teacher's weights (a digest of every tensor), the tokenised training split (its
  content fingerprint and size), the precision and the attention implementation. Seed, objective, init and
  student are not in the key: every job of a task shares one store;
* one array per tensor kind, memory-mapped (`logits.npy` [N, C] float32, `rowcheck.npy` [N, 2] int64),
  never one file per example (torchdistill's per-sample cache was slower than recomputing);
* gathered by the batch's `idx` column, and every gathered row checked against the batch itself
  (`row_check`: two weighted sums of the row's token ids), so a store that does not belong to the data in
  hand fails loudly instead of training on another example's targets;
* built under a file lock into `<key>.partial/` and renamed into place; `meta.json` holds the sha256 of each
  array, checked on every open: a killed build leaves only a `.partial` directory, a damaged store is moved
  aside (`.corrupt-<time>`) with one warning line and built again.

A store has a mode, recorded with each array's dtype and shape in `meta.json`: `logits` (above), or one of a
decoder LM's two sparse modes, `top_k` and `sampled` (k entries per position of every training sequence), which
sparse_store.py builds and reads with this module's machinery (`_open`, `_in_partial`, `_finish`, `row_check`), or
`hidden` (the decoder's last hidden states at every position, hidden_store.py, the same machinery).

It is only used where it is exact (`plan`): a frozen, eval-mode teacher on a fixed tokenised split. On-the-fly
augmentation, dynamic masking or a teacher that trains would make stored outputs wrong; those procedures run
the teacher live, and the record says which path a job took (`teacher_outputs.mode`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from distill_sweep.data.batching import make_loader
from distill_sweep.data.fingerprints import teacher_fingerprint
from distill_sweep.models.capture import run_with_features
from distill_sweep.records import hashing
from distill_sweep.records.disk import reserve, set_aside, writing
from distill_sweep.records.files import write_json_atomic
from distill_sweep.records.locks import waiting_lock
from distill_sweep.teachers.output_plan import META, feature_tag, store_root
from distill_sweep.training.loop import autocast, to_device

log = logging.getLogger("distill_sweep")
STORE_VERSION = 1  # bump when building produces other numbers
# the store's modes: every logit of a classifier; a decoder's k most likely tokens; k tokens drawn from it
LOGITS, TOP_K, SAMPLED = "logits", "top_k", "sampled"
SPARSE_MODES = (TOP_K, SAMPLED)
ARRAYS = ("logits", "rowcheck")
TOPK_ARRAYS = ("values", "indices", "rowcheck")
SAMPLE_SEED = 0  # the draws of a sampled store (in its key): every job reading it sees the same draws
TOPK_BATCH = 32  # sequences per teacher forward while building a top-k store
# what a build that cannot write leaves (_build): its partial directory is removed, other stores are untouched
BUILD_KEPT = "the store was not built and nothing of it is left; the next job that needs it builds it"


class StoreMismatchError(RuntimeError):
    """A batch's rows are not the rows the store was built from."""


# -------------------------------------------------------------------------------------------- row checks
def row_check(input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """(B, 2) int64: two position-weighted sums of each row's real token ids (+1, so id 0 counts).

    The same row gives the same pair whatever its padding; another row almost never does. Exact integer
    arithmetic without overflow: ids < 2^21, weights < 2^20 and at most 2^13 positions keep sums below 2^54.
    """
    pos = torch.arange(input_ids.shape[1], device=input_ids.device, dtype=torch.long)
    weights = torch.stack([(pos * 7919 + 104729) % 1048573 + 1, (pos * pos * 31 + pos * 1009 + 7) % 1048571 + 1])
    ids = (input_ids.long() + 1) * attention_mask.long()  # (B, S)
    return (ids.unsqueeze(1) * weights).sum(-1)


def check_rows(path: Path, stored_rows: int, rowcheck: Tensor, batch: dict[str, Tensor]) -> None:
    """StoreMismatchError unless every row of `batch` is the row the store at `path` (of `stored_rows` rows, their
    checks `rowcheck`) was built from at its index: a store built from other data, or misaligned with it."""
    idx = batch["idx"]
    if idx.numel() and int(idx.max()) >= stored_rows:
        raise StoreMismatchError(f"teacher-output store {path} has {stored_rows} rows and the batch "
                                 f"asks for row {int(idx.max())}: it was built from other data")
    mine = row_check(batch["input_ids"], batch["attention_mask"])
    stored = rowcheck[idx.to(rowcheck.device)].to(mine.device)
    if not torch.equal(mine, stored):
        bad = (mine != stored).any(-1).nonzero().flatten()[:5]
        raise StoreMismatchError(f"teacher-output store {path}: the batch's rows {idx[bad].tolist()} are "
                                 "not the rows it was built from (data changed under it, or misaligned)")


# ------------------------------------------------------------------------------------------------ key
def weights_digest(model: nn.Module) -> str:
    """sha256 over every tensor of the model's state (name, dtype, shape, bytes): the teacher's identity."""
    h = hashlib.sha256(type(model).__name__.encode())
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def store_key(model: nn.Module, train: Any, precision: str, cls_layers: list[int] | None = None) -> dict[str, Any]:
    """What the stored numbers are a function of. `train`: the tokenised training split (its fingerprint is
    the content key data.tokenize_splits gave it, without a student's own ids: the teacher does not read them)."""
    config = getattr(model, "config", None)
    return {
        "version": STORE_VERSION,
        "teacher": weights_digest(model),
        "attn_implementation": str(getattr(config, "_attn_implementation", None)),
        "train": {"fingerprint": teacher_fingerprint(train), "rows": len(train)},
        "precision": precision,
        "features": ["logits", *(f"cls{layer}" for layer in cls_layers or [])],
    }


# ------------------------------------------------------------------------------------------- the store
class TeacherOutputs:
    """An opened store: the logits and row checks on the job's device, gathered by example index; the [CLS]
    states of `cls_layers` (when stored) stay memory-mapped and are gathered on the host."""

    def __init__(self, path: Path, key: str, logits: Tensor, rowcheck: Tensor, built: bool,
                 cls: np.ndarray | None = None, cls_layers: list[int] | None = None) -> None:
        self.path, self.key, self.built = path, key, built
        self.logits, self.rowcheck = logits, rowcheck
        self.cls_array, self.cls_layers = cls, list(cls_layers or [])

    def gather_with_cls(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[int, Tensor]]:
        """The batch's stored logits (rows checked, as `gather`) and {layer: (B, D) [CLS] state}."""
        logits = self.gather(batch)
        rows = self.cls_array[batch["idx"].cpu().numpy()]  # (B, layers, D), one fancy-indexed read
        device = batch["idx"].device
        return logits, {layer: torch.from_numpy(rows[:, i]).to(device) for i, layer in enumerate(self.cls_layers)}

    def gather(self, batch: dict[str, Tensor]) -> Tensor:
        """The stored logits of the batch's rows; StoreMismatchError if a row is not the stored one."""
        check_rows(self.path, len(self.logits), self.rowcheck, batch)
        idx = batch["idx"]
        return self.logits[idx]


def open_or_build(model: nn.Module, train: Any, *, cache_dir: Path, task: str, group: str, precision: str,
                  device: torch.device, batch_size: int, pad_token_id: int, cls_layers: list[int] | None = None
                  ) -> TeacherOutputs:
    """The store of (teacher weights, training split, precision, features), built now if no job built it
    before; at most one build per key whatever the number of concurrent jobs."""
    cls_layers = list(cls_layers or [])
    key = store_key(model, train, precision, cls_layers)
    digest = hashing.digest(key)[:16]
    root = store_root(cache_dir, task)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{group}-{feature_tag(cls_layers)}-{digest}"
    built = _open(path, key, lambda: _build(model, train, path, key, precision=precision, device=device,
                                             batch_size=batch_size, pad_token_id=pad_token_id, cls_layers=cls_layers))
    logits, rowcheck = (np.load(path / f"{name}.npy", mmap_mode="r") for name in ARRAYS)
    cls = np.load(path / "cls.npy", mmap_mode="r") if cls_layers else None
    # logits are a few bytes per example (MNLI: 4.7 MB): the whole array lives on the device
    return TeacherOutputs(path, digest, torch.from_numpy(np.array(logits)).to(device),
                          torch.from_numpy(np.array(rowcheck)).to(device), built, cls, cls_layers)


def _open(path: Path, key: dict[str, Any], build: Callable[[], None]) -> bool:
    """Make sure the finished store `path` of `key` exists (any mode): under its lock, a damaged one set aside,
    a missing one built by `build`. Returns whether this call built it."""
    with waiting_lock(Path(f"{path}.lock"), "another job is building this teacher-output store"):
        if path.exists():
            problem = store_problem(path, key)
            if problem is not None:
                _set_aside(path, problem)
        if path.exists():
            log.info("reusing the teacher-output store %s", path)
            return False
        build()
        return True


def store_problem(path: Path, key: dict[str, Any]) -> str | None:
    """Why the finished store at `path` cannot be used (None if it can): a missing or unreadable meta.json,
    another key, a missing array, or an array whose bytes are not the ones written."""
    try:
        meta = json.loads((path / META).read_text())
    except (OSError, ValueError) as err:
        return f"{META} unreadable ({type(err).__name__})"
    if not isinstance(meta, dict) or meta.get("key") != key:
        return f"{META} describes another teacher or data"
    for name in _arrays(key):
        file = path / f"{name}.npy"
        if not file.is_file():
            return f"{file.name} missing"
        if name == "cls":  # gigabytes for a large task: its size is checked (np.load refuses a short file)
            try:
                shape = np.load(file, mmap_mode="r").shape
            except (OSError, ValueError) as err:
                return f"{file.name} unreadable ({type(err).__name__})"
            if shape[:2] != (meta.get("rows"), len(key["features"]) - 1):
                return f"{file.name} has shape {shape}"
        elif _sha256(file) != (meta.get("sha256") or {}).get(name):
            return f"{file.name} is not the file that was written (checksum differs)"
    return None


def _arrays(key: dict[str, Any]) -> tuple[str, ...]:
    if "arrays" in key:  # a store that names its arrays in its key (the teacher's generations, generations.py)
        return tuple(key["arrays"])
    if key.get("mode") in SPARSE_MODES:
        return TOPK_ARRAYS
    return (*ARRAYS, "cls") if len(key["features"]) > 1 else ARRAYS


@torch.inference_mode()
def _build(model: nn.Module, train: Any, path: Path, key: dict[str, Any], *, precision: str, device: torch.device,
           batch_size: int, pad_token_id: int, cls_layers: list[int]) -> None:
    _in_partial(path, lambda partial: _write(model, train, path, partial, key, precision=precision, device=device,
                                             batch_size=batch_size, pad_token_id=pad_token_id, cls_layers=cls_layers))


def _in_partial(path: Path, write: Callable[[Path], None]) -> None:
    """`write(partial)` fills `<path>.partial` and renames it into place (any mode)."""
    partial = Path(f"{path}.partial")
    try:
        write(partial)
    except Exception:  # a failed build (a full disk) leaves nothing; a kill leaves .partial for the next build
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _array(file: Path, dtype: Any, shape: tuple[int, ...]) -> np.memmap:
    """A new .npy array memory-mapped for writing, its blocks reserved (a full disk: DiskWriteError now, not
    SIGBUS while it is filled)."""
    with writing(file, BUILD_KEPT):
        array = np.lib.format.open_memmap(file, mode="w+", dtype=dtype, shape=shape)
        reserve(file)
    return array


def _write(model: nn.Module, train: Any, path: Path, partial: Path, key: dict[str, Any], *, precision: str,
           device: torch.device, batch_size: int, pad_token_id: int, cls_layers: list[int]) -> None:
    start = time.perf_counter()
    shutil.rmtree(partial, ignore_errors=True)  # what a killed build left
    with writing(partial, BUILD_KEPT):
        partial.mkdir(parents=True)
    loader = make_loader(train, batch_size, shuffle=False, seed=0, pad_token_id=pad_token_id, by_length=True)
    n, logits, rowcheck, cls = len(train), None, None, None
    filled = np.zeros(n, dtype=bool)
    was_training = model.training
    model.eval()
    try:
        for batch in loader:
            batch = to_device(batch, device)
            with autocast(device, precision):
                features = run_with_features(model, batch, hidden=bool(cls_layers), qkv_layers=[])
            out = features.logits.float()
            if logits is None:
                logits = _array(partial / "logits.npy", np.float32, (n, out.shape[-1]))
                rowcheck = _array(partial / "rowcheck.npy", np.int64, (n, 2))
                if cls_layers:
                    width = features.hidden_states[0].shape[-1]
                    cls = _array(partial / "cls.npy", np.float32, (n, len(cls_layers), width))
            idx = batch["idx"].cpu().numpy()
            logits[idx] = out.cpu().numpy()
            if cls is not None:
                cls[idx] = torch.stack([features.hidden_states[layer][:, 0].float() for layer in cls_layers],
                                       dim=1).cpu().numpy()
            rowcheck[idx] = row_check(batch["input_ids"], batch["attention_mask"]).cpu().numpy()
            filled[idx] = True
    finally:
        model.train(was_training)
    if logits is None or not filled.all():
        raise RuntimeError(f"teacher-output store build covered {int(filled.sum())} of {n} training rows")
    arrays = {"logits": logits, "rowcheck": rowcheck, **({"cls": cls} if cls is not None else {})}
    del logits, rowcheck, cls
    _finish(partial, path, key, arrays, checksummed=ARRAYS, device=device, start=start)


def _finish(partial: Path, path: Path, key: dict[str, Any], arrays: dict[str, np.memmap], *,
            checksummed: tuple[str, ...], device: torch.device, start: float) -> None:
    """Flush the filled arrays, write meta.json (the key, the mode, each array's dtype and shape, the sha256 of
    `checksummed`) last, and rename the store into place."""
    described = {}
    for name, array in arrays.items():
        with writing(array.filename, BUILD_KEPT):
            array.flush()
        described[name] = {"dtype": str(array.dtype), "shape": list(array.shape)}
    n = next(iter(described.values()))["shape"][0]
    arrays.clear()  # the memory maps close before the directory is renamed
    meta = {"key": key, "mode": key.get("mode", LOGITS), "arrays": described, "rows": n, "device": str(device),
            "built_at": dt.datetime.now(dt.timezone.utc).isoformat(),
            "build_seconds": round(time.perf_counter() - start, 3),
            "sha256": {name: _sha256(partial / f"{name}.npy") for name in checksummed}}
    write_json_atomic(partial / META, meta)
    with writing(path, BUILD_KEPT):
        os.replace(partial, path)
    log.info("built the teacher-output store %s (%d rows, %.1fs)", path, n, meta["build_seconds"])


def _sha256(file: Path) -> str:
    h = hashlib.sha256()
    with open(file, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _set_aside(path: Path, problem: str) -> None:
    aside = set_aside(path)
    log.warning("teacher-output store %s cannot be used (%s): moved it to %s, building it again", path, problem,
                aside)
