"""The teacher-output store's sparse modes for a decoder LM (procedure=causal_lm with `procedure.teacher_top_k`): k
entries per position of every training sequence, `top_k` (the teacher's k most likely next tokens) or `sampled` (k
tokens drawn with replacement from its next-token distribution), each a token id and the teacher's log-probability
of it at T = 1 (`indices.npy` uint16 where the vocabulary fits in 16 bits, else int32; `values.npy` float16; both
(N, L, k): 4k bytes a position, 6k for larger vocabularies). Kept, checked and built as output_store.py keeps the
dense logits (its module docstring: the key, the lock, `.partial` + rename, checksums, row checks, set aside when
damaged); with teacher.engine=vllm the entries come from a vLLM engine in its own process (vllm_engine.py) and the
key names it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from distill_sweep.data.decoder import CausalData
from distill_sweep.records import hashing
from distill_sweep.records.disk import writing
from distill_sweep.teachers import vllm_engine
from distill_sweep.teachers.engine import Engine
from distill_sweep.teachers.output_plan import store_root, topk_tag
from distill_sweep.teachers.output_store import (
    BUILD_KEPT,
    SAMPLE_SEED,
    SAMPLED,
    SPARSE_MODES,
    STORE_VERSION,
    TOP_K,
    TOPK_ARRAYS,
    TOPK_BATCH,
    _array,
    _finish,
    _in_partial,
    _open,
    check_rows,
    row_check,
    weights_digest,
)
from distill_sweep.training.loop import autocast, to_device


def topk_dtypes(vocab: int) -> dict[str, str]:
    """The stored form of a sparse store's entries (in its key and meta.json: another form is another store):
    log-probabilities (<= 0, where float16 keeps about 3 significant digits) and ids in 16 bits where the
    vocabulary fits."""
    return {"values": "float16", "indices": "uint16" if vocab <= 1 << 16 else "int32"}


def bytes_per_token(dtypes: dict[str, str], k: int) -> int:
    """Bytes a sparse store spends per stored position: k entries of a value and an id."""
    return k * (np.dtype(dtypes["values"]).itemsize + np.dtype(dtypes["indices"]).itemsize)


def sparse_entries(logits: Tensor, k: int, mode: str, generator: torch.Generator | None = None
                   ) -> tuple[Tensor, Tensor]:
    """What a sparse store keeps of next-token `logits` (..., V): (log-probabilities at T = 1, ids), each (..., k).
    top_k: the k most likely tokens; sampled: k draws with replacement from softmax(logits), in draw order."""
    logp = torch.log_softmax(logits.float(), -1)
    if mode == TOP_K:
        top = logp.topk(k, dim=-1)
        return top.values, top.indices
    flat = logp.reshape(-1, logp.shape[-1]).exp()
    ids = torch.multinomial(flat, k, replacement=True, generator=generator).reshape(*logp.shape[:-1], k)
    return logp.gather(-1, ids), ids


class TopKOutputs:
    """An opened sparse store (`mode` top_k or sampled): for every training sequence and position k token ids
    (`indices`) and the teacher's log-probabilities of them (`values`), (N, L, k) memory-mapped, and the row
    checks (N, 2) on the job's device."""

    def __init__(self, path: Path, key: str, values: np.ndarray, indices: np.ndarray, rowcheck: Tensor,
                 built: bool, mode: str = TOP_K) -> None:
        self.path, self.key, self.built, self.mode = path, key, built, mode
        self.values, self.indices, self.rowcheck = values, indices, rowcheck

    def gather(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """The batch's rows cut to its width, on its device: (values float32, indices int64), each (B, S, k);
        StoreMismatchError if a row is not the stored one."""
        check_rows(self.path, len(self.values), self.rowcheck, batch)
        idx = batch["idx"]
        rows, width, device = idx.cpu().numpy(), int(batch["input_ids"].shape[1]), batch["input_ids"].device
        values = torch.from_numpy(np.asarray(self.values[rows, :width], dtype=np.float32))
        indices = torch.from_numpy(np.asarray(self.indices[rows, :width], dtype=np.int64))
        return values.to(device), indices.to(device)

    def bytes_per_token(self) -> int:
        """Per stored position: k values and k ids."""
        return int(self.values.dtype.itemsize + self.indices.dtype.itemsize) * int(self.values.shape[-1])

    def bytes_per_trained_token(self, targets: int) -> float:
        """The store's size over the `targets` positions a student trains on: every position of every row is
        stored at the split's width (prompts and padding too), so for instruction data this is many times
        bytes_per_token."""
        return float(self.values.nbytes + self.indices.nbytes) / max(1, targets)

    def describe(self) -> dict[str, Any]:
        return {"key": self.key, "path": str(self.path), "built": self.built, "store_mode": self.mode,
                "bytes_per_token": self.bytes_per_token()}


def topk_key(model: nn.Module, data: CausalData, k: int, precision: str, mode: str = TOP_K,
             engine: Engine | None = None) -> dict[str, Any]:
    """What a sparse store's numbers are a function of: the teacher's weights, the sequences' content key, k, the
    mode (and a sampled store's seed), the precision, the stored form (log-probabilities, dtypes), so that
    another form is another store, and the vLLM engine that computed them (teacher.engine=vllm; no entry for
    transformers': the stores made before the key had one)."""
    config = getattr(model, "config", None)
    key = {"version": STORE_VERSION, "mode": mode, "teacher": weights_digest(model),
           "attn_implementation": str(getattr(config, "_attn_implementation", None)),
           "train": {"fingerprint": data.key, "rows": len(data.train)}, "precision": precision, "k": int(k),
           "values": "log_softmax", "dtypes": topk_dtypes(_vocab(model))}
    if mode == SAMPLED:
        key["seed"] = SAMPLE_SEED
    if engine is not None:
        key["engine"] = engine.describe()
    return key


def _vocab(model: nn.Module) -> int:
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return int(head.weight.shape[0]) if head is not None else int(model.config.vocab_size)  # type: ignore[union-attr]


def topk_store_path(cache_dir: Path, data_name: str, group: str, k: int, digest: str, mode: str = TOP_K) -> Path:
    return store_root(cache_dir, data_name) / f"{group}-{topk_tag(k, mode)}-{digest}"


def open_or_build_topk(model: nn.Module, data: CausalData, k: int, *, cache_dir: Path, group: str,
                       precision: str, device: torch.device, mode: str = TOP_K,
                       engine: Engine | None = None) -> TopKOutputs:
    """The sparse store (`mode`: top_k or sampled) of `model` on `data`'s training sequences, built now if no job
    built it before (at most one build per key whatever the number of concurrent jobs; a damaged one set aside and
    built again). `group`: output_plan.decoder_group of the job, the prefix the sweeper looks for; `engine`: the
    vLLM engine that computes the entries (None: transformers, in this process)."""
    if mode not in SPARSE_MODES:
        raise ValueError(f"a sparse store's mode is one of {SPARSE_MODES}, not {mode!r}")
    key = topk_key(model, data, k, precision, mode, engine)
    digest = hashing.digest(key)[:16]
    path = topk_store_path(cache_dir, data.name, group, k, digest, mode)
    path.parent.mkdir(parents=True, exist_ok=True)
    built = _open(path, key, lambda: _in_partial(path, lambda partial: _write_topk(
        model, data, k, path, partial, key, device=device, precision=precision, engine=engine)))
    values, indices, rowcheck = (np.load(path / f"{name}.npy", mmap_mode="r") for name in TOPK_ARRAYS)
    return TopKOutputs(path, digest, values, indices, torch.from_numpy(np.array(rowcheck)).to(device), built, mode)


@torch.inference_mode()
def _write_topk(model: nn.Module, data: CausalData, k: int, path: Path, partial: Path, key: dict[str, Any], *,
                device: torch.device, precision: str, engine: Engine | None = None) -> None:
    start = time.perf_counter()
    shutil.rmtree(partial, ignore_errors=True)  # what a killed build left
    with writing(partial, BUILD_KEPT):
        partial.mkdir(parents=True)
    n, width = data.train.ids.shape
    dtypes = key["dtypes"]
    # new files read as zeros: positions past a row's length stay 0 (never gathered: they are padding)
    values = _array(partial / "values.npy", np.dtype(dtypes["values"]), (n, width, k))
    indices = _array(partial / "indices.npy", np.dtype(dtypes["indices"]), (n, width, k))
    rowcheck = _array(partial / "rowcheck.npy", np.int64, (n, 2))
    generator = torch.Generator(device).manual_seed(key.get("seed", 0))
    engine_rows = None
    if engine is not None:  # every row in one worker run; the row checks are computed here, as below
        engine_rows = vllm_engine.sparse_entries(engine, model, data.train.ids, data.train.lengths, k, key["mode"],
                                                 seed=key.get("seed", 0), precision=precision,
                                                 work=Path(f"{path}.engine"), vocab=_vocab(model))
    was_training = model.training
    model.eval()
    try:
        for begin in range(0, n, TOPK_BATCH):
            rows = np.arange(begin, min(begin + TOPK_BATCH, n))
            batch = to_device(data.batch(data.train, rows), device)
            w = int(batch["input_ids"].shape[1])
            if engine_rows is not None:
                values[rows, :w] = engine_rows[0][rows, :w].astype(values.dtype)
                indices[rows, :w] = engine_rows[1][rows, :w].astype(indices.dtype)
            else:
                with autocast(device, precision):
                    logits = model(input_ids=batch["input_ids"],
                                   attention_mask=batch["attention_mask"]).logits.float()
                logp, ids = sparse_entries(logits, k, key["mode"], generator)
                values[rows, :w] = logp.cpu().numpy().astype(values.dtype)
                indices[rows, :w] = ids.cpu().numpy().astype(indices.dtype)
            rowcheck[rows] = row_check(batch["input_ids"], batch["attention_mask"]).cpu().numpy()
    finally:
        model.train(was_training)
    arrays = {"values": values, "indices": indices, "rowcheck": rowcheck}
    del values, indices, rowcheck
    _finish(partial, path, key, arrays, checksummed=TOPK_ARRAYS, device=device, start=start)
