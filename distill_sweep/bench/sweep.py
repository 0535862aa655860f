"""`python -m distill_sweep.bench.sweep`: what the teacher-output store, the truncated teacher, packs and
length-grouped batches save, measured in one run (`make bench`).

* Sweep level: a sweep on the toy task with a deeper tiny teacher (12 layers, hidden 128) and 3-layer students,
  shaped like one task's block of a paper grid: `--grid table1` (the default: the nine objectives of paper_table1
  at init 1 x seeds) or `--grid table3` (inits 1, 2, 3 x seeds x objectives vanilla_kd, att_kl, hid_cls). It
  runs three times, each time as one `python -m distill_sweep ... -m` process: `teacher_outputs=live` (the
  teacher run in full at every step, as before the store), `teacher_outputs=auto` (the store, built by the
  sweep's own build job, plus the teacher run only to its deepest mapped layer in stage 1) and the store with
  `pack=auto` (the jobs of a seed trained in lockstep, one teacher forward per batch for all of them).
  Reported: total CPU-seconds of each process (user + sys) and their ratios. The teacher is fine-tuned once
  before and shared.
* Layer-passes (a forward of one layer over one example = 1, a training step = 3): the students' training
  plus every teacher forward (stage 1 and the store builds), against the floor: the students' training plus
  one teacher pass per epoch of stage 1 for each seed, to the deepest layer its jobs read.
* Job level: the vanilla_kd jobs of the live and store sweeps, paired by (init, seed): the ratio of their
  training throughput (samples/s of the stage steps, from the records) and of their wall times.
* Results unchanged: every pair's best dev accuracy and per-epoch losses are compared, live against the store
  (float tolerance) and the store against packs (exactly).
* Padding: padded / real tokens of the training batches, uniform batches vs length-grouped batches, on the
  toy task's training split and on GLUE-like (log-normal) lengths.

Absolute seconds on a shared machine are noise; the ratios come from the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from distill_sweep.analysis.paper import OBJECTIVE_ORDER, PAPER_STUDENT_LAYERS, PAPER_TEACHER_LAYERS
from distill_sweep.bench.json_output import writes_json
from distill_sweep.config.space import CONF_DIR, VERSION_BASE
from distill_sweep.data.batching import LengthGroupedBatches, row_lengths
from distill_sweep.data.glue import load_task_data
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.models.loading import load_tokenizer
from distill_sweep.sweep.packs import PACKS_DIR, read_pack_file

TEACHER = ["teacher=tiny", "teacher.config.num_hidden_layers=12", "teacher.config.hidden_size=128",
           "teacher.config.intermediate_size=256", "teacher.finetune.epochs=4"]
GRIDS = {  # objectives, inits
    "table3": ("vanilla_kd,att_kl,hid_cls", "1,2,3"),
    "table1": (",".join(OBJECTIVE_ORDER), "1"),
}
TEACHER_LAYERS, STUDENT_LAYERS = PAPER_TEACHER_LAYERS, PAPER_STUDENT_LAYERS
PACK_LINE = re.compile(r"the pack's teacher: (\d+) forwards, (\d+) layer-passes")


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _sweep(args: Sequence[str], cwd: Path) -> tuple[float, str]:
    """CPU-seconds of one `python -m distill_sweep` process (it and its children), and what it printed."""
    before = _cpu_children()
    proc = subprocess.run([sys.executable, "-m", "distill_sweep", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"})
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({' '.join(args)}):\n{proc.stderr[-3000:]}")
    return _cpu_children() - before, proc.stdout + proc.stderr


def packed_jobs(sweep_dirs: Path) -> set[str]:
    """The config hashes of the jobs the sweeps under `sweep_dirs` trained in packs (their pack files)."""
    return {identify(OmegaConf.create(member)).digest for path in sweep_dirs.rglob(f"{PACKS_DIR}/pack-*.json")
            for member in read_pack_file(path)}


def layer_passes(records: Sequence[dict[str, Any]], packed: set[str] = frozenset(), packed_teacher: int = 0
                 ) -> tuple[int, int]:
    """(the sweep's layer-passes, their floor). Students: 3 x layers x examples per epoch of every stage. The
    teacher: each store built once (a full pass), and stage 1's forwards: each job's own (its depth, from its
    record), except for the jobs trained in packs (`packed`), whose forwards the packs' processes counted
    (`packed_teacher`)."""
    student = sum(3 * STUDENT_LAYERS * r["data"]["train_size"] * len(r["epochs"]) for r in records)
    stores = {r["teacher_outputs"]["key"] + str(r["teacher_outputs"].get("cls_layers")): r["data"]["train_size"]
              for r in records if r["teacher_outputs"]["mode"] == "store"}
    teacher = TEACHER_LAYERS * sum(stores.values()) + packed_teacher
    for r in records:
        if r["config_hash"] in packed:
            continue
        depth = r["teacher_outputs"]["depth"]
        live = r["teacher_outputs"]["mode"] == "live"
        epochs = len(r["epochs"]) if live else sum(e["stage"] in ("intermediate", "combined") for e in r["epochs"])
        teacher += (TEACHER_LAYERS if depth is None else depth) * r["data"]["train_size"] * epochs
    once: dict[int, int] = {}  # per seed: one pass per stage-1 epoch, to the deepest layer its jobs read
    for r in records:
        depth = r["teacher_outputs"]["depth"]
        epochs = sum(e["stage"] in ("intermediate", "combined") for e in r["epochs"])
        once[r["seed"]] = max(once.get(r["seed"], 0),
                              (TEACHER_LAYERS if depth is None else depth) * r["data"]["train_size"] * epochs)
    return student + teacher, student + sum(once.values())


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
    parser.add_argument("--grid", choices=sorted(GRIDS), default="table1")
    parser.add_argument("--objectives", help="instead of the grid's")
    parser.add_argument("--inits", help="instead of the grid's")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--num-train", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=3, help="per stage (the paper: 10)")
    args = parser.parse_args(argv)
    objectives, inits = args.objectives or GRIDS[args.grid][0], args.inits or GRIDS[args.grid][1]
    n_jobs = len(objectives.split(",")) * len(inits.split(",")) * len(args.seeds.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = ["task=toy", *TEACHER, "logger=none", "threads=1", f"task.recipe.num_train={args.num_train}",
                "task.recipe.num_dev=200", f"epochs={args.epochs}", "guards.allow_weak_teacher=true",
                f"cache_dir={work / 'cache'}"]
        # the teacher once, for every sweep (fine-tuning is the same work with or without the store)
        _sweep([*base, "objective=vanilla_kd", "teacher_outputs=live", f"results_dir={work / 'warm'}"], work)
        grid = [*base, f"objective={objectives}", f"init={inits}", f"seed={args.seeds}", "-m"]
        live_cpu, _ = _sweep([*grid, "teacher_outputs=live", "pack=off", f"results_dir={work / 'live'}"], work)
        # the packs' sweep builds its own store too: a copy of the cache as it is now (the teacher, the data)
        shutil.copytree(work / "cache", work / "cache_packs")
        store_cpu, _ = _sweep([*grid, "teacher_outputs=auto", "pack=off", f"results_dir={work / 'store'}"], work)
        if packed_jobs(work / "multirun"):  # the baselines must be one process per job
            raise SystemExit("the live or store sweep trained jobs in packs: they must run with pack=off")
        pack_cpu, printed = _sweep([*grid, "teacher_outputs=auto", "pack=auto", f"results_dir={work / 'packs'}",
                                    f"cache_dir={work / 'cache_packs'}"], work)
        live, store, packs = _records(work / "live"), _records(work / "store"), _records(work / "packs")
        packed = packed_jobs(work / "multirun")
        with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
            cfg = compose("config", overrides=[*base, "results_dir=" + str(work / "x")])
        job = prepare(cfg)
        tokenizer = load_tokenizer(job.settings.teacher, work / "cache")
        toy_lengths = row_lengths(load_task_data(job.settings.task, tokenizer, work / "cache").train)
        batch = job.settings.task.recipe.batch_size
    if not (live.keys() == store.keys() == packs.keys()) or len(live) != n_jobs:
        raise SystemExit(f"expected {n_jobs} records in each sweep, got {len(live)}, {len(store)} and {len(packs)}")
    pairs = [(live[k], store[k]) for k in sorted(live)]
    kd = [(a, b) for a, b in pairs if a["objective"] == "vanilla_kd"]
    throughput = statistics.median(b["samples_per_s"] / a["samples_per_s"] for a, b in kd)
    wall = statistics.median(a["wall_time_s"] / b["wall_time_s"] for a, b in kd)
    same_best = sum(a["best"]["dev"] == b["best"]["dev"] for a, b in pairs)
    worst = max(abs(ea[k] - eb[k]) for a, b in pairs for ea, eb in zip(a["epochs"], b["epochs"], strict=True)
                for k in ea if k.startswith("loss") or k == "train_loss")
    same_packed = sum(store[k]["best"]["dev"] == packs[k]["best"]["dev"] and
                      [e["train_loss"] for e in store[k]["epochs"]] == [e["train_loss"] for e in packs[k]["epochs"]]
                      for k in store)
    depths = sorted({str(b["teacher_outputs"]["depth"]) for b in store.values()})
    shared = [(int(f), int(p)) for f, p in PACK_LINE.findall(printed)]
    store_passes, floor = layer_passes(list(store.values()))
    pack_passes, _ = layer_passes(list(packs.values()), packed, sum(p for _, p in shared))
    print(f"# distill_sweep bench_sweep: toy task, teacher 12 layers x 128 -> 3-layer students, {len(pairs)} jobs per "
          f"sweep ({args.grid}: {objectives} x inits {inits} x seeds {args.seeds}), {args.num_train} train rows, "
          f"{args.epochs} epochs per stage, 1 thread")
    print("| measure | without the store (live) | with the store + truncated teacher | store + packs | ratio |")
    print("|---|---:|---:|---:|---:|")
    print(f"| sweep CPU-seconds (one process each, store build included) | {live_cpu:.0f} | {store_cpu:.0f} | "
          f"{pack_cpu:.0f} | store {live_cpu / store_cpu:.2f}x less than live; packs {store_cpu / pack_cpu:.2f}x "
          "less than the store |")
    print(f"| layer-passes (students + teacher), floor {floor:.3g} | | {store_passes:.3g} | {pack_passes:.3g} | "
          f"store {store_passes / floor:.2f}x the floor; packs {pack_passes / floor:.2f}x |")
    print(f"| vanilla_kd job: training samples/s (median of {len(kd)} pairs) | "
          f"{statistics.median(a['samples_per_s'] for a, _ in kd):.0f} | "
          f"{statistics.median(b['samples_per_s'] for _, b in kd):.0f} | | {throughput:.2f}x faster |")
    print(f"| vanilla_kd job: wall seconds (median of {len(kd)} pairs) | "
          f"{statistics.median(a['wall_time_s'] for a, _ in kd):.1f} | "
          f"{statistics.median(b['wall_time_s'] for _, b in kd):.1f} | | {wall:.2f}x less |")
    print(f"\nresults unchanged: best dev metric equal in {same_best}/{len(pairs)} pairs of live and store (largest "
          f"per-epoch loss difference {worst:.2e}); best dev metric and per-epoch losses identical in "
          f"{same_packed}/{len(pairs)} pairs of store and packs; stage-1 teacher depths used: {', '.join(depths)} (None = "
          f"all 12); {len(shared)} pack(s), {sum(f for f, _ in shared)} shared teacher forwards")
    print("\n| padded / real tokens | uniform batches | length-grouped batches |")
    print("|---|---:|---:|")
    for name, uniform, grouped in padding_rows(toy_lengths, batch):
        print(f"| {name}, batch {batch} | {uniform:.3f} | {grouped:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
