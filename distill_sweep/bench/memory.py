"""`python -m distill_sweep.bench.memory`: the peak memory of one decoder distillation step against the sequence
length and the vocabulary size, with the next-token loss chunked (`procedure.logit_chunk`) and unchunked
(`make bench`).

The step is causal_lm's own loss (procedures.causal_lm_loss.distill_loss: fkl at T = 1 plus 0.5 x the CE, the teacher
live) on a random Llama teacher and its truncated student (few layers, a narrow width: the logits dominate, as they
do for real decoders at long sequences), forward and backward, one sequence per batch, every position a target.

The last table measures the job's other phase the same way: the dev evaluation (teachers/decoder.py `lm_evaluator`,
token accuracy and perplexity) of the student on one sequence, its logits whole or in the same chunks. A job's peak
is the larger of its step's and its evaluation's.

How the peak is measured (CPU): each point runs in a fresh process, which takes one step to warm up, then resets
the kernel's resident-set high-water mark (`/proc/self/clear_refs`) and takes the measured step; its peak is the
high-water mark (`VmHWM`) less the resident set at the reset (`VmRSS`): what the step added over the models, the
batch and what the warm-up left. glibc malloc is told (its environment variables) to serve every block above 64 KB
by mmap and to trim at once, so that freed memory leaves the process and each step's tensors are counted when they
are made, not hidden in a heap the warm-up grew. tracemalloc does not see torch's allocations; torch has no CPU
allocator statistics. On CUDA (`--device cuda`) the peak is torch.cuda.max_memory_allocated over the step instead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distill_sweep.bench.json_output import writes_json

MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0", "MALLOC_TOP_PAD_": "0"}
MB = 2**20


def _status(key: str) -> int:
    """A /proc/self/status field in bytes (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def narrow_pair(seq: int, vocab: int, hidden: int, device: str, head_scale: float = 1.0) -> tuple[Any, ...]:
    """The benches' decoder step, made from seed 0 on one thread: a random narrow Llama teacher (2 layers, width
    `hidden`, its LM head scaled by `head_scale` before the student copies it), its 1-layer truncated student,
    fkl's terms, and one sequence of `seq` random ids, every position but the last a target."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from distill_sweep.models.inits import StudentInit
    from distill_sweep.objectives import parse_objective
    from distill_sweep.objectives.core import build_objective
    from distill_sweep.students.base import BuildInputs
    from distill_sweep.students.truncated import build as build_truncated
    from distill_sweep.students.truncated_settings import TruncatedSettings

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=seq,
                         bos_token_id=None, eos_token_id=None, pad_token_id=0)
    teacher = LlamaForCausalLM(config).to(device).eval()
    if head_scale != 1.0:
        with torch.no_grad():
            teacher.lm_head.weight.mul_(head_scale)
    for p in teacher.parameters():
        p.requires_grad_(False)
    student = build_truncated(TruncatedSettings(num_layers=1), BuildInputs(
        arch=config, teacher=teacher, init=StudentInit("bottom", "bottom", [1], [(1, 1)]), num_labels=2,
        label_names=[])).to(device).train()
    terms = build_objective(parse_objective({"name": "fkl", "stages": ["intermediate"], "terms": {"fkl": 1.0}}),
                            student_config=student.config, teacher_config=teacher.config, layer_map=[(1, 1)],
                            train_labels=None, num_labels=2)
    ids = torch.randint(1, vocab, (1, seq), device=device)
    labels = torch.cat([ids[:, 1:], torch.full((1, 1), -100, device=device)], 1)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
             "idx": torch.zeros(1, dtype=torch.long)}
    return teacher, student, terms, batch


def one_point(seq: int, vocab: int, chunk: int, hidden: int, device: str, evaluate: bool = False) -> dict[str, Any]:
    """One step's peak (MB) above what was resident before it, and its seconds, or with `evaluate` the dev
    evaluation's of the student on the same sequence: run in its own process."""
    import torch

    from distill_sweep.procedures.causal_lm_loss import distill_loss

    teacher, student, terms, batch = narrow_pair(seq, vocab, hidden, device)
    ids = batch["input_ids"]
    loss_fn = distill_loss(student, teacher, terms, 0.5, None, chunk=chunk)

    def step() -> None:
        loss, _ = loss_fn(batch)
        loss.backward()
        student.zero_grad(set_to_none=True)

    if evaluate:  # the dev evaluation of the student on the same sequence (its metrics' logits, chunked or whole)
        import numpy as np

        from distill_sweep.data.decoder import CausalData, Sequences
        from distill_sweep.teachers.decoder import lm_evaluator

        split = Sequences(ids=ids.cpu().numpy(), lengths=np.array([seq]), first_target=np.array([1]),
                          choice=np.array([-1]))
        data = CausalData("bench", split, split, 0, [], {"key": "bench"})
        dev = {"validation": lambda: data.dev_batches(1)}
        run = lm_evaluator(data, chunk=chunk)
        return peak_of(lambda: run(student, dev, None, torch.device(device), "fp32"), device)
    return peak_of(step, device)


def peak_of(step: Any, device: str) -> dict[str, Any]:
    """`step()` run once to warm up (lazy initialisation, thread pools), then measured: its peak (MB) above what was
    resident before it (the module docstring says how), and its seconds."""
    import torch

    def timed() -> float:
        start = time.perf_counter()
        step()
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    timed()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        seconds = timed()
        peak = torch.cuda.max_memory_allocated() - before
    else:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        before = _status("VmRSS")
        seconds = timed()
        peak = _status("VmHWM") - before
    return {"peak_mb": peak / MB, "seconds": seconds}


def measure(seq: int, vocab: int, chunk: int, hidden: int, device: str, evaluate: bool = False) -> dict[str, Any]:
    """one_point in a fresh process (its own high-water mark, malloc returning freed blocks)."""
    return in_fresh_process("distill_sweep.bench.memory", f"one_point({seq}, {vocab}, {chunk}, {hidden}, {device!r}, "
                            f"{evaluate})", f"seq={seq} vocab={vocab} chunk={chunk}")


def in_fresh_process(module: str, call: str, what: str) -> dict[str, Any]:
    """`module.call` (a point's function, returning a JSON-able dict) run in a fresh process, malloc told to return
    freed blocks (the module docstring)."""
    code = f"import json, sys; from {module} import *; print(json.dumps({call}))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **MALLOC, "OMP_NUM_THREADS": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"the point {what} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def logits_mb(seq: int, vocab: int) -> float:
    """One model's float32 logits of the sequence: what the unchunked loss holds several of."""
    return seq * vocab * 4 / MB


def table(title: str, points: list[tuple[int, int]], chunk: int, hidden: int, device: str,
          evaluate: bool = False) -> None:
    print(f"\n{title}\n")
    print("| sequence | vocabulary | one model's logits, MB | unchunked peak, MB | chunked peak, MB | unchunked s | "
          "chunked s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for seq, vocab in points:
        whole, chunked = (measure(seq, vocab, c, hidden, device, evaluate) for c in (0, chunk))
        print(f"| {seq} | {vocab} | {logits_mb(seq, vocab):.0f} | {whole['peak_mb']:.0f} | {chunked['peak_mb']:.0f} | "
              f"{whole['seconds']:.2f} | {chunked['seconds']:.2f} |")


@writes_json("memory")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.bench.memory", description=__doc__)
    parser.add_argument("--seqs", type=int, nargs="+", default=[256, 512, 1024, 2048], help="sequence lengths")
    parser.add_argument("--vocabs", type=int, nargs="+", default=[4096, 16384, 32768], help="vocabulary sizes")
    parser.add_argument("--vocab", type=int, default=16384, help="the vocabulary of the sequence-length table")
    parser.add_argument("--seq", type=int, default=1024, help="the sequence length of the vocabulary table")
    parser.add_argument("--chunk", type=int, default=256, help="procedure.logit_chunk of the chunked rows")
    parser.add_argument("--hidden", type=int, default=64, help="the models' width")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args(argv)
    how = ("torch.cuda.max_memory_allocated over the step" if args.device == "cuda" else
           "the step's resident-set high-water mark above the resident set before it, a fresh process per point")
    print(f"# One causal_lm step (fkl + 0.5 CE, teacher live; Llama, width {args.hidden}, 2 teacher layers, 1 student "
          f"layer; 1 sequence), unchunked (procedure.logit_chunk=0) and chunked ({args.chunk} positions); peak: {how}.")
    table("Against the sequence length", [(s, args.vocab) for s in args.seqs], args.chunk, args.hidden, args.device)
    table("Against the vocabulary size", [(args.seq, v) for v in args.vocabs], args.chunk, args.hidden, args.device)
    # the job's other phase: its dev evaluation (lm_evaluator, the same chunk), so a whole job's peak is the larger
    table("The dev evaluation of the student, against the sequence length (peak of one evaluation)",
          [(s, args.vocab) for s in args.seqs], args.chunk, args.hidden, args.device, evaluate=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
