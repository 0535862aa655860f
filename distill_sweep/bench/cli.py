"""`python -m distill_sweep.bench.cli`: how long the command line takes before any training.

Times whole processes (wall clock, median of `--repeats`), the way a user waits for them:
* `--help`;
* planning the Table 3 grid (504 jobs) with `+dry_run=true`: composing and validating every job;
* a no-op re-run: a small toy grid whose jobs are all complete is run again (nothing to train);
* refusals of a bad setting, for one job and in a sweep: the schema's own groups, a part's own settings, a
  rule between parts, a layer rule on numbers the teacher's config states (job.identify) and a task's files
  (job.check_paths), all checked before torch is imported, and one that needs transformers' configs
  (prepare.py: transformers and torch first).
Absolute seconds on a shared machine are noise: read them as orders of magnitude.

`--busy` (on by default; `--no-busy` skips it): one small toy att_mse job while another process keeps one core
busy, with the default threads (the CPUs this process may use, OpenMP waiting passively), with `threads=1`, and
with OpenMP spinning (OMP_WAIT_POLICY=ACTIVE: torch's behaviour before the command line set PASSIVE); each time
as a ratio to `threads=1` of the same round.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from distill_sweep.bench.json_output import writes_json

TOY = ["task=toy", "teacher=tiny", "logger=none", "threads=1", "task.recipe.num_train=128", "task.recipe.num_dev=64",
       "teacher.finetune.epochs=1", "epochs=1", "max_steps_per_epoch=2", "guards.allow_weak_teacher=true"]


def _run(args: Sequence[str], cwd: Path, module: str = "distill_sweep", env: dict[str, str] | None = None
         ) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", **(env or {})})
    return time.perf_counter() - start, proc


def _timed(name: str, args: Sequence[str], cwd: Path, repeats: int, expect: str, code: int = 0
           ) -> tuple[str, list[float]]:
    times = []
    for _ in range(repeats):
        seconds, proc = _run(args, cwd)
        if proc.returncode != code or expect not in proc.stdout + proc.stderr:
            raise SystemExit(f"{name}: exit {proc.returncode}, expected {expect!r}:\n{proc.stderr[-2000:]}")
        times.append(seconds)
    return name, times


# One README-style job, small enough to repeat: the threads' cost shows in every step, not in start-up.
BUSY_JOB = ["task=toy", "teacher=tiny", "objective=att_mse", "init=1", "logger=none", "task.recipe.num_train=500",
            "epochs=1", "guards.allow_weak_teacher=true"]
BUSY_CASES = [("threads=1", ["threads=1"], {}), ("default threads", [], {}),
              ("default threads, OpenMP spinning (OMP_WAIT_POLICY=ACTIVE)", [], {"OMP_WAIT_POLICY": "ACTIVE"})]


def _busy_rows(work: Path, repeats: int) -> list[tuple[str, list[float], list[float]]]:
    """Each case's seconds and its ratio to threads=1 of the same round, beside a process spinning on one core."""
    store = [f"results_dir={work / 'busy-results'}", f"cache_dir={work / 'cache'}"]
    _, warm = _run([*BUSY_JOB, "threads=1", "seed=0", *store], work)  # the teacher fine-tuned once, cached
    if warm.returncode != 0:
        raise SystemExit(f"the toy job failed:\n{warm.stderr[-2000:]}")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}  # the command line's own default
    seconds: dict[str, list[float]] = {name: [] for name, _, _ in BUSY_CASES}
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for seed in range(1, repeats + 1):
            for name, args, extra in BUSY_CASES:
                shutil.rmtree(work / "busy-results", ignore_errors=True)
                took, proc = _run([*BUSY_JOB, *args, f"seed={seed}", *store], work, env={**env, **extra})
                if proc.returncode != 0:
                    raise SystemExit(f"{name}: exit {proc.returncode}:\n{proc.stderr[-2000:]}")
                seconds[name].append(took)
    finally:
        busy.kill()
        busy.wait()
    one = seconds["threads=1"]
    return [(name, times, [t / o for t, o in zip(times, one)]) for name, times in seconds.items()]


