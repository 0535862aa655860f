"""`python -m distill_sweep.bench.pack`: a pack against its jobs run alone, on one device (a device measurement
run by hand, e.g. on a lent GPU; not in `make bench`).

N students of one grid (default: the Table 1 objectives that read intermediate layers, hid_cls, hid_seq, att_mse
and att_kl, plus vanilla_kd; the toy task, init 1, seed 1; the tiny teacher, or a larger random one of the shape
given, fine-tuned briefly) are trained in this process, each job alone (`run_job`, one after the other) and all
of them as one pack (`run_pack`: lockstep, one teacher forward per batch, training/pack.py). Before either, the
teacher is fine-tuned and cached, each member's build job makes its teacher-output store (as a sweep's build jobs
do) and each member trains one step per stage (its kernels warmed on the device), so neither side pays them.
Reported:

* Per student: training samples (the rows of the batches it trained, as train_epoch counts them) and samples/s
  alone and in the pack, on the clock of the records' `samples_per_s` (a step from fetching its batch to the
  optimiser's update; in a pack a member's own steps: a shared teacher forward counts for the member that ran
  it, the hand-over between members for none). All students: their samples over the sum of their step times.
* Wall seconds: the N jobs alone one after another against the pack (set-up, evaluation, checkpoints included).
* FLOPs of the training steps, counted with `torch.utils.flop_counter.FlopCounterMode` around every
  `train_epoch` (each pack member's in its own thread) in a second, identical run of each side (the counter slows
  the steps it counts; the run trains the same batches), over the timed run's step seconds: the achieved FLOP/s,
  and MFU = achieved FLOP/s / the device's peak (`--peak-tflops`, or the dense peak of a known CUDA device at
  `--precision`; n/a otherwise, and on CPU).
* Results unchanged: each member's per-epoch losses and dev metrics in the pack are those of its job alone,
  exactly; if not, the tables are still printed (and written with `--json`) and the bench exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from torch.utils.flop_counter import FlopCounterMode

from distill_sweep.bench.json_output import writes_json
from distill_sweep.cli.run_job import run_job, run_pack
from distill_sweep.config.space import CONF_DIR, VERSION_BASE
from distill_sweep.job.identity import identify
from distill_sweep.sweep.packs import write_pack_file
from distill_sweep.training import stages
from distill_sweep.training.cost import cpu_attention_flops

OBJECTIVES = "hid_cls,hid_seq,att_mse,att_kl,vanilla_kd"
DECODER_OBJECTIVES = "fkl,rkl,gjsd"  # --decoder: the next-token terms that read the live teacher's logits
# dense (no sparsity) peak TFLOP/s by CUDA device name: (a part of the name, bf16 on tensor cores, fp32 without
# TF32, torch's default for matmuls), from NVIDIA's data sheets; the first part the device's name contains wins
PEAK_TFLOPS = (
    ("H200 NVL", 835.0, 60.0),
    ("H200", 989.0, 67.0),  # the SXM part: H100 SXM's compute
    ("H100 NVL", 835.0, 60.0),
    ("H100 PCIe", 756.0, 51.0),
    ("H100", 989.0, 67.0),  # SXM ("H100 80GB HBM3")
    ("A100", 312.0, 19.5),
)


def peak_tflops(device_name: str, precision: str) -> float | None:
    """The dense peak of a known CUDA device at `precision` (bf16 | fp32), else None."""
    for name, bf16, fp32 in PEAK_TFLOPS:
        if name.lower() in device_name.lower():
            return bf16 if precision == "bf16" else fp32
    return None


def mfu(flops: float, seconds: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation: `flops` done in `seconds` over a peak of `peak` TFLOP/s (None: unknown)."""
    if peak is None or seconds <= 0:
        return None
    return flops / seconds / (peak * 1e12)


@dataclass
class Tally:
    """What a job's training steps did: rows trained, their seconds (train_epoch's clock) and counted FLOPs."""

    samples: float = 0.0
    seconds: float = 0.0
    flops: int = 0


