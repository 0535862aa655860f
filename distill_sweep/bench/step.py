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
import contextlib
import datetime as dt
import functools
import io
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from distill_sweep.config.space import CONF_DIR
from distill_sweep.models.capture import run_with_features
from distill_sweep.models.inits import skip_layers
from distill_sweep.objectives import ObjectiveSettings, parse_objective
from distill_sweep.objectives.core import Objective, build_objective
from distill_sweep.records.environment import git_commit
from distill_sweep.teachers.output_store import SAMPLED, TOP_K, sparse_entries, topk_dtypes
from distill_sweep.training.allocator import keep_freed_memory
from distill_sweep.training.loop import build_optimizer, linear_schedule, update_step

PAPER_OBJECTIVES = (
    "vanilla_kd",
    "hid_cls",
    "hid_seq",
    "hid_cls_contrast",
    "att_mse",
    "att_kl",
    "val_kl",
    "att_mse_hid_seq",
    "att_kl_hid_seq",
    "att_kl_val_kl",
    "pkd",  # PKD's pkd_cls term (its intermediate-stage step times the term without the KD part)
    "rel_kl",  # MiniLMv2 relations: Q-Q, K-K, V-V over 48 relation heads (384 / 48 = 8 wide)
)
SPS_ROW = "vanilla_kd@sps2"  # --sps: the prediction-stage step of an SPS-2 student (students/sps.py)
BILSTM_ROW = "logit_mse@bilstm"  # --bilstm: the prediction-stage step of Tang et al.'s BiLSTM (students/bilstm.py)


def objective_conf_dir() -> Path:
    """conf/objective, the objectives' YAML files."""
    return Path(CONF_DIR) / "objective"


def load_objective_cfg(name: str, conf_dir: Path) -> ObjectiveSettings:
    """The checked settings of conf/objective/<name>.yaml, composed as the training job composes it."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    path = conf_dir / f"{name}.yaml"
    if not path.is_file() or name == "base":
        raise SystemExit(f"unknown objective {name!r}: no {path}")
    with initialize_config_dir(config_dir=str(conf_dir.parent), version_base="1.3"):
        cfg = compose("config", overrides=[f"objective={name}"])
    return parse_objective(OmegaConf.to_container(cfg.objective, resolve=True))


def make_models(args: argparse.Namespace) -> tuple[nn.Module, nn.Module]:
    from transformers import BertConfig, BertForSequenceClassification

    common = dict(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden,
        max_position_embeddings=max(512, args.seq),
        num_labels=2,
    )
    teacher = BertForSequenceClassification(BertConfig(num_hidden_layers=args.teacher_layers, **common))
    student = BertForSequenceClassification(BertConfig(num_hidden_layers=args.student_layers, **common))
    return teacher.to(args.device).eval(), student.to(args.device).train()


def make_sps_student(student: nn.Module, k: int) -> nn.Module:
    """A student of `student`'s config whose k layers run again on top, Q/K swapped (student=sps2)."""
    import copy

    from distill_sweep.students.sps import share_top_layers

    config = copy.deepcopy(student.config)
    config.num_hidden_layers = 2 * k
    sps = type(student)(config)
    share_top_layers(sps, k, k, swap_qk=True)
    return sps


def make_bilstm_student(args: argparse.Namespace) -> nn.Module:
    """student=bilstm at its default sizes (300-d embeddings, 300 per direction, ReLU 400) over a word
    vocabulary of --vocab words, one sentence per row."""
    from distill_sweep.students.bilstm import BiLSTMClassifier, describe
    from distill_sweep.students.settings import BiLSTMSettings

    return BiLSTMClassifier(describe(BiLSTMSettings(), None), args.vocab, 2, 1)  # type: ignore[arg-type]


