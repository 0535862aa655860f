"""`python -m distill_sweep.bench.job_memory`: the peak memory of a whole `procedure=causal_lm` job (its teacher's
store or live forwards, its training steps, its dev evaluations of the teacher and the student) against the
sequence length, with the next-token logits chunked (`procedure.logit_chunk`) and whole (`logit_chunk=0`), the
teacher read live (`teacher_logits=full`) and from its stored hidden states (`teacher_logits=hidden`) (`make bench`;
docs/benchmarks/memory.md renders the JSON).

bench/memory.py measures a step and an evaluation apart; this runs the job itself (cli/run_job.py's `run_job`) on a
random narrow Llama teacher (2 layers, width 64) over a word-level vocabulary of `--vocab` tokens and its 1-layer
truncated student, on a corpus of random words written for the point (`corpus=text_files`, one document per
sequence, every sequence `--seq` tokens long): a few training sequences, one per step, and two dev sequences (one
dev batch, the job's `eval_batch_size`). The teacher is left random (`teacher_steps=0`): what it predicts does not
change what memory holds.

How the peak is read: each point is a fresh process (bench/memory.py's `in_fresh_process`, malloc told to return
freed blocks) that first runs the same job on 16-token sequences (a warm-up: the libraries a job imports as it goes,
torch's lazy state), then writes the point's tokenizer and corpus, composes its config, resets the kernel's
resident-set high-water mark (`/proc/self/clear_refs`) and runs it; the figure is the high-water mark (`VmHWM`) at
its end less the resident set at the reset (`VmRSS`): what the job held at its fullest (its models and optimizer
state, which do not depend on the length; the logits, the batches and the evaluation's buffers, which may) over a
warmed-up process.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distill_sweep.bench.json_output import writes_json
from distill_sweep.bench.memory import MB, in_fresh_process, logits_mb

SPECIALS = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]  # their ids 0..3: tiny_llama's pad, -, bos and eos ids
TRAIN_SEQUENCES = 4
DEV_SEQUENCES = 2  # one dev batch at the job's eval_batch_size (64)
WARM_UP = 16  # the warm-up job's sequence length


def write_tokenizer(where: Path, vocab: int) -> Path:
    """A word-level tokenizer of `vocab` tokens (the specials, then w0, w1, ...), saved as a hub one is."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = SPECIALS + [f"w{i}" for i in range(vocab - len(SPECIALS))]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", bos_token="[BOS]",
                            eos_token="[EOS]").save_pretrained(where)
    return where


def write_corpus(where: Path, seq: int, vocab: int, documents: int) -> Path:
    """`documents` documents of `seq - 2` random words each (a sequence of `seq` with [BOS] and [EOS]), separated by
    blank lines as corpus=text_files reads them."""
    import numpy as np

    rng = np.random.default_rng(0)
    where.mkdir(parents=True, exist_ok=True)
    docs = (" ".join(f"w{i}" for i in rng.integers(0, vocab - len(SPECIALS), seq - 2)) for _ in range(documents))
    (where / "documents.txt").write_text("\n\n".join(docs) + "\n")
    return where


def job_overrides(seq: int, vocab: int, chunk: int, logits: str, work: Path) -> list[str]:
    """The point's job: what the module docstring describes, as command-line overrides."""
    return ["logger=none", "threads=1", "procedure=causal_lm", "teacher=tiny_llama", "student.num_layers=1",
            f"teacher.tokenizer={work / 'tokenizer'}", "teacher.config.num_hidden_layers=2",
            f"teacher.config.max_position_embeddings={seq}", "corpus=text_files", f"corpus.path={work / 'corpus'}",
            f"corpus.dev_documents={DEV_SEQUENCES}", f"corpus.max_seq_length={seq}", "procedure.teacher_steps=0",
            "procedure.batch_size=1", "procedure.epochs=1", f"max_steps_per_epoch={TRAIN_SEQUENCES}",
            "objective=fkl", "procedure.ce_weight=0.5", f"procedure.logit_chunk={chunk}",
            f"procedure.teacher_logits={logits}", "guards.allow_weak_teacher=true",  # a random teacher, deliberately
            f"results_dir={work / 'results'}", f"cache_dir={work / 'cache'}"]