@contextlib.contextmanager
def watched_training(count_flops: bool) -> Iterator[dict[str, Tally]]:
    """Every `train_epoch` the stage driver runs meanwhile, tallied per thread (a pack's members have one each;
    jobs alone run in the main thread): its samples and seconds, and with `count_flops` its FLOPs."""
    tallies: dict[str, Tally] = {}
    original = stages.train_epoch
    mapping = cpu_attention_flops() if count_flops else {}

    def train_epoch(*args: Any, **kwargs: Any) -> Any:
        counter = FlopCounterMode(display=False, custom_mapping=mapping) if count_flops else None
        with counter if counter is not None else contextlib.nullcontext():
            progress = original(*args, **kwargs)
        tally = tallies.setdefault(threading.current_thread().name, Tally())
        tally.samples += progress.samples
        tally.seconds += progress.seconds
        tally.flops += counter.get_total_flops() if counter is not None else 0
        return progress

    stages.train_epoch = train_epoch
    try:
        yield tallies
    finally:
        stages.train_epoch = original


def _compose(overrides: Sequence[str]) -> DictConfig:
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        cfg = compose("config", overrides=list(overrides))
    OmegaConf.set_struct(cfg, False)
    return cfg


def _at_least(low: int) -> Any:
    """An argparse type: an integer >= `low` (argparse's one-line error and exit 2 otherwise)."""
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value
    parse.__name__ = "integer"  # argparse names the type in its error
    return parse


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m distill_sweep.bench.pack", description=__doc__.split("\n")[0])
    p.add_argument("--objectives", default=None,
                   help=f"the members, comma-separated (conf/objective/; default {OBJECTIVES}, --decoder: "
                        f"{DECODER_OBJECTIVES})")
    p.add_argument("--decoder", action="store_true",
                   help="decoder jobs (procedure=causal_lm on the toy corpus; --teacher tiny_llama by default)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--steps", type=_at_least(1), default=50, help="max_steps_per_epoch of every stage")
    p.add_argument("--epochs", type=_at_least(1), default=1, help="per stage")
    p.add_argument("--batch", type=_at_least(1), default=32)
    p.add_argument("--threads", type=_at_least(0), default=0, help="torch threads of each job (0: the job's default)")
    p.add_argument("--teacher", default="tiny", help="a conf/teacher/ option (tiny: a random BERT, the shape below)")
    p.add_argument("--teacher-layers", type=_at_least(1), default=None, help="teacher.config.num_hidden_layers (tiny: 6)")
    p.add_argument("--hidden", type=_at_least(1), default=None, help="teacher.config.hidden_size, the students' too (tiny: 64)")
    p.add_argument("--heads", type=_at_least(1), default=None, help="teacher.config.num_attention_heads (tiny: 4)")
    p.add_argument("--ffn", type=_at_least(1), default=None, help="teacher.config.intermediate_size (tiny: 128)")
    p.add_argument("--student-layers", type=_at_least(1), default=3)
    p.add_argument("--init", default="1")
    p.add_argument("--teacher-outputs", choices=["auto", "live"], default="auto")
    p.add_argument("--lr", type=float, default=None,
                   help="the teacher's and the students' (default: the toy recipe's 1e-3, for tiny models)")
    p.add_argument("--teacher-epochs", type=_at_least(1), default=1, help="the teacher's fine-tuning, --steps steps each")
    p.add_argument("--num-train", type=_at_least(0), default=0, help="toy training rows (0: --steps x --batch)")
    p.add_argument("--num-dev", type=_at_least(1), default=200)
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="the device's peak at --precision (default: known CUDA devices' dense peak; else MFU n/a)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="one more override for every job (repeatable)")
    p.add_argument("--cache-dir", type=Path, default=None, help="teachers and data (default: a temporary one)")
    return p.parse_args(argv)