def make_batches(args: argparse.Namespace, n: int, n_train: int) -> list[dict[str, Tensor]]:
    g = torch.Generator().manual_seed(0)
    batches = []
    for i in range(n):
        ids = torch.randint(5, args.vocab, (args.batch, args.seq), generator=g)
        # Realistic padding: lengths in [seq/2, seq], the longest row sets the width.
        lengths = torch.randint(args.seq // 2, args.seq + 1, (args.batch,), generator=g)
        lengths[0] = args.seq
        mask = (torch.arange(args.seq)[None, :] < lengths[:, None]).long()
        ids = ids * mask
        batch = {
            "input_ids": ids,
            "attention_mask": mask,
            "token_type_ids": torch.zeros_like(ids),
            "labels": torch.randint(0, 2, (args.batch,), generator=g),
            "idx": torch.arange(i * args.batch, (i + 1) * args.batch) % n_train,
            # the BiLSTM's own word ids (--bilstm), one word per word piece: the BERT models never read them
            "student_ids_0": torch.randint(2, args.vocab, (args.batch, args.seq), generator=g) * mask,
        }
        batches.append({k: v.to(args.device) for k, v in batch.items()})
    return batches


def model_arguments(p: argparse.ArgumentParser, *, batch: int, repeats: int, threads: int) -> None:
    """The options the step benchmarks share: models, batch, device, precision, repeats, threads."""
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--repeats", type=int, default=repeats, help="paired measurements per objective (median)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast for the forwards")
    p.add_argument("--hidden", type=int, default=384)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--teacher-layers", type=int, default=6)
    p.add_argument("--student-layers", type=int, default=3)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--threads", type=int, default=threads, help="torch threads (0 = torch default)")


def training_step(loss_fn: Callable[..., Any], params: list[nn.Parameter], opt_cfg: Any,
                  autocast: Callable[[], Any]) -> Callable[[dict[str, Tensor]], None]:
    """One training step as train_epoch does it: loss under autocast, update_step, scheduler step."""
    optimizer = build_optimizer(params, opt_cfg, lr=1e-5)
    scheduler = linear_schedule(optimizer, total_steps=10**9, warmup_ratio=0.0)

    def step(batch: dict[str, Tensor]) -> None:
        with autocast():
            loss, _ = loss_fn(batch)
        update_step(loss, params, optimizer, float(opt_cfg.max_grad_norm))
        scheduler.step()

    return step


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _time_steps(
    fn: Callable[[dict[str, Tensor]], None],
    batches: Iterator[dict[str, Tensor]],
    steps: int,
    device: str,
    clock: Callable[[], float],
) -> float:
    _sync(device)
    t0 = clock()
    for _ in range(steps):
        fn(next(batches))
    _sync(device)
    return (clock() - t0) / steps


def _cycle(batches: Sequence[dict[str, Tensor]]) -> Iterator[dict[str, Tensor]]:
    while True:
        yield from batches


# ----------------------------------------------------------------------------- the figures as JSON (make bench)
def markdown_blocks(text: str) -> list[dict[str, Any]]:
    """What a bench printed, as blocks: {"text": line} or {"table": {"columns", "align", "rows"}} (a run of
    `|` lines: header, alignment row, rows)."""
    blocks: list[dict[str, Any]] = []
    table: list[list[str]] = []

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    def close() -> None:
        if table:
            align = ["right" if c.endswith(":") else "left" for c in table[1]] if len(table) > 1 else []
            blocks.append({"table": {"columns": table[0], "align": align, "rows": table[2:]}})
            table.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            table.append(cells(line))
            continue
        close()
        if line.strip():
            blocks.append({"text": line.strip().removeprefix("# ")})
    close()
    return blocks


def machine() -> dict[str, Any]:
    """The machine a bench ran on (no model is loaded to say it: versions are read from the installed packages)."""
    versions = {}
    for name in ("torch", "transformers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"system": f"{platform.system()} {platform.release()}", "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "python": platform.python_version(), **versions}


def _module_name(fn: Callable[..., Any]) -> str:
    """The module's import name, also when it runs as `python -m` (then it is __main__)."""
    spec = getattr(sys.modules.get(fn.__module__), "__spec__", None)
    return spec.name if spec is not None else fn.__module__


def writes_json(bench: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """`--json PATH` for a bench's `main`: what it prints to stdout is also written to PATH as JSON, with the
    command, the machine, the date and the git commit (`make bench` writes docs/benchmarks/data/<bench>.json,
    which the documentation renders)."""

    def deco(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def wrapped(argv: Sequence[str] | None = None) -> int:
            args = list(sys.argv[1:] if argv is None else argv)
            path = None
            for i, arg in enumerate(args):
                if arg == "--json" or arg.startswith("--json="):
                    path = arg.partition("=")[2] or (args[i + 1] if i + 1 < len(args) else "")
                    del args[i:i + (1 if "=" in arg else 2)]
                    break
            if path == "":
                raise SystemExit("--json needs a path")
            if any(a in ("-h", "--help") for a in args):
                print(f"  --json PATH  also write the figures as JSON (make bench: docs/benchmarks/data/{bench}.json)")
            if path is None:
                return main(args)
            printed = io.StringIO()

            class Tee(io.TextIOBase):
                def write(self, s: str) -> int:
                    printed.write(s)
                    return out.write(s)

            out = sys.stdout
            with contextlib.redirect_stdout(Tee()):
                code = main(args)
            data = {"bench": bench, "command": " ".join(["python -m", _module_name(main), *args]),
                    "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": git_commit(),
                    "machine": machine(), "blocks": markdown_blocks(printed.getvalue())}
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(data, indent=1) + "\n")
            return code

        return wrapped

    return deco


@writes_json("step")
def main(argv: Sequence[str] | None = None) -> int:
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
    args = p.parse_args(argv)
    conf_dir = args.conf_dir or objective_conf_dir()
    names = [n.strip() for n in args.objectives.split(",") if n.strip()]
    if not names:
        raise SystemExit("--objectives names no objective")
    cfgs = {name: load_objective_cfg(name, conf_dir) for name in names}  # bad names fail before any work
    kept = False if args.default_malloc else keep_freed_memory()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    use_cpu_clock = args.clock == "cpu" or (
        args.clock == "auto" and args.device == "cpu" and torch.get_num_threads() == 1
    )
    clock = time.process_time if use_cpu_clock else time.perf_counter
    clock_name = "process CPU time" if use_cpu_clock else "wall-clock time"
    teacher, student = make_models(args)
    n_train = 10_000
    train_labels = torch.randint(0, 2, (n_train,), generator=torch.Generator().manual_seed(1))
    # The default init's ("skip") pairing, from the same function the training job uses.
    layer_map = list(enumerate(skip_layers(args.teacher_layers, args.student_layers), start=1))
    batches = make_batches(args, 4, n_train)
    it = _cycle(batches)
    autocast = (
        (lambda: torch.autocast(device_type=torch.device(args.device).type, dtype=torch.bfloat16))
        if args.bf16
        else contextlib.nullcontext
    )
    from omegaconf import OmegaConf

    opt_cfg = OmegaConf.load(conf_dir.parent / "optimizer" / "adamw.yaml")
    kd = load_objective_cfg("vanilla_kd", conf_dir)

    def make_step(loss_fn: Callable[..., Any], params: list[nn.Parameter]) -> Callable[[dict[str, Tensor]], None]:
        return training_step(loss_fn, params, opt_cfg, autocast)

    def kd_loss_fn() -> Callable[..., Any]:
        return Objective(kd, None, regression=False).loss_fn("prediction", student, teacher)

    baseline = make_step(kd_loss_fn(), list(student.parameters()))

    def leaf(t: Tensor) -> Tensor:
        return t.detach().clone().requires_grad_(t.requires_grad)

    def loss_only(obj: Any, batch: dict[str, Tensor]) -> float:
        """Objective forward + backward alone, on features captured beforehand (student ones as leaves)."""
        with autocast():
            with torch.inference_mode():
                ft = run_with_features(
                    teacher, batch, hidden=obj.needs_hidden, qkv_layers=obj.teacher_qkv_layers
                )
            fs = run_with_features(student, batch, hidden=obj.needs_hidden, qkv_layers=obj.student_qkv_layers)
        if fs.hidden_states is not None:
            fs.hidden_states = tuple(leaf(h) for h in fs.hidden_states)
        fs.qkv = {k: (leaf(a), leaf(b), leaf(c)) for k, (a, b, c) in fs.qkv.items()}
        _sync(args.device)
        t0 = clock()
        with autocast():
            loss, _ = obj(fs, ft, batch)
        loss.backward()
        _sync(args.device)
        return clock() - t0

    steps: dict[str, Callable[[dict[str, Tensor]], None]] = {}
    objectives: dict[str, Any] = {}
    terms: dict[str, str] = {}
    for name, settings in cfgs.items():
        obj = build_objective(
            settings,
            student_config=student.config,
            teacher_config=teacher.config,
            layer_map=layer_map,
            train_labels=train_labels,
            num_labels=2,
        )
        terms[name] = "+".join(settings.terms) or "prediction"
        if obj is None:  # vanilla KD: the prediction-stage step, through the same code as the baseline
            step = make_step(kd_loss_fn(), list(student.parameters()))
        else:
            obj = obj.to(args.device).train()
            objective = Objective(settings, obj, regression=False)
            step = make_step(objective.loss_fn("intermediate", student, teacher),
                             objective.trainable("intermediate", student))
        steps[name] = step
        objectives[name] = obj
    if args.sps:
        name = SPS_ROW
        names.append(name)
        sps = make_sps_student(student, args.student_layers).to(args.device).train()
        steps[name] = make_step(Objective(kd, None, regression=False).loss_fn("prediction", sps, teacher),
                                list(sps.parameters()))
        objectives[name], terms[name] = None, f"prediction, student sps2: {args.student_layers} layers run twice"
    if args.bilstm:
        name = BILSTM_ROW
        names.append(name)
        bilstm = make_bilstm_student(args).to(args.device).train()
        mse = load_objective_cfg("logit_mse", conf_dir)
        steps[name] = make_step(Objective(mse, None, regression=False).loss_fn("prediction", bilstm, teacher),
                                list(bilstm.parameters()))
        objectives[name], terms[name] = None, "prediction (logit MSE), student bilstm: 300-d words, 2 x 300 LSTM"

    print(
        f"# distill_sweep bench: torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"device {args.device}, threads {torch.get_num_threads()}, {'bf16 autocast' if args.bf16 else 'fp32'}",
        file=sys.stderr,
    )
    # Warm-up: allocator, Adam state, first-call overheads.
    for _ in range(2):
        baseline(next(it))
    for fn in steps.values():
        fn(next(it))

    base_times: list[float] = []
    times: dict[str, list[float]] = {n: [] for n in names}
    ratios: dict[str, list[float]] = {n: [] for n in names}
    alone: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            tb = _time_steps(baseline, it, args.steps, args.device, clock)
            to = _time_steps(steps[name], it, args.steps, args.device, clock)
            base_times.append(tb)
            times[name].append(to)
            ratios[name].append(to / tb)
            if objectives[name] is not None:
                alone[name].append(loss_only(objectives[name], next(it)))
        print(f"  repeat {r + 1}/{args.repeats} done", file=sys.stderr)

    tb_med = statistics.median(base_times)
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
    worst = 0.0
    for name in names:
        t = statistics.median(times[name])
        rat = statistics.median(ratios[name])
        worst = max(worst, rat) if name not in (SPS_ROW, BILSTM_ROW) else worst  # another student, not an objective's cost
        la = statistics.median(alone[name]) if alone[name] else 0.0
        print(
            f"| {name} | {terms[name]} | {t * 1e3:.0f} | {args.batch / t:.1f} | {rat:.3f} | "
            f"{min(ratios[name]):.3f}-{max(ratios[name]):.3f} | {la * 1e3:.0f} | {1 + la / tb_med:.3f} |"
        )
    print(
        f"\nworst median step ratio: {worst:.3f} (target <= 1.10).  'loss alone' = the objective's forward + "
        "backward on features captured beforehand (median, one per repeat): the part of the step the "
        "objective adds, measured without a whole step's exposure to other load on the machine."
    )
    if args.decoder:
        decoder_table(args, make_step, clock)
    return 0


DECODER_OBJECTIVES = ("fkl", "rkl", "gjsd", "fkl_hid_seq")
TOPK = 32  # entries per position of the stored rows: the teacher does not run
# forward KL from the teacher's stored entries, per estimator (procedure.teacher_logits), and the store's mode
SPARSE_ROWS = {f"fkl@top-{TOPK}": ("top_k", TOP_K), f"fkl@top-{TOPK}+tail": ("top_k_tail", TOP_K),
               f"fkl@sampled-{TOPK}": ("sampled", SAMPLED)}


def decoder_table(args: argparse.Namespace, make_step: Callable[..., Any], clock: Callable[[], float]) -> None:
    """The decoder objectives' distillation steps (procedures.causal_lm.distill_loss, the job's own loss) against
    the plain forward-KL step, paired and rotated as the encoder table; printed as a second table."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from distill_sweep.models.inits import resolve_init
    from distill_sweep.procedures.causal_lm import distill_loss
    from distill_sweep.students.base import BuildInputs
    from distill_sweep.students.settings import TruncatedSettings
    from distill_sweep.students.truncated import build as build_truncated

    kv = args.heads // 2 if args.heads % 2 == 0 else args.heads
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                         num_hidden_layers=args.teacher_layers, num_attention_heads=args.heads,
                         num_key_value_heads=kv, max_position_embeddings=max(512, args.seq),
                         bos_token_id=None, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    teacher = LlamaForCausalLM(config).to(args.device).eval()
    init = resolve_init("skip", args.teacher_layers, args.student_layers)
    student = build_truncated(TruncatedSettings(num_layers=args.student_layers),
                              BuildInputs(arch=None, teacher=teacher, init=init, num_labels=2, label_names=[]))
    student = student.to(args.device).train()
    batches = []
    for b in make_batches(args, 4, 10_000):
        labels = torch.full_like(b["input_ids"], -100)
        labels[:, :-1] = torch.where(b["attention_mask"][:, 1:].bool(), b["input_ids"][:, 1:], -100)
        batches.append({"input_ids": b["input_ids"], "attention_mask": b["attention_mask"], "labels": labels,
                        "idx": torch.arange(len(batches), len(batches) + 1).repeat(args.batch)})
    dtypes = topk_dtypes(args.vocab)
    entries: dict[str, dict[int, tuple[Tensor, Tensor]]] = {TOP_K: {}, SAMPLED: {}}
    stored_bytes = {"compact": 0, "float32 + int32": 0}
    positions = 0
    generator = torch.Generator(args.device).manual_seed(0)
    with torch.no_grad():
        for i, b in enumerate(batches):
            logits = teacher(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
            for mode in entries:
                values, ids = sparse_entries(logits, TOPK, mode, generator)
                # what the store writes (output_store's dtypes), read back as gather returns it
                v, n = values.cpu().numpy().astype(dtypes["values"]), ids.cpu().numpy().astype(dtypes["indices"])
                entries[mode][i] = (torch.from_numpy(v.astype("float32")).to(args.device),
                                    torch.from_numpy(n.astype("int64")).to(args.device))
                if mode == TOP_K:
                    stored_bytes["compact"] += v.nbytes + n.nbytes
                    stored_bytes["float32 + int32"] += v.astype("float32").nbytes + n.astype("int32").nbytes
                    positions += ids.shape[0] * ids.shape[1]
    per_token = {form: total / positions for form, total in stored_bytes.items()}

    class Stored:  # the batch's stored entries (output_store.TopKOutputs.gather), here held in memory
        def __init__(self, mode: str) -> None:
            self.mode = mode

        def gather(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
            return entries[self.mode][int(batch["idx"][0])]

    conf_dir = args.conf_dir or objective_conf_dir()
    layer_map = init.layer_map

    def step_of(name: str, stored: Any = None, estimator: str = TOP_K) -> Callable[[dict[str, Tensor]], None]:
        terms = build_objective(load_objective_cfg(name, conf_dir), student_config=student.config,
                                teacher_config=teacher.config, layer_map=layer_map, train_labels=None, num_labels=2)
        assert terms is not None
        terms = terms.to(args.device).train()
        return make_step(distill_loss(student, teacher, terms, 0.0, stored, estimator),
                         list(student.parameters()) + list(terms.parameters()))

    baseline = step_of("fkl")
    steps = {name: step_of(name) for name in DECODER_OBJECTIVES}
    for row, (estimator, mode) in SPARSE_ROWS.items():
        steps[row] = step_of("fkl", Stored(mode), estimator)
    it = _cycle(batches)
    for fn in [baseline, *steps.values()]:
        fn(next(it))  # warm-up
    names = list(steps)
    base, times, ratios = [], {n: [] for n in names}, {n: [] for n in names}
    for r in range(args.repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            tb = _time_steps(baseline, it, args.steps, args.device, clock)
            to = _time_steps(steps[name], it, args.steps, args.device, clock)
            base.append(tb)
            times[name].append(to)
            ratios[name].append(to / tb)
    tb_med = statistics.median(base)
    print(f"\nDecoder step speed (procedure=causal_lm): Llama teacher {args.teacher_layers}L x {args.hidden} "
          f"({args.heads} query / {kv} key-value heads), truncated student {args.student_layers}L (skip "
          f"{init.layers}), vocab {args.vocab}, batch {args.batch}, seq {args.seq}, {args.device}, median of "
          f"{args.repeats} paired repeats.\nBaseline (teacher forward + student step with plain forward KL, "
          f"T = 1): {tb_med * 1e3:.0f} ms/step.\n")
    print("| decoder objective | terms | ms/step | step ratio vs forward KL (median) | ratio range | "
          "stored B/token |")
    print("|---|---|---:|---:|---:|---:|")
    for name in names:
        estimator = SPARSE_ROWS.get(name, (None, None))[0]
        label = f"fkl, teacher_logits={estimator}" if estimator else "+".join(load_objective_cfg(name, conf_dir).terms)
        rat = statistics.median(ratios[name])
        stored = f"{per_token['compact']:.0f}" if estimator else "-"
        print(f"| {name} | {label} | {statistics.median(times[name]) * 1e3:.0f} | {rat:.3f} | "
              f"{min(ratios[name]):.3f}-{max(ratios[name]):.3f} | {stored} |")
    print(f"\n`fkl` runs the baseline's own code (the noise floor); the `@` rows read {TOPK} stored entries per "
          f"position instead of running the teacher: {per_token['compact']:.0f} bytes per stored token "
          f"({dtypes['values']} log-probabilities, {dtypes['indices']} ids), against "
          f"{per_token['float32 + int32']:.0f} as float32 logits and int32 ids.")


if __name__ == "__main__":
    raise SystemExit(main())
