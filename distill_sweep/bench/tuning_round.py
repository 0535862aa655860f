"""`python -m distill_sweep.bench.tuning_round`: a round of tuning trials of two arms, packed against unpacked
(`make bench`).

A tuned sweep (docs/guide/tuning.md, "A fair comparison") asks one trial of every study of every arm per round;
the trials that share batches train in one pack (`pack=auto`: lockstep, one teacher forward per batch). Here a
round is that of two objectives (vanilla_kd and att_kl, the fair tuning demo's arms) and `--studies` studies: each
study's point (a KD temperature) trained by both arms, every job a trial job (`+tune_trial=0`: trained without
the tuning holdout, scored on it), on the toy task with bench.sweep's deeper tiny teacher (12 layers x 128,
`--teacher tiny`: the demo's 2-layer one), which att_kl runs live in its first stage. The teacher is fine-tuned and its
output store built once before (a build job, `+prepare_only=true`), so neither side pays them. The round then
runs twice, each time as one `python -m distill_sweep ... -m` process with the in-process launcher: `pack=off`
(the trials one after another) and `pack=auto` (one pack). Reported, in one run:

* the process CPU-seconds (user + sys of the sweep process, from `getrusage`) and wall seconds of each side, and
  their ratios (unpacked / packed);
* the trials' own measured cost summed from their records (`cost.cpu_seconds`: a training step's CPU time, a
  pack member's share of the pack's; training FLOPs, the same on both sides);
* results unchanged: each trial's per-epoch losses and holdout score packed against alone, exactly.

Absolute seconds on a shared machine are noise; the ratios come from the same run. No test times this.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from distill_sweep.bench.json_output import writes_json
from distill_sweep.bench.sweep import TEACHER as DEEP_TEACHER
from distill_sweep.records.record import Record

OBJECTIVES = "vanilla_kd,att_kl"
# study k's point: spread over the demo's temperature range [1, 8] (one value per study, both arms at it)
TEMPERATURES = (1.5, 3.0, 6.0, 2.0, 4.0, 8.0)


def base_overrides(steps: int, train: int, teacher: str) -> list[str]:
    """The round's trial jobs, less the objective, the point and the side."""
    teacher_args = DEEP_TEACHER if teacher == "deep" else ["teacher=tiny", "teacher.finetune.epochs=3"]
    return ["task=toy", *teacher_args, "logger=none", "threads=1", f"task.recipe.num_train={train}",
            "task.recipe.num_dev=128", "guards.allow_weak_teacher=true", "epochs=1",
            f"max_steps_per_epoch={steps}", "optimizer.batch_size=32", "seed=1", "+tune_trial=0"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_side(argv: Sequence[str], cwd: Path) -> tuple[float, float]:
    """Run one sweep process; (its CPU-seconds, its wall seconds). Exits with its stderr's tail if it fails."""
    cpu, start = _children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "distill_sweep", *argv], cwd=cwd, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"bench.tuning_round: a sweep failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return cpu, wall


def trial_records(results: Path) -> dict[tuple[str, float], Record]:
    """The trial records of a side (the bench's own, just written), by (objective, temperature)."""
    out = {}
    for path in results.glob("**/result.json"):
        record = Record.from_dict(json.loads(path.read_text()))
        if record.tune_trial is not None:
            out[(record.objective, float(record.config["objective"]["temperature"]))] = record
    return out


def _same(a: Record, b: Record) -> bool:
    return a.best == b.best and [e.get("train_loss") for e in a.epochs] == [e.get("train_loss") for e in b.epochs]


def _sum(records: Sequence[Record], key: str) -> float:
    return sum(float(getattr(r.cost, key, None) or 0.0) for r in records)


@writes_json("tuning_round")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distill_sweep.bench.tuning_round", description=__doc__.split("\n")[0])
    parser.add_argument("--studies", type=int, default=3, help="studies per arm: the round's trials are 2 x this")
    parser.add_argument("--steps", type=int, default=40, help="training steps per stage of each trial")
    parser.add_argument("--train", type=int, default=1024, help="toy training examples")
    parser.add_argument("--teacher", choices=("deep", "tiny"), default="deep",
                        help="deep: bench.sweep's tiny teacher at 12 layers x 128 (att_kl runs it live in its first "
                             "stage, the forward a pack shares); tiny: the demo's 2-layer teacher")
    args = parser.parse_args(argv)
    if not 1 <= args.studies <= len(TEMPERATURES):
        parser.error(f"--studies must be in 1..{len(TEMPERATURES)}")
    points = ",".join(map(str, TEMPERATURES[: args.studies]))
    base = base_overrides(args.steps, args.train, args.teacher)
    with tempfile.TemporaryDirectory(prefix="bench-tuning-round-") as tmp:
        work = Path(tmp)
        cache = f"cache_dir={work / 'cache'}"
        print(f"bench.tuning_round: a round of {2 * args.studies} trials (2 arms x {args.studies} studies), "
              f"{args.steps} steps per stage; the teacher and its store first", file=sys.stderr, flush=True)
        run_side([*base, "objective=vanilla_kd", cache, f"results_dir={work / 'build'}", "+prepare_only=true"], work)
        measured, found = {}, {}
        for side in ("off", "auto"):
            results = work / f"results-{side}"
            measured[side] = run_side([*base, f"objective={OBJECTIVES}", f"objective.temperature={points}",
                                       f"pack={side}", cache, f"results_dir={results}",
                                       f"hydra.sweep.dir={work / f'multirun-{side}'}", "-m"], work)
            found[side] = trial_records(results)
    alone, packed = found["off"], found["auto"]
    same = sum(_same(alone[k], packed[k]) for k in alone if k in packed)
    print("# A round of tuning trials of two arms: packed against unpacked")
    print()
    teacher = "the 12-layer x 128 tiny teacher" if args.teacher == "deep" else "the 2-layer tiny teacher"
    print(f"{2 * args.studies} trial jobs (vanilla_kd and att_kl x {args.studies} studies' points), toy task, "
          f"{teacher}, {args.steps} steps per stage, one thread; each side one sweep process")
    print()
    print("| side | the trials ran | CPU-seconds | wall s | trials' own CPU-seconds | trials' FLOPs |")
    print("|---|---|---:|---:|---:|---:|")
    for side, words in (("off", "unpacked (pack=off)"), ("auto", "packed (pack=auto)")):
        cpu, wall = measured[side]
        records = list(found[side].values())
        packs = {r.pack for r in records if r.pack}  # each packed record names its pack
        how = f"in {len(packs)} pack(s)" if packs else "one after another"
        print(f"| {words} | {len(records)} {how} | {cpu:.1f} | {wall:.1f} | "
              f"{_sum(records, 'cpu_seconds'):.2f} | {_sum(records, 'flops'):.3g} |")
    print()
    (cpu_off, wall_off), (cpu_on, wall_on) = measured["off"], measured["auto"]
    print(f"unpacked / packed: CPU-seconds {cpu_off / cpu_on:.2f}x, wall {wall_off / wall_on:.2f}x (the sweep "
          f"processes, planning, teacher loading and evaluation included); CPU-seconds saved by the pack: "
          f"{cpu_off - cpu_on:+.1f}")
    print(f"results unchanged: {same} of {len(alone)} trials' losses and holdout scores identical packed and alone")
    return 0 if same == len(alone) == len(packed) else 1


if __name__ == "__main__":
    raise SystemExit(main())
