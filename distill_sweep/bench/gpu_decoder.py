"""The decoder step of `bench.gpu_check`: one training step of a decoder student against a live teacher, through
the job's own loss (procedures.causal_lm_loss.distill_loss, forward KL at T = 1) and update step (training.loop), under
the job's autocast: its tokens/s and, on CUDA, its peak memory, per sequence length.

The sizes are a small LM pair of today's vocabularies on a GPU (a Llama teacher of 8 layers x 2048 over a 128,256
token vocabulary, a 4-layer student of its width; every position a target), tiny on CPU. Each length has two rows:
the loss on whole logits (`procedure.logit_chunk=0`) and made `chunk` positions at a time (the jobs' default of 1024
on a GPU; objectives/chunked.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from transformers import LlamaConfig, LlamaForCausalLM

from distill_sweep.bench.workload import load_objective_cfg, objective_conf_dir
from distill_sweep.models.inits import resolve_init
from distill_sweep.objectives.core import build_objective
from distill_sweep.procedures.causal_lm_loss import distill_loss
from distill_sweep.students.base import BuildInputs
from distill_sweep.students.truncated import build as build_truncated
from distill_sweep.students.truncated_settings import TruncatedSettings
from distill_sweep.training.loop import autocast, update_step


@dataclass(frozen=True)
class DecoderSize:
    """The teacher's shape, the student's depth and the batches of the step."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    student_layers: int
    batch: int
    seqs: tuple[int, ...]
    steps: int  # timed steps per row (after one warm-up step)
    chunk: int  # the chunked row's positions per chunk (procedure.logit_chunk)


GPU = DecoderSize(vocab=128_256, hidden=2048, layers=8, heads=16, kv_heads=8, ffn=5632, student_layers=4, batch=2,
                  seqs=(1024, 4096), steps=5, chunk=1024)
CPU = DecoderSize(vocab=512, hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, student_layers=1, batch=2,
                  seqs=(32, 64), steps=2, chunk=16)


@dataclass
class StepRow:
    seq: int
    loss: str  # "unchunked" or "chunked"
    tokens_per_s: float | None
    peak_gib: float | None  # CUDA only
    note: str = ""


def models(size: DecoderSize, device: torch.device) -> tuple[LlamaForCausalLM, Any, Any]:
    """(teacher, student, init): a random Llama teacher (seeded) and a truncated student of its skip layers."""
    config = LlamaConfig(vocab_size=size.vocab, hidden_size=size.hidden, intermediate_size=size.ffn,
                         num_hidden_layers=size.layers, num_attention_heads=size.heads,
                         num_key_value_heads=size.kv_heads, max_position_embeddings=max(size.seqs),
                         bos_token_id=None, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    with device:  # made on the device: a 1B-parameter model is slow to initialise on the CPU
        teacher = LlamaForCausalLM(config).eval()
    init = resolve_init("skip", size.layers, size.student_layers)
    student = build_truncated(TruncatedSettings(num_layers=size.student_layers),
                              BuildInputs(arch=None, teacher=teacher, init=init, num_labels=2, label_names=[]))
    return teacher, student.to(device).train(), init


def batch(size: DecoderSize, seq: int, device: torch.device) -> dict[str, Tensor]:
    """Random tokens, every next token a target (the last position has none)."""
    generator = torch.Generator().manual_seed(seq)
    ids = torch.randint(1, size.vocab, (size.batch, seq), generator=generator)
    labels = torch.full_like(ids, -100)
    labels[:, :-1] = ids[:, 1:]
    return {k: v.to(device) for k, v in (("input_ids", ids), ("attention_mask", torch.ones_like(ids)),
                                         ("labels", labels))}


def step_rows(device: torch.device, precision: str, size: DecoderSize, budget_s: float = 90.0) -> list[StepRow]:
    """Per sequence length: the unchunked and the chunked step's tokens/s and peak memory; rows not yet started
    when `budget_s` seconds have passed are left out (said in their note)."""
    start = time.perf_counter()
    teacher, student, init = models(size, device)
    terms = build_objective(load_objective_cfg("fkl", objective_conf_dir()), student_config=student.config,
                            teacher_config=teacher.config, layer_map=init.layer_map, train_labels=None, num_labels=2)
    assert terms is not None
    terms = terms.to(device).train()
    params = list(student.parameters()) + list(terms.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    rows = []
    for seq in size.seqs:
        for name, loss_fn in (("unchunked", distill_loss(student, teacher, terms, 0.0, None, chunk=0)),
                              ("chunked", distill_loss(student, teacher, terms, 0.0, None, chunk=size.chunk))):
            if time.perf_counter() - start > budget_s:
                rows.append(StepRow(seq, name, None, None, f"not measured: over the part's {budget_s:.0f} s"))
                continue
            rows.append(StepRow(seq, name, *_timed(loss_fn, params, optimizer, batch(size, seq, device), device,
                                                   precision, size.steps)))
    return rows


def _timed(loss_fn: Callable[..., Any], params: list[Any], optimizer: Any, b: dict[str, Tensor],
           device: torch.device, precision: str, steps: int) -> tuple[float | None, float | None, str]:
    """(tokens/s, peak GiB on CUDA, a note) of `steps` steps after a warm-up one."""
    cuda = device.type == "cuda"

    def step() -> None:
        with autocast(device, precision):
            loss, _ = loss_fn(b)
        update_step(loss, params, optimizer)

    try:
        step()  # warm-up: kernels chosen, optimizer state made
        if cuda:
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        start = time.perf_counter()
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
    except torch.cuda.OutOfMemoryError:
        optimizer.zero_grad(set_to_none=True)
        return None, None, "out of memory"
    tokens = int(b["input_ids"].numel()) * steps
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None
    return tokens / seconds, peak, ""


def table(rows: list[StepRow], size: DecoderSize, device: torch.device, precision: str) -> str:
    """The rows as the Markdown table gpu_check prints."""
    lines = [f"Decoder step ({device.type}, {precision}): Llama teacher {size.layers}L x {size.hidden} over "
             f"{size.vocab} tokens, {size.student_layers}-layer student, batch {size.batch}, forward KL (T = 1), "
             f"{size.steps} timed steps after one warm-up", "",
             "| sequence | loss | tokens/s | peak memory (GiB) | note |", "|---:|---|---:|---:|---|"]
    for r in rows:
        rate = f"{r.tokens_per_s:.0f}" if r.tokens_per_s is not None else "-"
        peak = f"{r.peak_gib:.2f}" if r.peak_gib is not None else ("n/a (CPU)" if device.type == "cpu" else "-")
        lines.append(f"| {r.seq} | {r.loss} | {rate} | {peak} | {r.note} |")
    return "\n".join(lines)
