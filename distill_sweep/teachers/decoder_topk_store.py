"""The teacher-output store for decoder LMs: the teacher's top-k next-token logits, values and indices.

`procedure.teacher_top_k: k` keeps, for every training sequence and position, the teacher's k largest logits
(`values.npy`, float32) and their token ids (`indices.npy`, int32), both (N, L, k) memory-mapped, in
`cache_dir/causal_teacher_outputs/<teacher>-<key>/`. The key is a sha256 of the teacher's weights (every
tensor: teacher_outputs.weights_digest), the data's cache key, k and the precision; seed, objective, init and
student are not in it, so every job of a sweep distilling that teacher on that data reads one store, and the
teacher does not run while they train. Built into a temporary directory and renamed into place; `meta.json`
holds the shape. A batch's rows are gathered by its `idx`. The store grows as N x L x k, so k stays small
(tens of tokens, as DistillKit and GOLD use).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from distill_sweep.data.decoder import CausalData
from distill_sweep.teachers.output_store import weights_digest
from distill_sweep.training.loop import autocast, model_inputs, to_device

BATCH = 32  # sequences per teacher forward while building


@dataclass
class TopKStore:
    path: Path
    key: str
    values: np.ndarray  # (N, L, k) float32
    indices: np.ndarray  # (N, L, k) int32
    built: bool

    def gather(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """The batch's rows, cut to its width, on its device: (values, indices), each (B, S, k)."""
        rows = batch["idx"].cpu().numpy()
        width = int(batch["input_ids"].shape[1])
        device = batch["input_ids"].device
        values = torch.from_numpy(np.asarray(self.values[rows, :width]))
        indices = torch.from_numpy(np.asarray(self.indices[rows, :width], dtype=np.int64))
        return values.to(device), indices.to(device)

    def describe(self) -> dict[str, Any]:
        return {"key": self.key, "path": str(self.path), "built": self.built}


def store_key(teacher: nn.Module, data: CausalData, k: int, precision: str) -> str:
    blob = json.dumps({"weights": weights_digest(teacher), "data": data.info.get("cache_key") or data.info.get("key"),
                       "k": k, "precision": precision, "rows": len(data.train)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def open_or_build_topk(teacher: nn.Module, data: CausalData, k: int, *, cache_dir: Path, device: torch.device,
                       precision: str, group: Any) -> TopKStore:
    """The store of `teacher` on `data`'s training sequences (built first if it is not there)."""
    key = store_key(teacher, data, k, precision)
    name = hashlib.sha256(json.dumps(group, sort_keys=True, default=str).encode()).hexdigest()[:8]
    path = Path(cache_dir) / "causal_teacher_outputs" / f"{name}-{key}"
    built = not (path / "meta.json").exists()
    if built:
        _build(teacher, data, k, path, device, precision)
    return TopKStore(path, key, np.load(path / "values.npy", mmap_mode="r"), np.load(path / "indices.npy", mmap_mode="r"),
                     built)


@torch.no_grad()
def _build(teacher: nn.Module, data: CausalData, k: int, path: Path, device: torch.device, precision: str) -> None:
    n, width = data.train.ids.shape
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        values = np.lib.format.open_memmap(tmp / "values.npy", mode="w+", dtype=np.float32, shape=(n, width, k))
        indices = np.lib.format.open_memmap(tmp / "indices.npy", mode="w+", dtype=np.int32, shape=(n, width, k))
        values[:] = 0.0
        indices[:] = 0
        for start in range(0, n, BATCH):
            rows = np.arange(start, min(start + BATCH, n))
            batch = to_device(data.batch(data.train, rows), device)
            with autocast(device, precision):
                logits = teacher(**model_inputs(batch)).logits.float()
            top = logits.topk(k, dim=-1)
            w = logits.shape[1]
            values[rows, :w] = top.values.cpu().numpy()
            indices[rows, :w] = top.indices.cpu().numpy().astype(np.int32)
        values.flush()
        indices.flush()
        del values, indices
        (tmp / "meta.json").write_text(json.dumps({"rows": int(n), "width": int(width), "k": k}))
        os.replace(tmp, path)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (path / "meta.json").exists():  # not another job's identical copy renamed first: a real failure
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
