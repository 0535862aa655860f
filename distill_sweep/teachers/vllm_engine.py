"""The teacher's bulk work on a vLLM engine in its own process and environment (teacher.engine=vllm; engine.py).

The project never imports vLLM: the teacher is saved as a transformers model directory into a job directory
beside the store being built, the token ids go there as .npy files, and teachers/vllm_worker.py runs with the
engine's interpreter and writes its answer back as .npy files (`out/done.json` last). The caller (generations.py,
output_store.py) puts the answer through its store's own machinery (lock, `.partial` + rename, checksums, row
checks); the job directory is removed afterwards, whatever happened.

The worker sees token ids only (vLLM's tokenizer is not started: `skip_tokenizer_init`), so the tokenizer never
has to load in the engine's transformers. The worker marks torchcodec absent before vLLM loads (vllm_worker.py says
why).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from distill_sweep.teachers.engine import Engine

log = logging.getLogger("distill_sweep")
WORKER = Path(__file__).with_name("vllm_worker.py")
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # the job's precision as the engine's dtype


class EngineError(RuntimeError):
    """The vLLM worker failed: one line with its last error line and where its log is."""


def greedy_responses(engine: Engine, model: nn.Module, prompts: list[np.ndarray], *, max_new_tokens: int, eos: int,
                     precision: str, work: Path) -> list[list[int]]:
    """Each prompt's greedy response on the engine, as generation.generate_responses gives it: up to and including
    the first `eos`, or `max_new_tokens` tokens."""
    lengths = [len(p) for p in prompts]
    request = {"task": "greedy", "max_new_tokens": int(max_new_tokens), "eos": int(eos),
               "max_model_len": max(lengths) + int(max_new_tokens)}
    arrays = {"prompts": np.concatenate([np.asarray(p, dtype=np.int64) for p in prompts]),
              "offsets": np.cumsum([0, *lengths]).astype(np.int64)}
    with _job(engine, model, request, arrays, precision, Path(work)) as out:
        flat, offsets = np.load(out / "responses.npy"), np.load(out / "response_offsets.npy")
        return [flat[offsets[i]:offsets[i + 1]].tolist() for i in range(len(prompts))]


def sparse_entries(engine: Engine, model: nn.Module, ids: np.ndarray, lengths: np.ndarray, k: int, mode: str, *,
                   seed: int, precision: str, work: Path, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """(values float32, indices int64), each (N, W, k): at every position t < length - 1 of each row (every position
    that can be a target) the k most likely next tokens (`top_k`) or k draws (`sampled`) and their log-probabilities
    at T = 1; zeros elsewhere (a row's last position predicts past its end: never a target)."""
    request = {"task": mode, "k": int(k), "seed": int(seed), "vocab": int(vocab),
               "max_model_len": int(ids.shape[1]) if ids.size else 1}
    arrays = {"ids": np.asarray(ids, dtype=np.int64), "lengths": np.asarray(lengths, dtype=np.int64)}
    with _job(engine, model, request, arrays, precision, Path(work)) as out:
        return np.load(out / "values.npy", mmap_mode="r"), np.load(out / "indices.npy", mmap_mode="r")


@contextmanager
def _job(engine: Engine, model: nn.Module, request: dict[str, Any], arrays: dict[str, np.ndarray], precision: str,
         work: Path) -> Iterator[Path]:
    """A worker run: the job directory `work` written (the model, the arrays, request.json),
    the worker run, its `out/` handed to the block; `work` removed on leaving, whatever happened."""
    request = {**request, "dtype": DTYPES.get(precision, "float32")}
    shutil.rmtree(work, ignore_errors=True)  # what a killed build left
    try:
        work.mkdir(parents=True)
        model.save_pretrained(work / "model", safe_serialization=True)
        for name, array in arrays.items():
            np.save(work / f"{name}.npy", array)
        (work / "request.json").write_text(json.dumps(request))
        _run(engine, work, request["task"])
        yield work / "out"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(engine: Engine, work: Path, task: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    logfile = work / "worker.log"
    log.info("the vLLM worker (%s %s) runs the teacher's %s work", engine.distribution, engine.version, task)
    with open(logfile, "w") as f:
        done = subprocess.run([str(engine.python), str(WORKER), str(work)], stdout=f, stderr=subprocess.STDOUT,
                              env=env, cwd=work)
    if done.returncode != 0 or not (work / "out" / "done.json").is_file():
        lines = [line for line in logfile.read_text(errors="replace").splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line or "error" in line] or lines or ["no output"]
        kept = work.with_name(work.name + ".log")
        shutil.copyfile(logfile, kept)
        raise EngineError(f"the vLLM worker failed (exit {done.returncode}): {errors[-1].strip()[:240]} "
                          f"(its log: {kept})")
    info = json.loads((work / "out" / "done.json").read_text())
    log.info("the vLLM worker did the %s work in %.1fs", task, info.get("seconds", float("nan")))
