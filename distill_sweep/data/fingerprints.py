"""Content fingerprints that key the data caches: a split's rows, a tokenizer's exact ids, and what the teacher
reads of a tokenised split."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from datasets import Dataset


def content_hash(ds: Dataset, columns: list[str]) -> str:
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


def tokenizer_hash(tokenizer: Any) -> str:
    """What gives the tokenizer's ids, never where it was loaded from: a cache holding a tokenizer (the toy one
    lives in cache_dir) keeps its keys when the directory moves."""
    h = hashlib.sha256()
    h.update(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        # vocab + normaliser + post-processor, i.e. the exact ids. Truncation/padding are left out: the
        # backend records the settings of its last call, which would change the key after any use.
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
        h.update(json.dumps(spec, sort_keys=True).encode())
    else:  # a slow tokenizer: its vocabulary and the options that change its ids (not its files' paths)
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
        options = {k: v for k, v in getattr(tokenizer, "init_kwargs", {}).items()
                   if isinstance(v, bool | int | float) and not k.endswith("_file")}
        h.update(json.dumps(options, sort_keys=True).encode())
    return h.hexdigest()


# A split's fingerprint -> the fingerprint of the same split without a student's own ids (student=bilstm): what
# the teacher reads is the same, so its stored outputs (teacher_outputs) are keyed by this one.
TEACHER_FINGERPRINTS: dict[str, str] = {}


def teacher_fingerprint(ds: Dataset) -> str:
    """The fingerprint of what the teacher reads of the tokenised split `ds`."""
    return TEACHER_FINGERPRINTS.get(ds._fingerprint, ds._fingerprint)
