"""`python -m distill_sweep.bench.report`: how long the report of a large store takes.

Writes a synthetic store (default 500 completed jobs: 10 objectives x 2 inits x 5 GLUE tasks x 5 seeds, each
with a 4-epoch dev curve; scores drawn from a seeded generator) and times the report command on it as a user
waits for it (a whole process, wall clock, median of `--repeats`): every table, the t-tests with their
t-interval CIs, effect sizes, ASO and seeds needed, the per-task test matrices, the PNG curves and report.html.
Then, in this process, the same report's phases: reading the records, the statistics and sections, the page.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from distill_sweep.analysis.paper import OBJECTIVE_ORDER, PAPER_STUDENT_LAYERS, PAPER_TEACHER_LAYERS
from distill_sweep.bench.json_output import writes_json
from distill_sweep.models.inits import resolve_init
from distill_sweep.records import record
from distill_sweep.records.record import InitInfo, Record, StudentInfo, TeacherInfo

TASKS = ("rte", "mrpc", "sst2", "qnli", "cola")


def _paper_init(spec: str) -> tuple[str, list[int]]:
    init = resolve_init(spec, PAPER_TEACHER_LAYERS, PAPER_STUDENT_LAYERS)
    return init.name, init.layers


INITS = {spec: _paper_init(spec) for spec in ("1", "3")}  # the paper's skip and bottom


def synthetic_store(root: Path, jobs: int, seed: int = 0) -> int:
    """Completed records of (objective x init x task x seed) until `jobs` are written; returns how many."""
    rng = np.random.default_rng(seed)
    objectives = [*OBJECTIVE_ORDER, "pkd"][:10]
    seeds = range(1, 1 + max(1, -(-jobs // (len(objectives) * len(INITS) * len(TASKS)))))
    written = 0
    for o, objective in enumerate(objectives):
        for init, (name, layers) in INITS.items():
            for t, task in enumerate(TASKS):
                for s in seeds:
                    if written == jobs:
                        return written
                    level = 0.6 + 0.02 * o + 0.03 * (init == "3") + 0.04 * t
                    curve = np.clip(level - 0.1 / np.arange(1, 5) + rng.normal(0, 0.01, 4), 0, 1)
                    epochs = [{"stage": "prediction", "epoch": e + 1, "step": 10 * (e + 1), "train_loss": 1 / (e + 1),
                               "dev": {"accuracy": float(v), "f1": float(v), "mcc": float(v)}}
                              for e, v in enumerate(curve)]
                    best = max(epochs, key=lambda e: e["dev"]["accuracy"])
                    digest = f"{written:010d}{'0' * 54}"
                    rec = Record(
                        task=task, objective=objective, seed=s, status="completed", procedure="task_specific",
                        config_hash=digest, init=InitInfo(spec=init, name=name, layers=layers),
                        student=StudentInfo(name="truncated", num_layers=3, hidden_size=32, num_heads=4,
                                            layer_map=[[i + 1, x] for i, x in enumerate(layers)],
                                            settings={"num_layers": 3}),
                        teacher=TeacherInfo.from_settings({"name": "bert_base", "num_hidden_layers": 12},
                                                          num_layers=12, hidden_size=32, source="trained",
                                                          path="/tmp/t", dev={"accuracy": 0.9}),
                        primary_metric={"mrpc": "f1", "cola": "mcc"}.get(task, "accuracy"), epochs=epochs,
                        best={"stage": "prediction", "epoch": best["epoch"], "dev": best["dev"]},
                        final={"dev": epochs[-1]["dev"]}, wall_time_s=60.0, samples_per_s=100.0, device="cpu",
                        config={"teacher": {"name": "bert_base", "num_hidden_layers": 12}},
                        started_at="2026-01-01T00:00:00", finished_at="2026-01-01T00:01:00")
                    path = root / task / objective / f"init-{init}" / f"seed-{s}" / digest[:10] / record.RECORD
                    record.write_record(path, rec)
                    written += 1
    return written


def _in_process(root: Path) -> list[tuple[str, float]]:
    """The report's phases, timed once in this process (imports already done)."""
    from distill_sweep.analysis.frames import load_store
    from distill_sweep.report.build import build_report
    from distill_sweep.report.cli import parse_args
    from distill_sweep.report.html_page import header, render_html

    opts = parse_args([str(root), "paper=false", f"out={root / 'tables_in_process'}"])
    phases = []
    start = time.perf_counter()
    st = load_store(opts.results_path, opts.which)
    phases.append(("read the records (store.load_store)", time.perf_counter() - start))
    start = time.perf_counter()
    doc, _ = build_report(opts, st)
    phases.append(("tables, statistics, figures (build_report)", time.perf_counter() - start))
    start = time.perf_counter()
    html = render_html(doc, "bench", header(opts, st.records))
    doc.render(markdown=True)
    phases.append((f"render Markdown and report.html ({len(html) / 1e6:.2f} MB)", time.perf_counter() - start))
    return phases


@writes_json("report")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.bench.report", description=__doc__)
    parser.add_argument("--jobs", type=int, default=500, help="completed records in the synthetic store")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "results"
        n = synthetic_store(root, args.jobs)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "distill_sweep.report", str(root), "paper=false"],
                                  capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            if proc.returncode != 0 or "HTML report:" not in proc.stdout:
                raise SystemExit(f"the report failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        size = (root / "tables" / "report.html").stat().st_size
        phases = _in_process(root)
    print(f"# distill_sweep bench_report: the report of a synthetic {n}-job store (10 objectives x 2 inits x "
          f"{len(TASKS)} tasks x seeds, 4-epoch curves)")
    print("| what | seconds |")
    print("|---|---:|")
    print(f"| the report command, whole process (median of {args.repeats}, range "
          f"{min(times):.1f}-{max(times):.1f}) | {statistics.median(times):.1f} |")
    for name, seconds in phases:
        print(f"| in process: {name} | {seconds:.2f} |")
    print(f"report.html: {size / 1e6:.2f} MB, one file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
