"""The teacher-output store's `hidden` mode for a decoder LM (procedure=causal_lm with `procedure.teacher_logits=hidden`):
the teacher's last hidden state (after its final norm: what its LM head reads) at every position of every training
sequence, `hidden.npy` (N, L, H) in the dtype the run computes in (bfloat16 under precision=bf16, kept as its raw 16
bits since numpy has no bfloat16: 2H bytes a position; float32 otherwise: 4H), and the row checks. At train time the
teacher's own LM head makes the logits from them in the student's chunks (objectives/chunked.py), so every
next-token term reads the teacher's exact full distribution at a store cost of H values a position, where the
logits would be V. Kept, checked and built as output_store.py keeps the others (its module docstring: the key, the
lock, `.partial` + rename, checksums, row checks, set aside when damaged).
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from distill_sweep.data.decoder import CausalData
from distill_sweep.models.families import family_of_model
from distill_sweep.records import hashing
from distill_sweep.records.disk import writing
from distill_sweep.teachers.output_plan import HIDDEN_TAG as HIDDEN
from distill_sweep.teachers.output_plan import store_root
from distill_sweep.teachers.output_store import (
    BUILD_KEPT,
    STORE_VERSION,
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

HIDDEN_ARRAYS = ("hidden", "rowcheck")
# the stored form of each compute dtype: numpy's dtype of the file, and the torch dtype its bits are read back as
STORED = {torch.float32: ("float32", torch.float32), torch.bfloat16: ("uint16", torch.bfloat16),
          torch.float16: ("float16", torch.float16)}


class HiddenOutputs:
    """An opened hidden store: the teacher's last hidden states (N, L, H) memory-mapped, their torch dtype, and the
    row checks (N, 2) on the job's device. A pack's members gather the same batch one after the other: the last
    batch read is kept (on the host), so the members of a pack read each batch from the store once."""

    def __init__(self, path: Path, key: str, hidden: np.ndarray, dtype: torch.dtype, rowcheck: Tensor,
                 built: bool) -> None:
        self.path, self.key, self.built, self.mode = path, key, built, HIDDEN
        self.hidden, self.dtype, self.rowcheck = hidden, dtype, rowcheck

    def gather(self, batch: dict[str, Tensor]) -> Tensor:
        """The batch's rows cut to its width, on its device, (B, S, H) in the stored dtype; StoreMismatchError if a
        row is not the stored one."""
        check_rows(self.path, len(self.hidden), self.rowcheck, batch)
        idx = batch["idx"]
        rows, width = idx.cpu().numpy(), int(batch["input_ids"].shape[1])
        return _read(self, rows, width).to(batch["input_ids"].device)

    def bytes_per_token(self) -> int:
        """Per stored position: H values in the stored dtype."""
        return int(self.hidden.dtype.itemsize) * int(self.hidden.shape[-1])

    def bytes_per_trained_token(self, targets: int) -> float:
        """The store's size over the `targets` positions a student trains on (every position of every row is
        stored at the split's width: prompts and padding too)."""
        return float(self.hidden.nbytes) / max(1, targets)

    def describe(self) -> dict[str, Any]:
        return {"key": self.key, "path": str(self.path), "built": self.built, "store_mode": HIDDEN,
                "dtype": str(self.dtype).removeprefix("torch."), "bytes_per_token": self.bytes_per_token()}


# the last batch read: (path, rows, width) and its host tensor; one entry (a pack's members read in turn)
_LAST: dict[str, Any] = {}
READS: Counter[str] = Counter()  # batches read from each store's file, by path (tests count a pack's reads)


def _read(store: HiddenOutputs, rows: np.ndarray, width: int) -> Tensor:
    at = (str(store.path), rows.tobytes(), width)
    if _LAST.get("at") != at:
        raw = torch.from_numpy(np.ascontiguousarray(store.hidden[rows, :width]))
        _LAST.update(at=at, tensor=raw.view(store.dtype) if raw.dtype != store.dtype else raw)
        READS[str(store.path)] += 1
    return _LAST["tensor"]


