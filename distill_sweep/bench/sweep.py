"""`python -m distill_sweep.bench.sweep`: what the teacher-output store, the truncated teacher and
length-grouped batches save, measured in one run (`make bench`).

* Sweep level: a paper_table3-shaped sweep on the toy task with a deeper tiny teacher (12 layers, hidden 128)
  and 3-layer students: inits 1, 2, 3 x seeds x objectives vanilla_kd, att_kl, hid_cls. It runs twice, each
  time as one `python -m distill_sweep ... -m` process: `teacher_outputs=live` (the teacher run in full at
  every step, as before the store) and `teacher_outputs=auto` (the store, built by the sweep's own build job,
  plus the teacher run only to its deepest mapped layer in stage 1). Reported: total CPU-seconds of each
  process (user + sys) and their ratio. The teacher is fine-tuned once before both and shared.
* Job level: the vanilla_kd jobs of the two sweeps, paired by (init, seed): the ratio of their training
  throughput (samples/s of the stage steps, from the records) and of their wall times.
* Results unchanged: every pair's best dev accuracy and per-epoch losses are compared.
* Padding: padded / real tokens of the training batches, uniform batches vs length-grouped batches, on the
  toy task's training split and on GLUE-like (log-normal) lengths.

Absolute seconds on a shared machine are noise; the ratios come from the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from hydra import compose, initialize_config_dir

from distill_sweep.bench.json_output import writes_json
from distill_sweep.config.space import CONF_DIR
from distill_sweep.data.batching import LengthGroupedBatches, row_lengths
from distill_sweep.data.glue import load_task_data
from distill_sweep.job.prepare import prepare
from distill_sweep.models.loading import load_tokenizer

TEACHER = ["teacher=tiny", "teacher.config.num_hidden_layers=12", "teacher.config.hidden_size=128",
           "teacher.config.intermediate_size=256", "teacher.finetune.epochs=4"]
OBJECTIVES = "vanilla_kd,att_kl,hid_cls"


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _sweep(args: Sequence[str], cwd: Path) -> float:
    """CPU-seconds of one `python -m distill_sweep` process (it and its children)."""
    before = _cpu_children()
    proc = subprocess.run([sys.executable, "-m", "distill_sweep", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"})
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({' '.join(args)}):\n{proc.stderr[-3000:]}")
    return _cpu_children() - before


def _records(directory: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    out = {}
    for path in directory.rglob("result.json"):
        r = json.loads(path.read_text())
        out[(r["objective"], r["init"]["spec"], r["seed"])] = r
    return out


def padding_ratio(lengths: np.ndarray, batches: Sequence[Sequence[int]]) -> float:
    """Padded tokens (batch x its longest row) over real tokens."""
    return sum(len(b) * int(lengths[list(b)].max()) for b in batches) / float(lengths.sum())


def padding_rows(toy_lengths: np.ndarray, batch: int) -> list[tuple[str, float, float]]:
    glue_like = np.clip(np.random.default_rng(0).lognormal(math.log(25), 0.55, size=20000), 4, 128).astype(int)
    rows = []
    for name, lengths in (("toy task train split", toy_lengths), ("GLUE-like lengths (log-normal, median 25)",
                                                                   glue_like)):
        order = np.random.default_rng(1).permutation(len(lengths))
        uniform = padding_ratio(lengths, [order[i:i + batch] for i in range(0, len(order), batch)])
        grouped = padding_ratio(lengths, list(LengthGroupedBatches(lengths, batch, seed=1)))
        rows.append((name, uniform, grouped))
    return rows


@writes_json("sweep")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.bench.sweep", description=__doc__)
    parser.add_argument("--objectives", default=OBJECTIVES)
    parser.add_argument("--inits", default="1,2,3")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--num-train", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=3, help="per stage (the paper: 10)")
    args = parser.parse_args(argv)
    n_jobs = len(args.objectives.split(",")) * len(args.inits.split(",")) * len(args.seeds.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = ["task=toy", *TEACHER, "logger=none", "threads=1", f"task.recipe.num_train={args.num_train}",
                "task.recipe.num_dev=200", f"epochs={args.epochs}", "guards.allow_weak_teacher=true",
                f"cache_dir={work / 'cache'}"]
        # the teacher once, for both sweeps (fine-tuning is the same work with or without the store)
        _sweep([*base, "objective=vanilla_kd", "teacher_outputs=live", f"results_dir={work / 'warm'}"], work)
        grid = [*base, f"objective={args.objectives}", f"init={args.inits}", f"seed={args.seeds}", "-m"]
        live_cpu = _sweep([*grid, "teacher_outputs=live", f"results_dir={work / 'live'}"], work)
        store_cpu = _sweep([*grid, "teacher_outputs=auto", f"results_dir={work / 'store'}"], work)
        live, store = _records(work / "live"), _records(work / "store")
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose("config", overrides=[*base, "results_dir=" + str(work / "x")])
        job = prepare(cfg)
        tokenizer = load_tokenizer(job.settings.teacher, work / "cache")
        toy_lengths = row_lengths(load_task_data(job.settings.task, tokenizer, work / "cache").train)
        batch = job.settings.task.recipe.batch_size
    if live.keys() != store.keys() or len(live) != n_jobs:
        raise SystemExit(f"expected {n_jobs} records in each sweep, got {len(live)} and {len(store)}")
    pairs = [(live[k], store[k]) for k in sorted(live)]
    kd = [(a, b) for a, b in pairs if a["objective"] == "vanilla_kd"]
    throughput = statistics.median(b["samples_per_s"] / a["samples_per_s"] for a, b in kd)
    wall = statistics.median(a["wall_time_s"] / b["wall_time_s"] for a, b in kd)
    same_best = sum(a["best"]["dev"] == b["best"]["dev"] for a, b in pairs)
    worst = max(abs(ea[k] - eb[k]) for a, b in pairs for ea, eb in zip(a["epochs"], b["epochs"], strict=True)
                for k in ea if k.startswith("loss") or k == "train_loss")
    depths = sorted({str(b["teacher_outputs"]["depth"]) for b in store.values()})
    print(f"# distill_sweep bench_sweep: toy task, teacher 12 layers x 128 -> 3-layer students, {len(pairs)} jobs per "
          f"sweep ({args.objectives} x inits {args.inits} x seeds {args.seeds}), {args.num_train} train rows, {args.epochs} "
          "epochs per stage, 1 thread")
    print("| measure | without the store (live) | with the store + truncated teacher | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| sweep CPU-seconds (one process each, store build included) | {live_cpu:.0f} | {store_cpu:.0f} | "
          f"{live_cpu / store_cpu:.2f}x less |")
    print(f"| vanilla_kd job: training samples/s (median of {len(kd)} pairs) | "
          f"{statistics.median(a['samples_per_s'] for a, _ in kd):.0f} | "
          f"{statistics.median(b['samples_per_s'] for _, b in kd):.0f} | {throughput:.2f}x faster |")
    print(f"| vanilla_kd job: wall seconds (median of {len(kd)} pairs) | "
          f"{statistics.median(a['wall_time_s'] for a, _ in kd):.1f} | "
          f"{statistics.median(b['wall_time_s'] for _, b in kd):.1f} | {wall:.2f}x less |")
    print(f"\nresults unchanged: best dev metric equal in {same_best}/{len(pairs)} pairs; largest per-epoch loss "
          f"difference {worst:.2e}; stage-1 teacher depths used: {', '.join(depths)} (None = all 12)")
    print("\n| padded / real tokens | uniform batches | length-grouped batches |")
    print("|---|---:|---:|")
    for name, uniform, grouped in padding_rows(toy_lengths, batch):
        print(f"| {name}, batch {batch} | {uniform:.3f} | {grouped:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
