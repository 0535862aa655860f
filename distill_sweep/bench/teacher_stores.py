"""`python -m distill_sweep.bench.teacher_stores`: each way a decoder job reads its teacher (`procedure.teacher_logits`:
live, the stored last hidden states, stored top-k entries at two k, sampled entries) in one causal_lm step at two
vocabulary sizes: the bytes it stores per trained token, the step's seconds and peak memory, and its loss's error
against the live teacher's (`make bench`; docs/methods/decoder.md renders the JSON).

The step is causal_lm's own loss (procedures.causal_lm_loss.distill_loss: fkl at T = 1, logits made
`procedure.logit_chunk` positions at a time) on a random narrow Llama teacher and its truncated student, as
bench/memory.py's, one sequence, every position but the last a target. The stored rows are made before the step as
the stores make them (teachers/hidden_store.py's `last_hidden` in the run's dtype; teachers/sparse_store.py's
`sparse_entries` in its stored dtypes) and handed to the loss as a store's `gather` returns them, so the step reads
what a job reads and no disk. Each point runs in a fresh process (bench/memory.py says how the peak is read).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from typing import Any

from distill_sweep.bench.json_output import writes_json
from distill_sweep.bench.memory import in_fresh_process

# (the table's label, procedure.teacher_logits, k)
MODES = [("live", "full", 0), ("hidden", "hidden", 0), ("top_k, k = 32", "top_k", 32),
         ("top_k, k = 256", "top_k", 256), ("sampled, k = 32", "sampled", 32)]


def store_point(seq: int, vocab: int, hidden: int, mode: str, k: int, chunk: int, device: str,
                repeats: int) -> dict[str, Any]:
    """One mode's figures: stored bytes per trained token, the step's median seconds over `repeats` steps and its
    peak (MB), its loss and the live teacher's on the same batch."""
    import numpy as np
    import torch

    from distill_sweep.bench.memory import narrow_pair, peak_of
    from distill_sweep.procedures.causal_lm_loss import distill_loss
    from distill_sweep.teachers.hidden_store import last_hidden
    from distill_sweep.teachers.sparse_store import sparse_entries, topk_dtypes

    # a peaked teacher (a random one is near uniform): its tail matters as a trained one's
    teacher, student, terms, batch = narrow_pair(seq, vocab, hidden, device, head_scale=20.0)
    stored: Any = None
    stored_bytes = 0
    with torch.no_grad():
        if mode == "hidden":
            states = last_hidden(teacher, batch)
            stored_bytes = states.numel() * states.element_size()
            stored = _Rows(states)
        elif mode != "full":
            dtypes = topk_dtypes(vocab)
            logp, top = sparse_entries(teacher(**{k: batch[k] for k in ("input_ids", "attention_mask")}).logits, k,
                                       "sampled" if mode == "sampled" else "top_k", torch.Generator().manual_seed(0))
            values = logp.cpu().numpy().astype(dtypes["values"])
            indices = top.cpu().numpy().astype(dtypes["indices"])
            stored_bytes = values.nbytes + indices.nbytes
            stored = _Rows((torch.from_numpy(values.astype(np.float32)).to(device),
                            torch.from_numpy(indices.astype(np.int64)).to(device)))
    loss_fn = distill_loss(student, teacher, terms, 0.0, stored, "top_k" if mode == "full" else mode, chunk=chunk)
    live = float(distill_loss(student, teacher, terms, 0.0, None, chunk=chunk)(batch)[0].detach())
    value = float(loss_fn(batch)[0].detach())

    def step() -> None:
        loss, _ = loss_fn(batch)
        loss.backward()
        student.zero_grad(set_to_none=True)

    point = peak_of(step, device)
    seconds = [peak_of(step, device)["seconds"] for _ in range(max(0, repeats - 1))] + [point["seconds"]]
    return {"bytes_per_trained_token": stored_bytes / (seq - 1), "seconds": statistics.median(seconds),
            "peak_mb": point["peak_mb"], "loss": value, "live_loss": live}


class _Rows:
    """What distill_loss reads a batch's stored rows from (a store's `gather`), held in memory."""

    def __init__(self, rows: Any) -> None:
        self.rows = rows

    def gather(self, batch: dict[str, Any]) -> Any:
        return self.rows


def table(vocab: int, args: argparse.Namespace) -> None:
    print(f"\nVocabulary {vocab:,}\n")
    print("| teacher_logits | stored B / trained token | ms / step | peak, MB | loss | loss error vs live (relative) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, mode, k in MODES:
        p = in_fresh_process("distill_sweep.bench.teacher_stores",
                             f"store_point({args.seq}, {vocab}, {args.hidden}, {mode!r}, {k}, {args.chunk}, "
                             f"{args.device!r}, {args.repeats})", f"{label} vocab={vocab}")
        error = abs(p["loss"] - p["live_loss"]) / abs(p["live_loss"])
        print(f"| {label} | {p['bytes_per_trained_token']:.0f} | {p['seconds'] * 1e3:.0f} | {p['peak_mb']:.0f} | "
              f"{p['loss']:.4f} | {error:.1e} |")


@writes_json("teacher_stores")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.bench.teacher_stores", description=__doc__)
    parser.add_argument("--vocabs", type=int, nargs="+", default=[32_000, 128_256], help="vocabulary sizes")
    parser.add_argument("--seq", type=int, default=512, help="the sequence length")
    parser.add_argument("--hidden", type=int, default=64, help="the models' width H")
    parser.add_argument("--chunk", type=int, default=256, help="procedure.logit_chunk")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per point (their median)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args(argv)
    print(f"# One causal_lm step (fkl, T = 1; Llama, width H = {args.hidden}, 2 teacher layers, 1 student layer; 1 "
          f"sequence of {args.seq}; logit_chunk {args.chunk}; float32 on {args.device}) per way of reading the "
          "teacher. Stored bytes are per trained token (every position but the last); hidden stores H float32 "
          "values a position here (2H bytes in bf16 runs), top_k and sampled k float16 log-probabilities and k ids "
          "(uint16 up to 65,536 tokens, else int32). Peak: the step's memory above what was resident before it, a "
          "fresh process per point (bench/memory.py). The error is the loss's against the live teacher's on the same "
          "batch.")
    for vocab in args.vocabs:
        table(vocab, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
