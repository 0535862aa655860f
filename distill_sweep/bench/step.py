"""Speed of one distillation step per objective: ``python -m distill_sweep.bench.step`` (``make bench``).

For every objective it times a full intermediate-stage step as the training job runs it (the loss function
and the update of distill_sweep.training.loop: teacher forward under no_grad with capture, student forward with
capture, objective, backward, gradient-norm check, AdamW step with the configured recipe, scheduler step)
and the baseline step WITHOUT any intermediate loss: the job's prediction-stage step (plain teacher
forward + student forward + vanilla KD loss + the same update).  Both run in the same process on the same
random batches; every measurement of an objective is paired with a baseline measurement taken right
before it (order rotated per repeat), and the reported ratio is the median over repeats of (objective step
time / baseline step time), which keeps the ratio meaningful on a machine whose load changes while the
benchmark runs.  vanilla_kd has no intermediate stage: its row times the prediction-stage step, the
baseline's own code, so it reads ~1.00 and shows the noise floor of the run.

Defaults follow the spec: random-init BERT configs, teacher 6 layers x 384 wide with 12 heads of 32
(keeping RoBERTa-base's head count, so each layer materialises as many S x S score maps as the real
teacher), student 3 layers x 384 / 12 heads mapped to teacher layers (2, 4, 6), vocab 30522, seq 128,
batch 16, conf/optimizer/adamw.yaml, CPU, float32 (``--bf16`` for bf16 autocast).  Like a training job
the benchmark keeps freed memory in the process (allocator.py).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from torch import Tensor, nn

from distill_sweep.analysis.paper import OBJECTIVE_ORDER
from distill_sweep.bench.decoder_step import decoder_table
from distill_sweep.bench.json_output import writes_json
from distill_sweep.bench.timing import (
    Step,
    bf16_autocast,
    choose_clock,
    cycle,
    paired_repeats,
    sync,
    training_step,
)
from distill_sweep.bench.workload import (
    load_objective_cfg,
    make_batches,
    make_bilstm_student,
    make_models,
    make_sps_student,
    model_arguments,
    objective_conf_dir,
)
from distill_sweep.models.capture import run_with_features
from distill_sweep.models.inits import skip_layers
from distill_sweep.objectives import ObjectiveSettings
from distill_sweep.objectives.core import Objective, build_objective
from distill_sweep.training.allocator import keep_freed_memory

PAPER_OBJECTIVES = (
    *OBJECTIVE_ORDER,
    "val_kl",  # the paper's third attention term (part of att_kl_val_kl), timed alone
    "pkd",  # PKD's pkd_cls term (its intermediate-stage step times the term without the KD part)
    "rel_kl",  # MiniLMv2 relations: Q-Q, K-K, V-V over 48 relation heads (384 / 48 = 8 wide)
)
SPS_ROW = "vanilla_kd@sps2"  # --sps: the prediction-stage step of an SPS-2 student (students/sps.py)
BILSTM_ROW = "logit_mse@bilstm"  # --bilstm: the prediction-stage step of Tang et al.'s BiLSTM (students/bilstm.py)
OTHER_STUDENTS = (SPS_ROW, BILSTM_ROW)  # rows of another student, not an objective's cost
N_TRAIN = 10_000  # training examples the batches' `idx` point into (the contrastive memory's size)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m distill_sweep.bench.step", description=__doc__.split("\n")[0])
    p.add_argument("--objectives", default=",".join(PAPER_OBJECTIVES), help="comma-separated names")
    # Many short pairs rather than a few long ones: one step varies by 5-10% on a shared machine; medians of
    # 12-15 single-step pairs read the noise-floor row at 0.997-1.020, medians of 5 two-step pairs at 0.966.
    model_arguments(p, batch=16, repeats=12, threads=0)
    p.add_argument("--steps", type=int, default=1, help="steps per measurement")
    p.add_argument(
        "--clock",
        choices=["auto", "wall", "cpu"],
        default="auto",
        help="wall: elapsed time; cpu: this process's CPU time, immune to being descheduled on a shared "
        "machine (exact for one thread); auto: cpu with one CPU thread, else wall",
    )
    p.add_argument("--conf-dir", type=Path, default=None, help="directory of objective YAMLs")
    p.add_argument("--sps", action="store_true",
                   help="add a row: vanilla KD on an SPS-2 student (the student's layers applied twice, Q/K "
                   "swapped in the upper copy: the same parameters, twice the encoder work)")
    p.add_argument("--bilstm", action="store_true",
                   help="add a row: Tang et al.'s BiLSTM student (student=bilstm, default sizes) with the "
                   "logit-MSE prediction loss, against the truncated student's vanilla KD step")
    p.add_argument("--default-malloc", action="store_true",
                   help="leave glibc malloc as it is (training jobs keep freed memory; see allocator.py)")
    p.add_argument("--decoder", action="store_true",
                   help="add a table: the decoder objectives' steps (procedure=causal_lm, a Llama teacher of the same "
                   "shape with grouped-query attention) against the plain forward-KL step")
    return p.parse_args(argv)


class EncoderRows:
    """The encoder table's rows: per objective its training step, its objective module (None: no intermediate
    term) and the terms it adds; --sps and --bilstm add a row of another student."""

    def __init__(self, args: argparse.Namespace, cfgs: dict[str, ObjectiveSettings], teacher: nn.Module,
                 student: nn.Module, layer_map: list[tuple[int, int]], make_step: Callable[..., Step]) -> None:
        conf_dir = args.conf_dir or objective_conf_dir()
        kd = load_objective_cfg("vanilla_kd", conf_dir)
        self.baseline = make_step(Objective(kd, None, regression=False).loss_fn("prediction", student, teacher),
                                  list(student.parameters()))
        self.steps: dict[str, Step] = {}
        self.objectives: dict[str, Any] = {}
        self.terms: dict[str, str] = {}
        train_labels = torch.randint(0, 2, (N_TRAIN,), generator=torch.Generator().manual_seed(1))
        for name, settings in cfgs.items():
            obj = build_objective(settings, student_config=student.config, teacher_config=teacher.config,
                                  layer_map=layer_map, train_labels=train_labels, num_labels=2)
            self.terms[name] = "+".join(settings.terms) or "prediction"
            if obj is None:  # vanilla KD: the prediction-stage step, through the same code as the baseline
                step = make_step(Objective(kd, None, regression=False).loss_fn("prediction", student, teacher),
                                 list(student.parameters()))
            else:
                obj = obj.to(args.device).train()
                objective = Objective(settings, obj, regression=False)
                step = make_step(objective.loss_fn("intermediate", student, teacher),
                                 objective.trainable("intermediate", student))
            self.steps[name], self.objectives[name] = step, obj
        if args.sps:
            sps = make_sps_student(student, args.student_layers).to(args.device).train()
            self._other(SPS_ROW, make_step(Objective(kd, None, regression=False).loss_fn("prediction", sps, teacher),
                                           list(sps.parameters())),
                        f"prediction, student sps2: {args.student_layers} layers run twice")
        if args.bilstm:
            bilstm = make_bilstm_student(args).to(args.device).train()
            mse = load_objective_cfg("logit_mse", conf_dir)
            self._other(BILSTM_ROW, make_step(Objective(mse, None, regression=False).loss_fn("prediction", bilstm,
                                                                                           teacher),
                                              list(bilstm.parameters())),
                        "prediction (logit MSE), student bilstm: 300-d words, 2 x 300 LSTM")

    def _other(self, name: str, step: Step, terms: str) -> None:
        self.steps[name], self.objectives[name], self.terms[name] = step, None, terms


def loss_alone(obj: Any, batch: dict[str, Tensor], teacher: nn.Module, student: nn.Module, device: str,
               autocast: Callable[[], Any], clock: Callable[[], float]) -> float:
    """Objective forward + backward alone, on features captured beforehand (student ones as leaves)."""

    def leaf(t: Tensor) -> Tensor:
        return t.detach().clone().requires_grad_(t.requires_grad)

    with autocast():
        with torch.inference_mode():
            ft = run_with_features(teacher, batch, hidden=obj.needs_hidden, qkv_layers=obj.teacher_qkv_layers)
        fs = run_with_features(student, batch, hidden=obj.needs_hidden, qkv_layers=obj.student_qkv_layers)
    if fs.hidden_states is not None:
        fs.hidden_states = tuple(leaf(h) for h in fs.hidden_states)
    fs.qkv = {k: (leaf(a), leaf(b), leaf(c)) for k, (a, b, c) in fs.qkv.items()}
    sync(device)
    t0 = clock()
    with autocast():
        loss, _ = obj(fs, ft, batch)
    loss.backward()
    sync(device)
    return clock() - t0


@writes_json("step")
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    conf_dir = args.conf_dir or objective_conf_dir()
    names = [n.strip() for n in args.objectives.split(",") if n.strip()]
    if not names:
        raise SystemExit("--objectives names no objective")
    cfgs = {name: load_objective_cfg(name, conf_dir) for name in names}  # bad names fail before any work
    kept = False if args.default_malloc else keep_freed_memory()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    clock, clock_name = choose_clock(args.clock, args.device)
    teacher, student = make_models(args)
    # The default init's ("skip") pairing, from the same function the training job uses.
    layer_map = list(enumerate(skip_layers(args.teacher_layers, args.student_layers), start=1))
    batches = cycle(make_batches(args, 4, N_TRAIN))
    autocast = bf16_autocast(args.device, args.bf16)
    opt_cfg = OmegaConf.load(conf_dir.parent / "optimizer" / "adamw.yaml")

    def make_step(loss_fn: Callable[..., Any], params: list[nn.Parameter]) -> Step:
        return training_step(loss_fn, params, opt_cfg, autocast)

    rows = EncoderRows(args, cfgs, teacher, student, layer_map, make_step)
    print(
        f"# distill_sweep bench: torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"device {args.device}, threads {torch.get_num_threads()}, {'bf16 autocast' if args.bf16 else 'fp32'}",
        file=sys.stderr,
    )
    alone: dict[str, list[float]] = {n: [] for n in rows.steps}

    def measure_loss_alone(name: str) -> None:
        if rows.objectives[name] is not None:
            alone[name].append(loss_alone(rows.objectives[name], next(batches), teacher, student, args.device,
                                          autocast, clock))

    paired = paired_repeats(rows.baseline, rows.steps, batches, repeats=args.repeats, steps_per=args.steps,
                            device=args.device, clock=clock, after=measure_loss_alone)
    tb_med = statistics.median(paired.base)
    print(
        f"\nDistillation step speed: teacher {args.teacher_layers}L x {args.hidden} ({args.heads} heads of "
        f"{args.hidden // args.heads}), student {args.student_layers}L x {args.hidden}, layer map {layer_map}, "
        f"batch {args.batch}, seq {args.seq}, {args.device}, {'bf16 autocast' if args.bf16 else 'fp32'}, "
        f"{torch.get_num_threads()} threads, {clock_name}, "
        f"{'freed memory kept' if kept else 'default malloc'}, median of {args.repeats} paired repeats x "
        f"{args.steps} steps.\n"
        f"Baseline (teacher forward + student train step, no intermediate loss): {tb_med * 1e3:.0f} ms/step, "
        f"{args.batch / tb_med:.1f} samples/s.\n"
    )
    print(
        "| objective | terms | ms/step | samples/s | step ratio vs baseline (median) | ratio range "
        "| loss alone, ms | 1 + loss alone / baseline |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in rows.steps:
        t = statistics.median(paired.times[name])
        la = statistics.median(alone[name]) if alone[name] else 0.0
        print(
            f"| {name} | {rows.terms[name]} | {t * 1e3:.0f} | {args.batch / t:.1f} | {paired.median_ratio(name):.3f} | "
            f"{paired.ratio_range(name)} | {la * 1e3:.0f} | {1 + la / tb_med:.3f} |"
        )
    worst = max((paired.median_ratio(n) for n in rows.steps if n not in OTHER_STUDENTS), default=0.0)
    print(
        f"\nworst median step ratio: {worst:.3f} (target <= 1.10).  'loss alone' = the objective's forward + "
        "backward on features captured beforehand (median, one per repeat): the part of the step the "
        "objective adds, measured without a whole step's exposure to other load on the machine."
    )
    if args.decoder:
        decoder_table(args, make_step, clock)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