def decoder_overrides(args: argparse.Namespace, cache: Path) -> list[str]:
    """--decoder: the overrides every decoder job of the bench shares (procedure=causal_lm on the toy corpus, the
    teacher trained --steps steps from its config)."""
    shape = [f"teacher.config.{key}={value}" for key, value in (
        ("num_hidden_layers", args.teacher_layers), ("hidden_size", args.hidden),
        ("num_attention_heads", args.heads), ("intermediate_size", args.ffn)) if value is not None]
    teacher = "tiny_llama" if args.teacher == "tiny" else args.teacher
    out = ["procedure=causal_lm", f"teacher={teacher}", *shape, "logger=none", f"device={args.device}",
           f"precision={args.precision}", f"procedure.batch_size={args.batch}", f"procedure.epochs={args.epochs}",
           f"max_steps_per_epoch={args.steps}", f"procedure.teacher_steps={args.steps}",
           f"student.num_layers={args.student_layers}", f"init={'skip' if args.init == '1' else args.init}", "seed=1",  # (decoders: bottom|skip|prune)
           "skip_nonfinite=true", "guards.allow_weak_teacher=true", f"cache_dir={cache}"]  # a briefly trained teacher
    if args.lr is not None:
        out.append(f"procedure.lr={args.lr}")
    if args.threads > 0:
        out.append(f"threads={args.threads}")
    return [*out, *args.set]


def job_overrides(args: argparse.Namespace, cache: Path) -> list[str]:
    """The overrides every job of the bench shares (the member's objective and results_dir apart)."""
    shape = [f"teacher.config.{key}={value}" for key, value in (
        ("num_hidden_layers", args.teacher_layers), ("hidden_size", args.hidden),
        ("num_attention_heads", args.heads), ("intermediate_size", args.ffn)) if value is not None]
    num_train = args.num_train or args.steps * args.batch
    out = [f"teacher={args.teacher}", *shape, "task=toy", "logger=none", f"device={args.device}", f"precision={args.precision}",
           f"task.recipe.num_train={num_train}", f"task.recipe.num_dev={args.num_dev}",
           f"optimizer.batch_size={args.batch}", f"epochs={args.epochs}", f"max_steps_per_epoch={args.steps}",
           f"student.num_layers={args.student_layers}", f"init={args.init}", "seed=1",
           f"teacher_outputs={args.teacher_outputs}", f"teacher.finetune.epochs={args.teacher_epochs}",
           f"teacher.finetune.max_steps_per_epoch={args.steps}", "guards.allow_weak_teacher=true",
           "skip_nonfinite=true", f"cache_dir={cache}"]  # a diverging random model is counted, not fatal
    if args.lr is not None:
        out.append(f"task.recipe.lr={args.lr}")
    if args.threads > 0:
        out.append(f"threads={args.threads}")
    return [*out, *args.set]


def _pack(cfgs: Sequence[DictConfig], where: Path) -> DictConfig:
    return OmegaConf.create({"pack_file": str(write_pack_file(where, [identify(cfg) for cfg in cfgs]))})


def _records(results: Path) -> dict[str, dict[str, Any]]:
    """The records under `results` by config hash."""
    out = {}
    for path in results.rglob("result.json"):
        written = json.loads(path.read_text())  # as written: compared key by key below
        out[written["config_hash"]] = written
    return out


def difference(alone: dict[str, Any], packed: dict[str, Any]) -> str | None:
    """Where a member's record in the pack differs from its job alone (per-epoch losses, dev metrics, best),
    or None when they are identical."""
    name = alone["objective"]
    for written, side in ((alone, "alone"), (packed, "in the pack")):
        if written.get("status") != "completed":
            return f"{name} {side}: status {written.get('status')} ({written.get('error')})"
    if len(alone["epochs"]) != len(packed["epochs"]):
        return f"{name}: {len(alone['epochs'])} epochs alone, {len(packed['epochs'])} in the pack"
    for a, b in zip(alone["epochs"], packed["epochs"], strict=True):
        for key in sorted(k for k in a if k.startswith("loss") or k in ("train_loss", "dev")):
            if a[key] != b.get(key):
                return f"{name} {a['stage']} epoch {a['epoch']} {key}: {a[key]} alone, {b.get(key)} in the pack"
    if alone["best"] != packed["best"]:
        return f"{name} best: {alone['best']} alone, {packed['best']} in the pack"
    return None


