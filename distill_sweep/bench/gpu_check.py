"""`python -m distill_sweep.bench.gpu_check` (`make gpu-check`): a GPU box checked in one command, in under 8
minutes on one H200.

1. **tests**: the tests marked `cuda` (`pytest -m cuda` over the repository's tests/): student, teacher and
   batches on the device, a bf16 autocast step, a decoder pack on the GPU, the per-row sampling generators on the
   device, and the multi-process path over NCCL where there are 2+ GPUs;
2. **pack**: `bench.pack` at the paper's size in bf16 (a BERT-base-shaped teacher, 12 layers x 768, 3-layer
   students, batch 128): samples/s alone against packed, and MFU from the FLOPs of the steps;
3. **decoder**: a decoder step (`bench.gpu_decoder`): tokens/s and peak memory per sequence length, the loss on
   whole logits and in chunks of positions (`procedure.logit_chunk`).

Without CUDA (or with `--device cpu`) what needs it is skipped, one line each, and the rest runs at tiny sizes
fixed by steps, with no wall limit (about a minute on an idle CPU): the JSON's `skipped` lists what was left out. `--json PATH` writes the figures (the printed
lines and tables as the docs' benchmark pages read them, each part's status and seconds). Exit 1 when a part
failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from distill_sweep.bench import gpu_decoder
from distill_sweep.bench.json_output import machine, markdown_blocks, teed_stdout
from distill_sweep.records.environment import git_commit

PARTS = ("tests", "pack", "decoder")
TESTS = Path(__file__).resolve().parents[2] / "tests"  # the repository's tests (absent from an installed wheel)
# bench.pack's arguments: the paper's size in bf16 on a GPU (three members: one per kind of teacher read), a
# tiny one on CPU
PACK_GPU = ["--device", "cuda", "--precision", "bf16", "--teacher-layers", "12", "--hidden", "768", "--heads", "12",
            "--ffn", "3072", "--batch", "128", "--lr", "1e-4", "--steps", "40", "--objectives",
            "hid_seq,att_kl,vanilla_kd"]
PACK_CPU = ["--device", "cpu", "--steps", "2", "--batch", "16", "--num-dev", "32", "--threads", "1",
            "--objectives", "hid_seq,vanilla_kd"]
# seconds each part may take on a GPU before it is stopped (reported failed; the decoder step's later rows left
# out): under 8 minutes in all on one H200, set-up included. Without CUDA the parts have no wall limit: their tiny
# sizes are fixed by steps (PACK_CPU's 2 steps x batch 16, gpu_decoder.CPU's 2 steps per row), so they end in about
# a minute on an idle CPU and later on a loaded one, where a wall limit failed a box with nothing wrong (the pack
# took 150 s against a limit of 120 s on a 2-core machine shared by other jobs)
LIMITS = {"tests": 150, "pack": 240, "decoder": 60}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m distill_sweep.bench.gpu_check", description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: CUDA when there is one; cpu: the tiny sizes, the CUDA parts skipped")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here (make gpu-check: "
                   "docs/benchmarks/data/gpu_check.json)")
    args = p.parse_args(argv)
    args.parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = [x for x in args.parts if x not in PARTS]
    if unknown or not args.parts:
        p.error(f"--parts: {', '.join(unknown) or 'none given'}: choose among {', '.join(PARTS)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False)")
    return args


class Check:
    """What the parts found: per part its status (ran, failed, skipped), seconds and details; the skip lines."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.parts: dict[str, dict[str, Any]] = {}
        self.skipped: list[str] = []

    def skip(self, what: str, why: str) -> None:
        line = f"skipped: {what} ({why})"
        self.skipped.append(line)
        print(line)

    def run(self, name: str, fn: Callable[[], dict[str, Any]]) -> None:
        print(f"\n## {name}")
        start = time.perf_counter()
        try:
            part = fn()
        except Exception as err:  # noqa: BLE001 - one part's failure is reported; the others still run
            part = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
            print(f"{name} failed: {part['error']}")
        part["seconds"] = round(time.perf_counter() - start, 1)
        self.parts[name] = part

    @property
    def failed(self) -> list[str]:
        return [name for name, part in self.parts.items() if part["status"] == "failed"]