def job_point(seq: int, vocab: int, chunk: int, logits: str) -> dict[str, Any]:
    """One job's peak (MB) above the resident set before it, its seconds and status, after a warm-up job on
    `WARM_UP` positions (the same settings otherwise: the libraries a job imports as it goes, torch's lazy state):
    run in its own process."""
    from distill_sweep.bench.memory import _status

    with tempfile.TemporaryDirectory(prefix="job_memory_") as tmp:
        _run_job(Path(tmp) / "warm_up", WARM_UP, vocab, chunk, logits)
        work = Path(tmp) / "measured"
        cfg = job_config(work, seq, vocab, chunk, logits)
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        before = _status("VmRSS")
        written, seconds = _run_job(work, seq, vocab, chunk, logits, cfg)  # its result.json, as written
        peak = _status("VmHWM") - before
    return {"peak_mb": peak / MB, "seconds": seconds, "status": written.get("status"),
            "steps": (written.get("causal_lm") or {}).get("steps")}


def job_config(work: Path, seq: int, vocab: int, chunk: int, logits: str) -> Any:
    """The point's tokenizer and corpus written under `work`, and its job's composed config."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from distill_sweep.config.space import CONF_DIR, VERSION_BASE

    write_tokenizer(work / "tokenizer", vocab)
    write_corpus(work / "corpus", seq, vocab, TRAIN_SEQUENCES + DEV_SEQUENCES)
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        cfg = compose("config", overrides=job_overrides(seq, vocab, chunk, logits, work))
    OmegaConf.set_struct(cfg, False)
    return cfg


def _run_job(work: Path, seq: int, vocab: int, chunk: int, logits: str, cfg: Any = None) -> tuple[dict, float]:
    """The job run (its config made first unless given): its record as written and its seconds, its printed lines
    kept off stdout (where the parent reads the point's JSON)."""
    import contextlib
    import io
    import time

    from distill_sweep.cli.run_job import run_job

    cfg = cfg if cfg is not None else job_config(work, seq, vocab, chunk, logits)
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        written = run_job(cfg)
    return written, time.perf_counter() - start


def measure(seq: int, vocab: int, chunk: int, logits: str) -> dict[str, Any]:
    """job_point in a fresh process; a job that did not complete stops the bench."""
    what = f"seq={seq} vocab={vocab} logit_chunk={chunk} teacher_logits={logits}"
    point = in_fresh_process("distill_sweep.bench.job_memory", f"job_point({seq}, {vocab}, {chunk}, {logits!r})",
                             what)
    if point["status"] != "completed":
        raise SystemExit(f"the job {what} ended {point['status']}")
    return point


@writes_json("job_memory")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.bench.job_memory", description=__doc__)
    parser.add_argument("--seqs", type=int, nargs="+", default=[256, 512, 1024, 2048], help="sequence lengths")
    parser.add_argument("--vocab", type=int, default=32768, help="the vocabulary size")
    parser.add_argument("--chunk", type=int, default=256, help="procedure.logit_chunk of the chunked columns")
    parser.add_argument("--logits", nargs="+", default=["hidden", "full"], choices=["hidden", "full"],
                        help="procedure.teacher_logits of the rows")
    args = parser.parse_args(argv)
    if min(args.seqs) < 4 or args.vocab <= len(SPECIALS) or args.chunk < 1:
        raise SystemExit("--seqs must be >= 4, --vocab above 4 and --chunk >= 1")
    print(f"# A whole causal_lm job (Llama teacher: 2 layers, width 64, random; 1-layer student; vocabulary "
          f"{args.vocab}; fkl + 0.5 CE; {TRAIN_SEQUENCES} steps of 1 sequence, a dev evaluation of the teacher and "
          f"one of the student over {DEV_SEQUENCES} sequences in one batch), chunked (procedure.logit_chunk="
          f"{args.chunk}) and whole (logit_chunk=0); peak: the job's resident-set high-water mark above the resident "
          "set before it, a fresh process per point.")
    print("\n| teacher_logits | sequence | one model's logits, MB | whole peak, MB | chunked peak, MB | whole s | "
          "chunked s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for logits in args.logits:
        for seq in args.seqs:
            whole, chunked = (measure(seq, args.vocab, c, logits) for c in (0, args.chunk))
            print(f"| {logits} | {seq} | {logits_mb(seq, args.vocab):.0f} | {whole['peak_mb']:.0f} | "
                  f"{chunked['peak_mb']:.0f} | {whole['seconds']:.1f} | {chunked['seconds']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