def hidden_key(model: nn.Module, data: CausalData, precision: str, dtype: torch.dtype) -> dict[str, Any]:
    """What a hidden store's numbers are a function of: the teacher's weights, the sequences' content key, the
    precision and the stored dtype (another is another store), and what the hidden state is (after the final
    norm)."""
    config = getattr(model, "config", None)
    return {"version": STORE_VERSION, "mode": HIDDEN, "teacher": weights_digest(model),
            "attn_implementation": str(getattr(config, "_attn_implementation", None)),
            "train": {"fingerprint": data.key, "rows": len(data.train)}, "precision": precision,
            "values": "last hidden state, after the final norm", "dtype": STORED[dtype][0],
            "torch_dtype": str(dtype).removeprefix("torch."), "arrays": list(HIDDEN_ARRAYS)}


def hidden_store_path(cache_dir: Path, data_name: str, group: str, digest: str) -> Path:
    return store_root(cache_dir, data_name) / f"{group}-{HIDDEN}-{digest}"


def stored_dtype(model: nn.Module, precision: str) -> torch.dtype:
    """The dtype the teacher's hidden states come out in (the run's compute dtype): bfloat16 under bf16."""
    return torch.bfloat16 if precision == "bf16" else next(model.parameters()).dtype


def open_or_build_hidden(model: nn.Module, data: CausalData, *, cache_dir: Path, group: str, precision: str,
                         device: torch.device) -> HiddenOutputs:
    """The hidden store of `model` on `data`'s training sequences, built now if no job built it before (one build
    per key; a damaged one set aside and built again). `group`: output_plan.decoder_group of the job."""
    family_of_model(model)  # a TypeError for a model of no known family, before any work
    dtype = stored_dtype(model, precision)
    if dtype not in STORED:
        raise ValueError(f"a hidden store keeps float32, bfloat16 or float16 states, not {dtype}")
    key = hidden_key(model, data, precision, dtype)
    digest = hashing.digest(key)[:16]
    path = hidden_store_path(cache_dir, data.name, group, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    built = _open(path, key, lambda: _in_partial(path, lambda partial: _write_hidden(
        model, data, path, partial, key, dtype, device=device, precision=precision)))
    hidden, rowcheck = (np.load(path / f"{name}.npy", mmap_mode="r") for name in HIDDEN_ARRAYS)
    return HiddenOutputs(path, digest, hidden, dtype, torch.from_numpy(np.array(rowcheck)).to(device), built)


def last_hidden(model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
    """The model's last hidden states (B, S, H): the last of `output_hidden_states`, which in the families here
    (Llama-shaped, GPT-2) is after the final norm, what the LM head reads (tests/unit/teachers/test_hidden_store.py
    checks head(them) is the model's logits)."""
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True,
                logits_to_keep=1, return_dict=True)
    return out.hidden_states[-1]


@torch.inference_mode()
def _write_hidden(model: nn.Module, data: CausalData, path: Path, partial: Path, key: dict[str, Any],
                  dtype: torch.dtype, *, device: torch.device, precision: str) -> None:
    start = time.perf_counter()
    shutil.rmtree(partial, ignore_errors=True)  # what a killed build left
    with writing(partial, BUILD_KEPT):
        partial.mkdir(parents=True)
    n, width = data.train.ids.shape
    size = int(model.get_output_embeddings().weight.shape[1])
    # new files read as zeros: positions past a row's length stay 0 (never read: they predict nothing)
    hidden = _array(partial / "hidden.npy", np.dtype(STORED[dtype][0]), (n, width, size))
    rowcheck = _array(partial / "rowcheck.npy", np.int64, (n, 2))
    was_training = model.training
    model.eval()
    try:
        for begin in range(0, n, TOPK_BATCH):
            rows = np.arange(begin, min(begin + TOPK_BATCH, n))
            batch = to_device(data.batch(data.train, rows), device)
            w = int(batch["input_ids"].shape[1])
            with autocast(device, precision):
                states = last_hidden(model, batch)
            states = states.to(dtype).cpu()
            hidden[rows, :w] = (states.view(torch.uint16) if dtype == torch.bfloat16 else states).numpy()
            rowcheck[rows] = row_check(batch["input_ids"], batch["attention_mask"]).cpu().numpy()
    finally:
        model.train(was_training)
    arrays = {"hidden": hidden, "rowcheck": rowcheck}
    del hidden, rowcheck
    _finish(partial, path, key, arrays, checksummed=HIDDEN_ARRAYS, device=device, start=start)
