"""Speed of one task-agnostic distillation step per objective: ``python -m distill_sweep.bench.agnostic``
(``make bench``).

Each objective's step is the procedure's own (procedures/task_agnostic.py: `loss_parts` builds the terms and
the KD form as a job does, `pretrain_loss` runs the teacher and the student with their MLM heads applied at the
masked positions only), followed by the update of distill_sweep.training.loop. The baseline is the step without any
transfer term: teacher MLM forward + the student's MLM loss and update (the KD weight 0). Every objective's
measurement is paired with a baseline measurement taken right before it (order rotated per repeat) and the
ratio reported is the median over repeats, as in distill_sweep.bench.step. One more row, `dense heads`, times the
baseline as it ran before the heads were deferred (both heads over every position), against the same baseline.

Memory: the tensors a step's forward saves for backward (unique storages, measured with autograd's
saved-tensor hooks), the part of a step's peak that depends on the objective; the weights, gradients and
AdamW state are listed once. On CUDA the real peak (max_memory_allocated) is reported too.

Defaults: random-init BERT masked-LM models, teacher 6 layers x 384 (12 heads), student 3 layers x 384, last
layer <-> last layer (the procedure's `map: top`), vocabulary 30522, sequences of 128 packed tokens (no
padding), 15% of them masked (at most 20), micro-batch 8, CPU, fp32 (``--bf16``: autocast).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distill_sweep.analysis.paper import TABLE2_OBJECTIVES
from distill_sweep.bench.json_output import writes_json
from distill_sweep.bench.timing import bf16_autocast, choose_clock, cycle, paired_repeats, training_step
from distill_sweep.bench.workload import load_objective_cfg, model_arguments, objective_conf_dir
from distill_sweep.data.corpus import IGNORE
from distill_sweep.training.allocator import keep_freed_memory

OBJECTIVES = (*TABLE2_OBJECTIVES, "distilbert", "rel_kl")
DENSE_ROW = "dense heads"


def make_models(args: argparse.Namespace) -> tuple[nn.Module, nn.Module]:
    from transformers import BertConfig, BertForMaskedLM

    common = dict(vocab_size=args.vocab, hidden_size=args.hidden, num_attention_heads=args.heads,
                  intermediate_size=4 * args.hidden, max_position_embeddings=max(512, args.seq))
    teacher = BertForMaskedLM(BertConfig(num_hidden_layers=args.teacher_layers, **common))
    student = BertForMaskedLM(BertConfig(num_hidden_layers=args.student_layers, **common))
    return teacher.to(args.device).eval(), student.to(args.device).train()


def make_batches(args: argparse.Namespace, n: int) -> list[dict[str, Tensor]]:
    """Packed sequences (no padding) with 15% of the tokens masked, at most 20 per sequence."""
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(n):
        ids = torch.randint(5, args.vocab, (args.batch, args.seq), generator=g)
        labels = torch.full_like(ids, IGNORE)
        k = min(20, max(1, round(0.15 * args.seq)))
        for row in range(args.batch):
            where = torch.randperm(args.seq - 2, generator=g)[:k] + 1
            labels[row, where] = ids[row, where]
            ids[row, where] = 4  # a [MASK]-like id
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids),
                 "labels": labels}
        out.append({key: v.to(args.device) for key, v in batch.items()})
    return out


def dense_baseline(student: nn.Module, teacher: nn.Module) -> Callable[..., Any]:
    """The baseline as it ran before `head_deferred`: both MLM heads over every position, the MLM loss read
    at the masked ones."""
    from distill_sweep.training.loop import model_inputs

    def loss_fn(batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        inputs = model_inputs(dict(batch))
        with torch.no_grad():
            teacher(**inputs)
        logits = student(**inputs).logits
        masked = batch["labels"] != IGNORE
        return F.cross_entropy(logits[masked].float(), batch["labels"][masked]), {}

    return loss_fn


def saved_for_backward_mb(loss_fn: Callable[..., Any], batch: dict[str, Tensor], autocast: Callable[[], Any],
                          weights: Sequence[Tensor]) -> float:
    """MB of the unique storages the forward of `loss_fn` saves for backward, other than the `weights`'."""
    sizes: dict[int, int] = {}
    own = {w.untyped_storage().data_ptr() for w in weights}

    def pack(t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in own:
            sizes[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast():
        loss, _ = loss_fn(batch)
    del loss
    return sum(sizes.values()) / 2**20


@writes_json("agnostic")
def main(argv: Sequence[str] | None = None) -> int:
    from omegaconf import OmegaConf

    from distill_sweep.procedures.task_agnostic import KDForm, loss_parts, pretrain_loss
    from distill_sweep.procedures.task_agnostic_settings import KDSettings

    p = argparse.ArgumentParser(prog="python -m distill_sweep.bench.agnostic", description=__doc__.split("\n")[0])
    p.add_argument("--objectives", default=",".join(OBJECTIVES), help="comma-separated names")
    model_arguments(p, batch=8, repeats=8, threads=1)  # --batch: sequences per step (a micro-batch)
    args = p.parse_args(argv)
    conf_dir = objective_conf_dir()
    names = [n.strip() for n in args.objectives.split(",") if n.strip()]
    cfgs = {name: load_objective_cfg(name, conf_dir) for name in names}  # bad names fail before any work
    kept = keep_freed_memory()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    clock, clock_name = choose_clock("auto", args.device)  # CPU time with one thread: immune to descheduling
    teacher, student = make_models(args)
    layer_map = [(args.student_layers, args.teacher_layers)]  # the procedure's default map: top
    autocast = bf16_autocast(args.device, args.bf16)
    opt_cfg = OmegaConf.load(conf_dir.parent / "optimizer" / "adamw.yaml")
    batches = make_batches(args, 4)
    it = cycle(batches)

    mlm_only = KDForm(kd_weight=0.0, mlm_weight=1.0, temperature=2.0, positions="masked")
    base_fn = pretrain_loss(student, teacher, None, mlm_only)
    baseline = training_step(base_fn, list(student.parameters()), opt_cfg, autocast)
    steps, losses, described, modules = {}, {}, {}, []
    for name, settings in cfgs.items():
        terms, kd = loss_parts(settings, KDSettings(), student.config, teacher.config, layer_map)
        params = list(student.parameters())
        if terms is not None:
            terms = terms.to(args.device).train()
            modules.append(terms)
            params += list(terms.parameters())
        losses[name] = pretrain_loss(student, teacher, terms, kd)
        steps[name] = training_step(losses[name], params, opt_cfg, autocast)
        described[name] = "+".join([*settings.terms, *(["KD+MLM"] if kd is not None else [])])
    names.append(DENSE_ROW)
    losses[DENSE_ROW] = dense_baseline(student, teacher)
    steps[DENSE_ROW] = training_step(losses[DENSE_ROW], list(student.parameters()), opt_cfg, autocast)
    described[DENSE_ROW] = "MLM, both heads over every position, also where the loss reads none (for comparison)"

    print(f"# distill_sweep bench_agnostic: torch {torch.__version__}, device {args.device}, threads "
          f"{torch.get_num_threads()}, {'bf16 autocast' if args.bf16 else 'fp32'}", file=sys.stderr)
    paired = paired_repeats(baseline, steps, it, repeats=args.repeats, steps_per=1, device=args.device, clock=clock)
    weights = [*student.parameters(), *teacher.parameters(), *(w for m in modules for w in m.parameters())]
    memory = {name: saved_for_backward_mb(fn, batches[0], autocast, weights)
              for name, fn in [("baseline", base_fn), *losses.items()]}
    cuda_peak = {}
    if args.device.startswith("cuda"):
        for name, fn in steps.items():
            torch.cuda.reset_peak_memory_stats()
            fn(batches[0])
            cuda_peak[name] = torch.cuda.max_memory_allocated() / 2**20
    fixed = sum(p.numel() * p.element_size() for p in student.parameters()) * 4 / 2**20  # weights, grads, Adam x2
    teacher_mb = sum(p.numel() * p.element_size() for p in teacher.parameters()) / 2**20

    tb_med = statistics.median(paired.base)
    tokens = args.batch * args.seq
    print(f"\nTask-agnostic step speed: teacher {args.teacher_layers}L x {args.hidden} ({args.heads} heads), student "
          f"{args.student_layers}L x {args.hidden}, vocabulary {args.vocab}, map {layer_map}, {args.batch} x "
          f"{args.seq} tokens per step, {args.device}, {'bf16 autocast' if args.bf16 else 'fp32'}, "
          f"{torch.get_num_threads()} threads, {clock_name}, "
          f"{'freed memory kept' if kept else 'default malloc'}, median of {args.repeats} paired repeats.\n"
          f"Baseline (teacher MLM forward + student MLM loss and update, no transfer term): {tb_med * 1e3:.0f} "
          f"ms/step, {tokens / tb_med:.0f} tokens/s; saved for backward {memory['baseline']:.0f} MB; fixed: student "
          f"weights+grads+AdamW {fixed:.0f} MB, teacher weights {teacher_mb:.0f} MB.\n")
    extra = " | CUDA peak, MB" if cuda_peak else ""
    print(f"| objective | loss | ms/step | tokens/s | step ratio vs baseline (median) | ratio range "
          f"| saved for backward, MB{extra} |")
    print("|---|---|---:|---:|---:|---:|---:" + ("|---:|" if cuda_peak else "|"))
    worst = 0.0
    for name in names:
        t, rat = statistics.median(paired.times[name]), paired.median_ratio(name)
        if name != DENSE_ROW:
            worst = max(worst, rat)
        peak = f" | {cuda_peak[name]:.0f}" if cuda_peak else ""
        print(f"| {name} | {described[name]} | {t * 1e3:.0f} | {tokens / t:.0f} | {rat:.3f} | "
              f"{paired.ratio_range(name)} | {memory[name]:.0f}{peak} |")
    print(f"\nworst median step ratio over the objectives: {worst:.3f} (target <= 1.10); '{DENSE_ROW}' is the "
          "baseline with both MLM heads over every position, as before they were deferred to the masked ones.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