@writes_json("cli")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.bench.cli", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--preset", default="paper_table3", help="the grid to plan (default: 504 jobs)")
    parser.add_argument("--busy", action=argparse.BooleanOptionalAction, default=True,
                        help="also time a toy job beside a busy process (default threads vs threads=1)")
    parser.add_argument("--busy-repeats", type=int, default=2)
    args = parser.parse_args(argv)
    busy_rows = []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        store = [f"results_dir={work / 'results'}", f"cache_dir={work / 'cache'}"]
        rows.append(_timed("--help", ["--help"], work, args.repeats, "== Configuration groups =="))
        rows.append(_timed(f"plan experiment={args.preset} (dry run)",
                           [f"experiment={args.preset}", *store, "-m", "+dry_run=true"], work, args.repeats,
                           "jobs in the grid"))
        grid = [*TOY, "objective=vanilla_kd,hid_seq", "seed=1,2", *store, "-m"]
        _, first = _run(grid, work)
        if first.returncode != 0:
            raise SystemExit(f"the toy grid failed:\n{first.stderr[-2000:]}")
        rows.append(_timed("no-op re-run of a completed 4-job toy grid", grid, work, args.repeats,
                           "4 jobs in the grid, 4 already completed, 0 to run"))
        rows.append(_timed("refusal: a schema error (epochs=0)", [*TOY, "epochs=0", *store], work, args.repeats,
                           "epochs=0: must be >= 1", code=2))
        rows.append(_timed("refusal: a schema error in a sweep (epochs=1,0 -m)", [*TOY, "epochs=1,0", *store, "-m"],
                           work, args.repeats, "epochs=0: must be >= 1", code=2))
        rows.append(_timed("refusal: a part's setting (objective.alpha=7)", [*TOY, "objective.alpha=7", *store], work,
                           args.repeats, "objective.alpha=7", code=2))
        rows.append(_timed("refusal: a part's setting in a sweep (objective.alpha=0.5,7 -m)",
                           [*TOY, "objective.alpha=0.5,7", *store, "-m"], work, args.repeats, "objective.alpha=7",
                           code=2))
        rows.append(_timed("refusal: a rule between parts (objective=att_mse student=bilstm)",
                           [*TOY, "objective=att_mse", "student=bilstm", *store], work, args.repeats,
                           "intermediate-layer terms", code=2))
        rows.append(_timed("refusal: a layer rule the teacher's config states (init=[1,2], a 3-layer student)",
                           [*TOY, "init=[1,2]", *store], work, args.repeats, "names 2 teacher layers", code=2))
        (work / "glue").mkdir()  # a data folder without the task's TSVs
        rows.append(_timed("refusal: a task's files (task.data_dir without the TSVs)",
                           [*(a for a in TOY if not a.startswith("task")), "task=rte", "task.max_seq_length=64",
                            f"task.data_dir={work / 'glue'}", *store],
                           work, args.repeats, "train.tsv not found", code=2))
        rows.append(_timed("refusal: a rule on transformers' configs (objective=att_mse student=fresh: heads)",
                           [*TOY, "objective=att_mse", "student=fresh", *store], work, args.repeats,
                           "compares attention heads one to one", code=2))
        if args.busy:
            busy_rows = _busy_rows(work, args.busy_repeats)
    print(f"# distill_sweep bench_cli: wall seconds, median of {args.repeats} (min-max)")
    print("| command | median s | range s |")
    print("|---|---:|---:|")
    for name, times in rows:
        print(f"| {name} | {statistics.median(times):.1f} | {min(times):.1f}-{max(times):.1f} |")
    if busy_rows:
        print(f"\n# a toy att_mse job beside a process that keeps one core busy ({os.cpu_count()} CPUs): wall "
              f"seconds and the ratio to threads=1 of the same round, median of {args.busy_repeats}")
        print("| threads | median s | ratio to threads=1 | ratio range |")
        print("|---|---:|---:|---:|")
        for name, times, ratios in busy_rows:
            print(f"| {name} | {statistics.median(times):.1f} | {statistics.median(ratios):.2f} | "
                  f"{min(ratios):.2f}-{max(ratios):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