def cuda_tests(check: Check) -> dict[str, Any]:
    if not check.cuda:
        check.skip("the tests marked cuda", "no CUDA device")
        return {"status": "skipped", "reason": "no CUDA device"}
    if not TESTS.is_dir():
        check.skip("the tests marked cuda", f"no tests/ beside the package ({TESTS}): run it from the repository")
        return {"status": "skipped", "reason": "no tests/ directory"}
    command = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "-rs", str(TESTS)]
    try:
        proc = subprocess.run(command, cwd=TESTS.parent, capture_output=True, text=True, timeout=LIMITS["tests"])
    except subprocess.TimeoutExpired:
        print(f"the tests marked cuda ran over {LIMITS['tests']} s: stopped")
        return {"status": "failed", "error": f"over {LIMITS['tests']} s"}
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    summary = lines[-1] if lines else "(no output)"
    print(f"pytest -m cuda: {summary.strip('= ')}")
    for line in lines:
        if line.startswith(("FAILED", "ERROR", "SKIPPED")):
            print(f"- {line}")
    return {"status": "ran" if proc.returncode == 0 else "failed", "summary": summary.strip("= "),
            "returncode": proc.returncode}


def pack_bench(check: Check) -> dict[str, Any]:
    args = PACK_GPU if check.cuda else PACK_CPU
    if not check.cuda:
        check.skip("bench.pack at the paper's size in bf16, and its MFU", "no CUDA device: a tiny fp32 pack on CPU")
    limit = LIMITS["pack"] if check.cuda else None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pack.json"
        command = [sys.executable, "-m", "distill_sweep.bench.pack", *args, "--json", str(out)]
        try:  # a process of its own: the device's memory is the bench's alone, and given back after
            proc = subprocess.run(command, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            print(f"bench.pack ran over {limit} s: stopped")
            return {"status": "failed", "error": f"over {limit} s", "arguments": args}
        blocks = json.loads(out.read_text())["blocks"] if out.exists() else []
    print(proc.stdout.strip())
    if proc.returncode != 0:
        print(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
    return {"status": "ran" if proc.returncode == 0 else "failed", "arguments": args, "blocks": blocks}


def decoder_step(check: Check) -> dict[str, Any]:
    device = torch.device("cuda" if check.cuda else "cpu")
    size, precision = (gpu_decoder.GPU, "bf16") if check.cuda else (gpu_decoder.CPU, "fp32")
    if not check.cuda:
        check.skip("the decoder step at GPU sizes, in bf16, and its peak memory", "no CUDA device: tiny sizes")
    rows = gpu_decoder.step_rows(device, precision, size, LIMITS["decoder"] if check.cuda else math.inf)
    print(gpu_decoder.table(rows, size, device, precision))
    if check.cuda:
        torch.cuda.empty_cache()
    out_of_memory = [r for r in rows if r.note == "out of memory"]
    return {"status": "failed" if out_of_memory else "ran", "precision": precision,
            "rows": [vars(r) for r in rows]}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cuda = args.device != "cpu" and torch.cuda.is_available()
    check = Check(cuda)
    device = torch.cuda.get_device_name(0) if cuda else "cpu"
    with teed_stdout() as printed:
        print(f"# distill_sweep gpu_check: {device}, {torch.cuda.device_count() if cuda else 0} CUDA device(s)")
        for name, fn in (("tests", cuda_tests), ("pack", pack_bench), ("decoder", decoder_step)):
            if name in args.parts:
                check.run(name, lambda fn=fn: fn(check))
        failed = check.failed
        by = {status: [n for n, part in check.parts.items() if part["status"] == status]
              for status in ("ran", "skipped", "failed")}
        print("\ngpu_check: " + "; ".join(f"{status}: {', '.join(names) or 'none'}" for status, names in by.items())
              + f" ({len(check.skipped)} skip line(s))")
    if args.json is not None:
        data = {"bench": "gpu_check", "command": " ".join(["python -m distill_sweep.bench.gpu_check",
                                                           *(sys.argv[1:] if argv is None else argv)]),
                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
                "machine": machine(), "device": device, "cuda": cuda, "parts": check.parts, "skipped": check.skipped,
                "blocks": markdown_blocks(printed.getvalue())}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
