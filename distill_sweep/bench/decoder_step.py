"""The decoder objectives' distillation steps (`python -m distill_sweep.bench.step --decoder`): each through
procedures.causal_lm_loss.distill_loss, the job's own loss, against the plain forward-KL step, paired and rotated as
the encoder table (bench.timing); the `@` rows read stored teacher entries (teachers.sparse_store's estimators and
dtypes) instead of running the teacher, and the table says how many bytes a stored token takes."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from transformers import LlamaConfig, LlamaForCausalLM

from distill_sweep.bench.timing import Step, cycle, paired_repeats
from distill_sweep.bench.workload import load_objective_cfg, make_batches, objective_conf_dir
from distill_sweep.models.inits import resolve_init
from distill_sweep.objectives.core import build_objective
from distill_sweep.procedures.causal_lm_loss import distill_loss
from distill_sweep.students.base import BuildInputs
from distill_sweep.students.truncated import build as build_truncated
from distill_sweep.students.truncated_settings import TruncatedSettings
from distill_sweep.teachers.output_store import SAMPLED, TOP_K
from distill_sweep.teachers.sparse_store import sparse_entries, topk_dtypes

DECODER_OBJECTIVES = ("fkl", "rkl", "gjsd", "fkl_hid_seq")
TOPK = 32  # entries per position of the stored rows: the teacher does not run
# forward KL from the teacher's stored entries, per estimator (procedure.teacher_logits), and the store's mode
SPARSE_ROWS = {f"fkl@top-{TOPK}": ("top_k", TOP_K), f"fkl@top-{TOPK}+tail": ("top_k_tail", TOP_K),
               f"fkl@sampled-{TOPK}": ("sampled", SAMPLED)}


def llama_teacher(args: argparse.Namespace) -> LlamaForCausalLM:
    """A random Llama of the encoder table's shape, with grouped-query attention (half as many key-value heads)."""
    kv = args.heads // 2 if args.heads % 2 == 0 else args.heads
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
                         num_hidden_layers=args.teacher_layers, num_attention_heads=args.heads,
                         num_key_value_heads=kv, max_position_embeddings=max(512, args.seq),
                         bos_token_id=None, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to(args.device).eval()


def next_token_batches(args: argparse.Namespace) -> list[dict[str, Tensor]]:
    """The encoder table's random batches, every next token of a row a target; `idx` names the batch."""
    batches = []
    for b in make_batches(args, 4, 10_000):
        labels = torch.full_like(b["input_ids"], -100)
        labels[:, :-1] = torch.where(b["attention_mask"][:, 1:].bool(), b["input_ids"][:, 1:], -100)
        batches.append({"input_ids": b["input_ids"], "attention_mask": b["attention_mask"], "labels": labels,
                        "idx": torch.arange(len(batches), len(batches) + 1).repeat(args.batch)})
    return batches