@dataclass
class Side:
    """The jobs alone or the pack: per member its training (timed run) and counted FLOPs (the counted run), the
    wall seconds of the timed run."""

    steps: list[Tally]
    flops: list[int]
    wall: float

    @property
    def samples(self) -> float:
        return sum(t.samples for t in self.steps)

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.steps)

    @property
    def total_flops(self) -> int:
        return sum(self.flops)


def run_alone(cfgs: Sequence[DictConfig], counted: Sequence[DictConfig]) -> tuple[Side, list[dict[str, Any]]]:
    """Each job alone, one after the other (timed), then again with the FLOPs counted; and their records."""
    records, steps, flops, wall = [], [], [], 0.0
    for cfg, count in zip(cfgs, counted, strict=True):
        start = time.perf_counter()
        with watched_training(count_flops=False) as tallies:
            records.append(run_job(cfg))
        wall += time.perf_counter() - start
        steps.append(tallies.get("MainThread", Tally()))
        with watched_training(count_flops=True) as tallies:
            run_job(count)
        _same_samples(steps[-1], tallies.get("MainThread", Tally()))
        flops.append(tallies.get("MainThread", Tally()).flops)
    return Side(steps, flops, wall), records


def run_as_pack(cfgs: Sequence[DictConfig], counted: Sequence[DictConfig], packs: Path) -> Side:
    """The jobs as one pack (timed), then again with the FLOPs counted in each member's thread."""
    start = time.perf_counter()
    with watched_training(count_flops=False) as tallies:
        run_pack(_pack(cfgs, packs / "timed"))
    wall = time.perf_counter() - start
    with watched_training(count_flops=True) as counts:
        run_pack(_pack(counted, packs / "counted"))
    steps = [tallies.get(f"pack-member-{i}", Tally()) for i in range(len(cfgs))]
    flops = [counts.get(f"pack-member-{i}", Tally()) for i in range(len(cfgs))]
    for a, b in zip(steps, flops, strict=True):
        _same_samples(a, b)
    return Side(steps, [t.flops for t in flops], wall)


def _same_samples(timed: Tally, counted: Tally) -> None:
    if timed.samples != counted.samples or not timed.samples:
        raise SystemExit(f"the counted run trained {counted.samples:.0f} samples, the timed one {timed.samples:.0f}")


def _rate(samples: float, seconds: float) -> float:
    return samples / seconds if seconds else 0.0


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}%"


