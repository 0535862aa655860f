"""`python -m distill_sweep.bench.ddp`: several processes against one (`make bench`).

`--procedure task_agnostic` (the default): the same job (toy corpus, the tiny MLM teacher, `objective=att_mse`, one
global batch per update) runs as one process and as `torchrun --nproc_per_node=N` gloo ranks with 1 thread each, at
the same global batch and micro-batch, so both take the same updates (the student sharded by FSDP2 on the ranks,
training/fsdp.py). `--procedure causal_lm`: a decoder job (toy corpus, the tiny Llama teacher trained from its
config, `objective=fkl`) the same way. Reported: training samples/s (from each
record: every rank's slice counted) and the ratio, ideal scaling being N; and the peak resident memory of the
largest process (one rank, or the one process: `ru_maxrss` of a wrapper's children). On CPU the ranks share the
machine's cores and memory bandwidth: run it on an otherwise idle machine with at least N cores.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from distill_sweep.bench.json_output import writes_json


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A wrapper that runs the command and prints the peak resident set (KB) of its largest descendant on its last line
PEAK = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)")


def _job(prefix: list[str], args: list[str], results: Path, cwd: Path) -> dict:
    """The job's record, with `peak_rss_mb`: the largest process' peak resident memory."""
    proc = subprocess.run([sys.executable, "-c", PEAK, *prefix, "-m", "distill_sweep", *args,
                           f"results_dir={results}"], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"job failed:\n{proc.stderr[-3000:]}")
    (path,) = results.rglob("result.json")
    return {**json.loads(path.read_text()), "peak_rss_mb": int(proc.stdout.split()[-1]) / 1024}


def _task_agnostic(args: argparse.Namespace, work: Path) -> tuple[list[str], list[str], str]:
    job = ["procedure=task_agnostic", "teacher=tiny_mlm", "guards.allow_weak_teacher=true",  # a random teacher
           "objective=att_mse", "logger=none", "threads=1",
           f"corpus.num_documents={args.documents}", "corpus.dev_documents=20", "procedure.epochs=1",
           f"procedure.global_batch={args.global_batch}", f"procedure.micro_batch={args.micro_batch}",
           f"cache_dir={work / 'cache'}"]
    what = (f"task_agnostic toy, tiny MLM teacher -> 3-layer student, att_mse, global batch {args.global_batch}, "
            f"micro-batch {args.micro_batch}")
    return job, [*job, "procedure.max_steps=1"], what


def _causal_lm(args: argparse.Namespace, work: Path) -> tuple[list[str], list[str], str]:
    job = ["procedure=causal_lm", "teacher=tiny_llama", "objective=fkl", "logger=none", "threads=1",
           f"corpus.num_documents={args.documents}", "corpus.dev_documents=20", "procedure.epochs=1",
           f"procedure.batch_size={args.global_batch}", "procedure.teacher_steps=20", f"cache_dir={work / 'cache'}"]
    what = f"causal_lm toy corpus, tiny Llama teacher -> 3-layer student (FSDP2 on the ranks), fkl, batch {args.global_batch}"
    return job, [*job, "procedure.max_steps=1"], what


@writes_json("ddp")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.bench.ddp", description=__doc__)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--procedure", choices=["task_agnostic", "causal_lm"], default="task_agnostic")
    parser.add_argument("--documents", type=int, default=400, help="toy corpus documents")
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--micro-batch", type=int, default=16, help="task_agnostic's")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        job, warm, what = (_causal_lm if args.procedure == "causal_lm" else _task_agnostic)(args, work)
        _job([sys.executable], warm, work / "warm", work)  # the corpus cache (and a decoder's teacher), once
        one = _job([sys.executable], job, work / "one", work)
        many = _job([sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.ranks}",
                     f"--master_port={_port()}"], job, work / "many", work)
    block = one.get(args.procedure) or {}
    print(f"# distill_sweep bench_ddp: {what}, {block.get('steps', '?')} updates, gloo on CPU, 1 thread per process")
    print("| processes | training samples/s | wall s | scaling | peak memory of the largest process (MB) |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| 1 | {one['samples_per_s']:.0f} | {one['wall_time_s']:.1f} | 1.00 | {one['peak_rss_mb']:.0f} |")
    print(f"| {args.ranks} | {many['samples_per_s']:.0f} | {many['wall_time_s']:.1f} | "
          f"{many['samples_per_s'] / one['samples_per_s']:.2f} | {many['peak_rss_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