class StoredEntries:
    """Each batch's teacher entries per store mode, as the store writes them (its dtypes) and as
    sparse_store.TopKOutputs.gather returns them, held in memory; and the bytes a stored token takes."""

    def __init__(self, teacher: LlamaForCausalLM, batches: list[dict[str, Tensor]], vocab: int, device: str) -> None:
        self.dtypes = topk_dtypes(vocab)
        self.entries: dict[str, dict[int, tuple[Tensor, Tensor]]] = {TOP_K: {}, SAMPLED: {}}
        stored_bytes = {"compact": 0, "float32 + int32": 0}
        positions = 0
        generator = torch.Generator(device).manual_seed(0)
        with torch.no_grad():
            for i, b in enumerate(batches):
                logits = teacher(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
                for mode in self.entries:
                    values, ids = sparse_entries(logits, TOPK, mode, generator)
                    v = values.cpu().numpy().astype(self.dtypes["values"])
                    n = ids.cpu().numpy().astype(self.dtypes["indices"])
                    self.entries[mode][i] = (torch.from_numpy(v.astype("float32")).to(device),
                                             torch.from_numpy(n.astype("int64")).to(device))
                    if mode == TOP_K:
                        stored_bytes["compact"] += v.nbytes + n.nbytes
                        stored_bytes["float32 + int32"] += v.astype("float32").nbytes + n.astype("int32").nbytes
                        positions += ids.shape[0] * ids.shape[1]
        self.per_token = {form: total / positions for form, total in stored_bytes.items()}

    def reader(self, mode: str) -> Any:
        """What distill_loss reads a batch's stored entries from (its `gather`)."""
        entries = self.entries[mode]

        class Stored:
            def gather(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
                return entries[int(batch["idx"][0])]

        return Stored()


def decoder_table(args: argparse.Namespace, make_step: Callable[..., Step], clock: Callable[[], float]) -> None:
    """Times and prints the decoder table (after the encoder one)."""
    teacher = llama_teacher(args)
    init = resolve_init("skip", args.teacher_layers, args.student_layers)
    student = build_truncated(TruncatedSettings(num_layers=args.student_layers),
                              BuildInputs(arch=None, teacher=teacher, init=init, num_labels=2, label_names=[]))
    student = student.to(args.device).train()
    batches = next_token_batches(args)
    stored = StoredEntries(teacher, batches, args.vocab, args.device)
    conf_dir = args.conf_dir or objective_conf_dir()

    def step_of(name: str, reader: Any = None, estimator: str = TOP_K) -> Step:
        terms = build_objective(load_objective_cfg(name, conf_dir), student_config=student.config,
                                teacher_config=teacher.config, layer_map=init.layer_map, train_labels=None,
                                num_labels=2)
        assert terms is not None
        terms = terms.to(args.device).train()
        return make_step(distill_loss(student, teacher, terms, 0.0, reader, estimator),
                         list(student.parameters()) + list(terms.parameters()))

    steps = {name: step_of(name) for name in DECODER_OBJECTIVES}
    for row, (estimator, mode) in SPARSE_ROWS.items():
        steps[row] = step_of("fkl", stored.reader(mode), estimator)
    paired = paired_repeats(step_of("fkl"), steps, cycle(batches), repeats=args.repeats, steps_per=args.steps,
                            device=args.device, clock=clock, progress=False)
    tb_med = statistics.median(paired.base)
    kv = teacher.config.num_key_value_heads
    print(f"\nDecoder step speed (procedure=causal_lm): Llama teacher {args.teacher_layers}L x {args.hidden} "
          f"({args.heads} query / {kv} key-value heads), truncated student {args.student_layers}L (skip "
          f"{init.layers}), vocab {args.vocab}, batch {args.batch}, seq {args.seq}, {args.device}, median of "
          f"{args.repeats} paired repeats.\nBaseline (teacher forward + student step with plain forward KL, "
          f"T = 1): {tb_med * 1e3:.0f} ms/step.\n")
    print("| decoder objective | terms | ms/step | step ratio vs forward KL (median) | ratio range | "
          "stored B/token |")
    print("|---|---|---:|---:|---:|---:|")
    compact = stored.per_token["compact"]
    for name in steps:
        estimator = SPARSE_ROWS.get(name, (None, None))[0]
        label = f"fkl, teacher_logits={estimator}" if estimator else "+".join(load_objective_cfg(name, conf_dir).terms)
        print(f"| {name} | {label} | {statistics.median(paired.times[name]) * 1e3:.0f} | "
              f"{paired.median_ratio(name):.3f} | {paired.ratio_range(name)} | "
              f"{f'{compact:.0f}' if estimator else '-'} |")
    print(f"\n`fkl` runs the baseline's own code (the noise floor); the `@` rows read {TOPK} stored entries per "
          f"position instead of running the teacher: {compact:.0f} bytes per stored token "
          f"({stored.dtypes['values']} log-probabilities, {stored.dtypes['indices']} ids), against "
          f"{stored.per_token['float32 + int32']:.0f} as float32 logits and int32 ids.")
