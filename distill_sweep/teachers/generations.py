"""The teacher's generations for sequence-level KD (procedure.seq_kd, Kim & Rush 2016): its greedy response to every
training prompt, made once per (teacher, data, max_new_tokens) and read by every job that trains on them.

Kept as the teacher-output store keeps its arrays (output_store.py: `_open`, `_in_partial`, `_finish`), in
`cache_dir/teacher_outputs/causal_<data>/<group>-greedy<max_new_tokens>-<key>/`: `ids.npy` (N, max_seq_length) int32,
the sequences [BOS] prompt response (pad-filled), `lengths.npy` and `first_target.npy` (N,) int64. The key is the
teacher's weights, the sequences' content key, the decoding (greedy from a clean generation config, [EOS],
max_new_tokens, max_seq_length), the precision and, with teacher.engine=vllm, the vLLM engine that made them
(teachers/vllm_engine.py: the same greedy decoding in its own process). Built under the store's lock into `.partial` and renamed; `meta.json` holds each array's sha256, checked
at every open, so a damaged or truncated file is set aside and the generations made again. Every stored row's
[BOS] and prompt are checked against the data's own (`GenerationsMismatchError` otherwise).
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from distill_sweep.data.decoder import CausalData, Sequences, content_key, prompts_of, with_responses
from distill_sweep.models.generation import clean_config, generate_responses
from distill_sweep.records import hashing
from distill_sweep.records.disk import writing
from distill_sweep.teachers.engine import Engine
from distill_sweep.teachers.output_plan import GENERATION_BATCH, generations_tag, store_root
from distill_sweep.teachers.output_store import (
    BUILD_KEPT,
    STORE_VERSION,
    StoreMismatchError,
    _array,
    _finish,
    _in_partial,
    _open,
    weights_digest,
)
from distill_sweep.teachers.vllm_engine import greedy_responses
from distill_sweep.training.loop import autocast

GENERATIONS = "generations"  # the store's mode
ARRAYS = ("ids", "lengths", "first_target")


class GenerationsMismatchError(StoreMismatchError):
    """A stored row's prompt is not the data's."""


def generations_key(model: nn.Module, data: CausalData, max_new_tokens: int, max_seq_length: int,
                    precision: str, eos: int, engine: Engine | None = None) -> dict[str, Any]:
    """What the stored generations are a function of (another teacher, data or decoding: another store). The
    decoding is the clean greedy config of models/generation.py (`clean_config`: the model's own generation_config,
    a repetition penalty or a no-repeat n-gram size say, is not read), stopping at `eos`; stores made when the
    model's generation_config was read have the plain "greedy" and are not read. `engine`: the vLLM engine that
    makes them (teacher.engine=vllm: named in the key, so its stores and transformers' never mix), None for
    transformers' (no entry: the stores made before the key had one)."""
    config = getattr(model, "config", None)
    decoding = {"strategy": "greedy", "generation_config": "clean", "eos": int(eos),
                **{k: v for k, v in clean_config(max_new_tokens, eos, eos).to_diff_dict().items()
                   if k not in ("transformers_version", "max_new_tokens", "eos_token_id", "pad_token_id")}}
    return {"version": STORE_VERSION, "mode": GENERATIONS, "teacher": weights_digest(model),
            "attn_implementation": str(getattr(config, "_attn_implementation", None)),
            "train": {"fingerprint": data.key, "rows": len(data.train)}, "precision": precision,
            "decoding": decoding, "max_new_tokens": int(max_new_tokens), "max_seq_length": int(max_seq_length),
            "arrays": list(ARRAYS), **({"engine": engine.describe()} if engine is not None else {})}


def open_or_build_generations(model: nn.Module, data: CausalData, *, max_new_tokens: int, max_seq_length: int,
                              tokens: tuple[int, int, int], cache_dir: Path, group: str, precision: str,
                              device: torch.device, engine: Engine | None = None) -> tuple[CausalData, dict[str, Any]]:
    """`data` with its training responses replaced by the teacher's greedy ones (its dev split unchanged), built
    now if no job built them (at most once per key whatever the number of concurrent jobs), and what the record
    says of them. `tokens`: the tokenizer's (bos, eos, pad); `engine`: the vLLM engine that makes them (None:
    transformers' generate in this process)."""
    key = generations_key(model, data, max_new_tokens, max_seq_length, precision, tokens[1], engine)
    digest = hashing.digest(key)[:16]
    path = store_root(cache_dir, data.name) / f"{group}-{generations_tag(max_new_tokens)}-{digest}"
    path.parent.mkdir(parents=True, exist_ok=True)
    room = max_seq_length - 1 - max_new_tokens
    built = _open(path, key, lambda: _in_partial(path, lambda partial: _write(
        model, data, key, path, partial, room=room, tokens=tokens, device=device, precision=precision,
        engine=engine)))
    ids, lengths, first = (np.load(path / f"{name}.npy") for name in ARRAYS)
    train = Sequences(ids.astype(np.int64), lengths, first, np.full(len(lengths), -1, dtype=np.int64))
    check_prompts(path, train, prompts_of(data.train, np.arange(len(data.train)), room))
    eos = tokens[1]
    ended = int(sum(train.ids[i, train.lengths[i] - 1] == eos for i in range(len(train))))
    info = {"responses": "teacher_greedy", "path": str(path), "key": digest, "built": built,
            "max_new_tokens": max_new_tokens, "ended_with_eos": ended, "rows": len(train),
            "mean_response_tokens": float(np.mean(train.lengths - train.first_target)),
            "engine": engine.describe() if engine is not None else {"name": "hf"}}
    new_key = content_key(train, data.dev, data.choice_ids)
    return replace(data, train=train, info={**data.info, "key": new_key, "responses": "teacher_greedy"}), info


def check_prompts(path: Path, train: Sequences, prompts: list[np.ndarray]) -> None:
    """Every stored row starts with the data's [BOS] and prompt; GenerationsMismatchError, one line, if not."""
    if len(prompts) != len(train):
        raise GenerationsMismatchError(f"generations store {path} has {len(train)} rows for {len(prompts)} prompts")
    for i, prompt in enumerate(prompts):
        if train.first_target[i] != len(prompt) or not np.array_equal(train.ids[i, :len(prompt)], prompt):
            raise GenerationsMismatchError(f"generations store {path}: row {i} does not start with the data's "
                                           "prompt (data changed under it, or misaligned)")


@torch.inference_mode()
def _write(model: nn.Module, data: CausalData, key: dict[str, Any], path: Path, partial: Path, *, room: int,
           tokens: tuple[int, int, int], device: torch.device, precision: str, engine: Engine | None = None) -> None:
    start = time.perf_counter()
    shutil.rmtree(partial, ignore_errors=True)  # what a killed build left
    with writing(partial, BUILD_KEPT):
        partial.mkdir(parents=True)
    n, (_, eos, pad) = len(data.train), tokens
    ids = _array(partial / "ids.npy", np.int32, (n, key["max_seq_length"]))
    lengths = _array(partial / "lengths.npy", np.int64, (n,))
    first = _array(partial / "first_target.npy", np.int64, (n,))
    ids[:] = pad
    # the engine takes every prompt in one worker run (its start costs tens of seconds); transformers, batches
    for begin in range(0, n, n if engine is not None else GENERATION_BATCH):
        rows = np.arange(begin, min(begin + (n if engine is not None else GENERATION_BATCH), n))
        prompts = prompts_of(data.train, rows, room)
        if engine is not None:
            responses = greedy_responses(engine, model, prompts, max_new_tokens=key["max_new_tokens"], eos=eos,
                                         precision=precision, work=Path(f"{path}.engine"))
        else:
            with autocast(device, precision):
                responses = generate_responses(model, prompts, max_new_tokens=key["max_new_tokens"], eos=eos,
                                               pad=pad, device=device)
        made = with_responses(prompts, responses, pad)
        ids[rows, :made.ids.shape[1]] = made.ids
        lengths[rows], first[rows] = made.lengths, made.first_target
    arrays = {"ids": ids, "lengths": lengths, "first_target": first}
    del ids, lengths, first
    _finish(partial, path, key, arrays, checksummed=ARRAYS, device=device, start=start)