@writes_json("pack")
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = args.objectives or (DECODER_OBJECTIVES if args.decoder else OBJECTIVES)
    objectives = [o.strip() for o in chosen.split(",") if o.strip()]
    if len(objectives) < 2 or len(set(objectives)) != len(objectives):
        raise SystemExit("--objectives: two or more different objectives")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        common = (decoder_overrides if args.decoder else job_overrides)(args, args.cache_dir or work / "cache")

        def cfgs(results: str, *extra: str) -> list[DictConfig]:
            return [_compose([*common, f"objective={o}", *extra, f"results_dir={work / results}"]) for o in objectives]

        # the teacher fine-tuned and cached, each member's teacher-output store built (its build job, as a sweep
        # runs before its jobs) and each objective's step run once on the device (its kernels warmed)
        for cfg in [*cfgs("warm", "+prepare_only=true"), *cfgs("warm", "max_steps_per_epoch=1")]:
            run_job(cfg)
        # the counted runs of decoder jobs make their logits whole: the chunked losses take their gradients inside
        # the forward (torch.autograd.grad), which FlopCounterMode's backward hooks refuse; the FLOPs are the same
        counted = ["procedure.logit_chunk=0"] if args.decoder else []
        alone, records = run_alone(cfgs("alone"), cfgs("alone-counted", *counted))
        pack = run_as_pack(cfgs("pack"), cfgs("pack-counted", *counted), work / "packs")
        packed = _records(work / "pack")
    n, device = len(objectives), records[0].get("device") or "?"
    peak = args.peak_tflops if args.peak_tflops is not None else (
        None if device == "cpu" else peak_tflops(device, args.precision))
    shape = ", ".join(f"{k} {v}" for k, v in (("layers", args.teacher_layers), ("hidden", args.hidden),
                                               ("heads", args.heads), ("ffn", args.ffn)) if v is not None)
    what = "causal_lm on the toy corpus" if args.decoder else "toy task"
    init = "skip" if args.decoder and args.init == "1" else args.init  # (decoder_overrides' default)
    teacher = "tiny_llama" if args.decoder and args.teacher == "tiny" else args.teacher
    print(f"# distill_sweep bench_pack: {what}, teacher {teacher}{f' ({shape})' if shape else ''} -> "
          f"{args.student_layers}-layer students, {n} members ({', '.join(objectives)}) at init {init}, "
          f"{args.steps} steps x batch {args.batch} per epoch, {args.epochs} epoch(s) per stage, "
          f"teacher_outputs={args.teacher_outputs}, device {device}, {args.precision}, "
          f"threads {args.threads or 'default'}")
    print("| student | training samples | samples/s alone | samples/s in the pack (own steps) | pack / alone |")
    print("|---|---:|---:|---:|---:|")
    for name, a, p in zip(objectives, alone.steps, pack.steps, strict=True):
        rate_a, rate_p = _rate(a.samples, a.seconds), _rate(p.samples, p.seconds)
        print(f"| {name} | {a.samples:.0f} | {rate_a:.1f} | {rate_p:.1f} | {_ratio(rate_p, rate_a)} |")
    rate_a, rate_p = _rate(alone.samples, alone.seconds), _rate(pack.samples, pack.seconds)
    print(f"| all {n} students | {alone.samples:.0f} | {rate_a:.1f} | {rate_p:.1f} | {_ratio(rate_p, rate_a)} |")
    peak_text = f"{peak:g} TFLOP/s" if peak is not None else "unknown: --peak-tflops"
    print(f"\n| measure | {n} jobs alone | the pack | alone / pack |")
    print("|---|---:|---:|---:|")
    print(f"| wall seconds (set-up, evaluation, checkpoints included) | {alone.wall:.2f} | {pack.wall:.2f} | "
          f"{_ratio(alone.wall, pack.wall)} |")
    print(f"| training seconds (the steps) | {alone.seconds:.2f} | {pack.seconds:.2f} | "
          f"{_ratio(alone.seconds, pack.seconds)} |")
    print(f"| training FLOPs (FlopCounterMode) | {alone.total_flops:.4g} | {pack.total_flops:.4g} | "
          f"{_ratio(alone.total_flops, pack.total_flops)} |")
    achieved_a, achieved_p = _rate(alone.total_flops, alone.seconds), _rate(pack.total_flops, pack.seconds)
    print(f"| achieved TFLOP/s (FLOPs / training seconds) | {achieved_a / 1e12:.4g} | {achieved_p / 1e12:.4g} | "
          f"{_ratio(achieved_a, achieved_p)} |")
    print(f"| MFU (peak {peak_text}, {args.precision}) | {_percent(mfu(alone.total_flops, alone.seconds, peak))} | "
          f"{_percent(mfu(pack.total_flops, pack.seconds, peak))} | |")
    differences = [d for solo in records
                   if (d := difference(solo, packed.get(solo["config_hash"], {"objective": solo["objective"]})))]
    skipped = sum(int(solo.get("nonfinite_skipped") or 0) for solo in records)
    print(f"\nresults unchanged: per-epoch losses and dev metrics identical in {n - len(differences)}/{n} members "
          f"(alone against the pack); {skipped} step(s) of the jobs alone skipped as non-finite")
    if differences:
        print(f"bench_pack: the pack's results differ from the jobs alone: {differences[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
