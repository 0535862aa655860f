"""Distillation of decoder LMs (`procedure=causal_lm`): a causal-LM teacher into a shallower or narrower student.

Data (`procedure.data`): the `corpus` group (packed sequences, every next token a target) or instruction data
(`procedure.instructions`: prompt/response pairs, the loss on the response tokens); see data/decoder.py. The
teacher is a decoder LM (families.py: Llama-shaped, GPT-2): a tiny one built from `teacher.config` is first
trained on the training sequences by the stage driver (teachers/decoder.py, cached as encoder teachers are).
The student is `student=truncated` (teacher layers copied per `init`, with `init=prune` choosing them by block
importance on a calibration slice, students/prune.py; embeddings, final norm and LM head copied) or
`student=fresh`. The responses of instruction data are the data's, or for a seeded share `on_policy` of the
steps the student's own samples for the batch's prompts, drawn at that step and scored by the teacher live
(on_policy.py), or with `seq_kd` the teacher's greedy ones, made once and stored (teachers/generations.py).

ONE stage, `distill`, whose loss is the objective's terms summed (their `stages` are not read): the next-token
terms fkl / rkl / gjsd (objectives/causal.py) and hidden-state terms on the mapped layers (hid_seq, ...), plus
`ce_weight` x the next-token cross-entropy on the data's targets. Attention terms are refused for decoders
(families.py says why). With `teacher_top_k: k` k entries per target position (the teacher's k most likely
tokens, or k draws from it: `teacher_logits`) come from the teacher-output store in its top_k or sampled mode
(teachers/output_store.py: ids + log-probabilities, checksummed and row-checked, built once per teacher and data, by
the sweeper's build job when several jobs read it) and the teacher does not run during training; with
`teacher_logits: hidden` the store holds its last hidden states instead (teachers/hidden_store.py) and its LM head
makes the whole distribution from them in the loss's chunks.

Dev metrics: next-token accuracy on the held-out targets (`token_accuracy`, the primary metric: it picks the
best epoch, higher is better), `perplexity` (exp of the mean target NLL) and, for classification-style
instruction data, `choice_accuracy` (the next-token choice among the choices' first tokens); for instruction
data, the greedy responses' `exact_match` and `rouge_l` against the references (`generation_evaluator`).
With `vocab=shared_prefix` every dev metric reads the n shared ids only (the record's
`causal_lm.vocabularies.metrics`).

This module is the run: its context (`CausalContext`), data, teacher and store, the student's init, `run` and
`prepare_outputs`. The rest is in siblings: its settings in causal_lm_settings.py, its rules from the configs in
causal_lm_checks.py (`check_job`, imported here, where the registry looks for it), its loss in causal_lm_loss.py,
on-policy batches in on_policy.py, packs in decoder_pack.py, lm-eval in lm_eval_stage.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel

from distill_sweep.config.parse import as_dict
from distill_sweep.data.decoder import CausalData, from_corpus, from_instructions, special_tokens
from distill_sweep.errors import ConfigError
from distill_sweep.models.families import family_of_model
from distill_sweep.models.inits import StudentInit
from distill_sweep.models.layer_map import map_spec, resolve_map
from distill_sweep.models.loading import tokenizer_source
from distill_sweep.models.vocabularies import load_named, vocabulary_of
from distill_sweep.objectives.core import build_objective
from distill_sweep.objectives.shared_ids import SharedIds
from distill_sweep.students import BuildInputs
from distill_sweep.students.prune import block_importance, prune_layers
from distill_sweep.teachers.decoder import TeacherRecipe, lm_evaluator, trained_teacher, unigram_baseline
from distill_sweep.teachers.engine import check_engine
from distill_sweep.teachers.finetuned import check_beats_baseline
from distill_sweep.teachers.generations import open_or_build_generations
from distill_sweep.teachers.hidden_store import HiddenOutputs, open_or_build_hidden
from distill_sweep.teachers.output_plan import decoder_group
from distill_sweep.teachers.sparse_store import TopKOutputs, open_or_build_topk
from distill_sweep.training import distributed, fsdp
from distill_sweep.training.context import Role, RunContext
from distill_sweep.training.loop import seed_everything
from distill_sweep.training.prediction_capture import SequenceCapture, dev_sequences_hash
from distill_sweep.training.stages import Stage, StageDriver

from .causal_lm_checks import (
    SHARED_PREFIX,
    check_job,  # noqa: F401 - the procedure's hook: base.Procedure.check_job finds it here
    check_shared_data,
    shared_ids,
    vocabulary_pair,
)
from .causal_lm_loss import distill_loss
from .causal_lm_settings import HIDDEN, CausalLMSettings
from .common import train_student
from .decoder_pack import join, once, shared_teacher
from .lm_eval_stage import harness_tokenizer, run_stage, teacher_stage
from .on_policy import OnPolicy, RecordSamples, mark_positions
from .sequences import accumulated, sequence_driver, stage_plan

STAGE = "distill"


@dataclass
class CausalContext(RunContext):
    """The run context over decoder data: the driver reads its batches and scores next-token metrics."""

    causal: CausalData | None = None
    policy: OnPolicy | None = None  # jobs that generate responses (on_policy > 0 or seq_kd)

    def driver(self, *, role: Role, **driver_args: Any) -> StageDriver:
        assert self.causal is not None
        sink = None
        if role == "student":  # keep its per-sequence sums
            dev = self.causal.dev
            self.predictions = SequenceCapture(self.job.out_dir, dev_sequences_hash(dev), driver_args["history"])
            sink = self.predictions.keep
        driver = sequence_driver(self, self.causal, self.job.procedure_settings.batch_size,
                                 generation_evaluator(self.job, self.causal, self.tokenizer, sink), **driver_args)
        if role == "student":  # the record's cost (training/cost.py)
            driver.measure_cost()
        if sink is not None and self.policy is not None:
            if self.policy.settings.on_policy > 0:  # the loss function reads where each batch is (on_policy.py)
                driver.loader = mark_positions(driver.loader)
            # the student's samples at each epoch's end (the driver has read back a resumed job's history)
            samples = RecordSamples(self.policy, self.tokenizer, self.job.out_dir, driver_args["history"],
                                    self.record.causal_lm["data_source"]["samples"])
            driver.evaluate = samples.wrap(driver.evaluate)
        return join(driver, self.pack) if sink is not None else driver  # a pack member's own stage only


def generation_evaluator(job: Any, data: CausalData, tokenizer: Any,
                         sink: Callable[[dict[str, np.ndarray]], None] | None = None) -> Callable[..., dict[str, float]]:
    """The dev metrics of `data` (in `tokenizer`'s ids); instruction data adds the greedy responses' exact match and
    ROUGE-L F1 against the references (teachers/decoder.py). With procedure.vocab=shared_prefix they read the shared
    ids only (`metric_ids`). The logits are made procedure.logit_chunk predicting rows at a time, as the loss's."""
    instructions = job.procedure_settings.data == "instructions"
    return lm_evaluator(data, sink, tokenizer if instructions else None, job.settings.run.eval_batch_size,
                        metric_ids(job), job.procedure_settings.logit_chunk)


def metric_ids(job: Any) -> int | None:
    """n where the dev metrics read ids 0..n-1 only (procedure.vocab=shared_prefix: the student's ids beyond them get
    no gradient, so scoring them would compare untrained ids across vocabularies), else None (the whole vocabulary)."""
    settings: CausalLMSettings = job.procedure_settings
    return shared_ids(settings, job) if settings.vocab == SHARED_PREFIX else None


def load_data(ctx: RunContext, settings: CausalLMSettings) -> CausalData:
    if settings.data == "corpus":
        return from_corpus(settings.corpus, ctx.tokenizer, ctx.cache_dir)
    return from_instructions(settings.instructions, ctx.tokenizer, settings.max_seq_length)


def student_init(ctx: RunContext, teacher: nn.Module, data: CausalData, settings: CausalLMSettings
                 ) -> tuple[StudentInit, list[tuple[int, int]], dict[str, Any] | None]:
    """The job's init and layer map; init=prune's layers chosen now, by block importance on the calibration
    slice (the first `calibration` training sequences)."""
    job = ctx.job
    if job.init.name != "prune":
        return job.init, job.layer_map, None
    rows = min(settings.calibration, len(data.train))
    calib = (data.batch(data.train, torch.arange(s, min(s + 32, rows)).numpy()) for s in range(0, rows, 32))
    scores = block_importance(teacher, calib, ctx.device)
    k = len(job.init.layers)
    layers = prune_layers(scores, k)
    init = StudentInit(job.init.spec, "prune", layers, list(zip(range(1, k + 1), layers)))
    layer_map = job.layer_map
    if map_spec(job.settings.run.map) == "init":
        layer_map = resolve_map("init", init, len(scores), k)
    return init, layer_map, {"scores": [round(s, 6) for s in scores], "layers": layers, "calibration": rows,
                             "score": "block influence: 1 - cos(layer input, layer output), mean over real tokens"}


def teacher_and_store(ctx: RunContext
                      ) -> tuple[CausalData, PreTrainedModel, dict[str, Any], TopKOutputs | HiddenOutputs | None]:
    """The job's data, its frozen teacher (trained and cached first if built from its config) and, with
    `procedure.teacher_top_k`, the teacher's top-k store, with `teacher_logits=hidden` its hidden store (either
    built first if no job built it); the record's `teacher_outputs` says which."""
    job = ctx.job
    settings: CausalLMSettings = job.procedure_settings
    with distributed.main_first():  # one corpus cache, one teacher, one store: rank 0 builds, the others read
        data = load_data(ctx, settings)
    if len(data.train) < settings.batch_size:
        raise ConfigError(f"{data.name} has {len(data.train)} training sequences, fewer than one batch "
                          f"(procedure.batch_size={settings.batch_size})")
    recipe = TeacherRecipe(settings.teacher_steps, settings.teacher_lr, settings.batch_size)
    # the seq_kd responses and the sparse store on a vLLM engine of their own (teacher.engine=vllm; None: here)
    engine = check_engine(job.settings.teacher.engine, job.settings.teacher.engine_python)
    with distributed.main_first():  # (a pack's members: one teacher between them, decoder_pack.once)
        teacher, teacher_info = once(ctx.pack, trained_teacher)(job.settings.teacher, data, ctx.tokenizer, recipe,
                                                cache_dir=ctx.cache_dir, device=ctx.device, precision=ctx.precision,
                                                run=job.settings.run)
    if settings.seq_kd:  # the training responses become the teacher's (made once, stored); dev keeps the references
        with distributed.main_first():
            data, teacher_info["seq_kd"] = open_or_build_generations(
                teacher, data, max_new_tokens=settings.generation.max_new_tokens,
                max_seq_length=settings.max_seq_length, tokens=special_tokens(ctx.tokenizer), cache_dir=ctx.cache_dir,
                group=decoder_group(job.teacher, settings), precision=ctx.precision, device=ctx.device,
                engine=engine)
    stored, store_info = None, {"mode": "live", "reason": "procedure.teacher_logits=full: the full logits, live"}
    if settings.logits_mode() == HIDDEN:
        with distributed.main_first():
            stored = open_or_build_hidden(teacher, data, cache_dir=ctx.cache_dir,
                                          group=decoder_group(job.teacher, settings), precision=ctx.precision,
                                          device=ctx.device)
        store_info = {"mode": "store", "teacher_logits": HIDDEN, **stored.describe(),
                      "bytes_per_trained_token": round(stored.bytes_per_trained_token(data.train.targets()), 1)}
    elif settings.teacher_top_k is not None:
        with distributed.main_first():
            stored = open_or_build_topk(teacher, data, settings.teacher_top_k, cache_dir=ctx.cache_dir,
                                        group=decoder_group(job.teacher, settings), precision=ctx.precision,
                                        device=ctx.device, mode=settings.store_mode(), engine=engine)
        store_info = {"mode": "store", "top_k": settings.teacher_top_k, "teacher_logits": settings.logits_mode(),
                      **stored.describe(), "engine": engine.describe() if engine is not None else {"name": "hf"},
                      "bytes_per_trained_token": round(stored.bytes_per_trained_token(data.train.targets()), 1)}
    ctx.record.teacher_outputs = store_info
    return data, teacher, teacher_info, stored


def prepare_outputs(ctx: RunContext) -> None:
    """The sweeper's build job (`prepare_only`): the teacher trained (cached), its generations (seq_kd) and its
    top-k store built."""
    teacher_and_store(ctx)


def run(ctx: RunContext) -> None:
    job, record = ctx.job, ctx.record
    settings: CausalLMSettings = job.procedure_settings
    assert job.objective is not None
    world = distributed.world()
    data, teacher, teacher_info, stored = teacher_and_store(ctx)
    evaluate = generation_evaluator(job, data, ctx.tokenizer)
    dev = {"validation": lambda: data.dev_batches(job.settings.run.eval_batch_size)}
    record.teacher.source, record.teacher.path = teacher_info["source"], teacher_info.get("path")
    record.teacher.dev = evaluate(teacher, dev, None, ctx.device, ctx.precision)
    baseline = unigram_baseline(data)
    record.teacher.majority_baseline = baseline
    check_beats_baseline(ctx, record.teacher.dev, baseline, "the unigram baseline (the dev targets' most "
                         "frequent token, always)")
    init, layer_map, pruned = student_init(ctx, teacher, data, settings)
    s_data, own = data, None
    shared = shared_ids(settings, job) if settings.vocab == SHARED_PREFIX else None
    if shared is not None:  # the student reads the teacher's tokens, every one among the ids it has
        check_shared_data(data, shared, ctx.tokenizer)
    elif vocabulary_pair(job) is not None:  # its own tokens: the same pairs, row i the same pair on both sides
        own = load_named(str(job.student.tokenizer), ctx.cache_dir, "student.tokenizer",
                         bool(job.settings.teacher.trust_remote_code))
        s_data = from_instructions(settings.instructions, own, settings.max_seq_length)
        assert len(s_data.train) == len(data.train) and len(s_data.dev) == len(data.dev)
    seed_everything(job.seeds.init)
    arch = job.student_kind.describe(job.student, teacher.config)
    arch.dtype = torch.float32  # the student trains in float32 whatever dtype the teacher is held in (bf16)
    if own is not None:  # its embeddings and head over its own vocabulary
        arch.vocab_size = len(own)
        arch.bos_token_id, arch.eos_token_id, arch.pad_token_id = special_tokens(own)
    if shared is not None:  # its embeddings and head over its own vocabulary, the teacher's special tokens
        arch.vocab_size = len(vocabulary_of(str(job.student.tokenizer), "student.tokenizer").tokens)
    student = job.student_kind.build(job.student, BuildInputs(arch=arch, teacher=teacher, init=init, num_labels=2,
                                                              label_names=[])).to(ctx.device)
    terms = build_objective(job.objective, student_config=student.config, teacher_config=teacher.config,
                            layer_map=layer_map, train_labels=None, num_labels=2)
    modules = {"objective": terms.to(ctx.device)} if terms is not None else {}
    sharded = fsdp.active()
    if sharded:  # several processes: FSDP2 (training/fsdp.py), before the parameters are listed
        record.fsdp = fsdp.shard_all(student, modules, teacher, job.settings.run.fsdp.teacher, ctx.device,
                                     ctx.precision)
    params = list(student.parameters()) + (list(terms.parameters()) if terms is not None else [])
    terms = shared_teacher(terms, ctx.pack)  # a pack's members: one teacher forward per batch (decoder_pack.py)
    if shared is not None and terms is not None:  # the loss's view: both sides' next tokens over the shared ids
        terms = SharedIds(terms, shared)  # type: ignore[assignment]
    batches_per_epoch = len(s_data.train) // settings.batch_size
    epochs, cap = stage_plan(settings, batches_per_epoch, job.settings.run)  # type: ignore[arg-type]
    policy = (OnPolicy(settings, job.seeds.sampling, s_data, special_tokens(ctx.tokenizer)) if settings.generates()
              else None)
    opt = job.settings.optimizer
    # several processes: each its slice, gradients reduced by FSDP (one process: the loss itself)
    update_loss = fsdp.sharded_loss if sharded else accumulated
    chunk = settings.logit_chunk  # (sharded too: the LM heads outside the forwards read gathered weights, fsdp.py)
    stage = Stage(STAGE, epochs, opt.lr or settings.lr, settings.batch_size,
                  settings.warmup_ratio if opt.warmup_ratio is None else opt.warmup_ratio,
                  update_loss(distill_loss(student, teacher, terms, settings.ce_weight, stored,
                                           settings.logits_mode(), data if own is not None else None,
                                           policy if settings.on_policy > 0 else None, chunk),
                              params,
                              settings.batch_size // world.size), params, max_steps_per_epoch=cap)
    record.init.layers = list(init.layers)
    record.data.train_size, record.data.dev_size = batches_per_epoch * settings.batch_size, len(s_data.dev)
    record.data.dev_hash = {SequenceCapture.SPLIT: dev_sequences_hash(s_data.dev)}
    record.causal_lm = {
        "data": s_data.info, "teacher": teacher_info, "family": family_of_model(teacher).name, "layer_map": layer_map,
        "prune": pruned, "ranks": world.size, "epochs": epochs, "steps": epochs * min(batches_per_epoch, cap or batches_per_epoch),
        "student_parameters": sum(p.numel() for p in student.parameters()),
        "teacher_parameters": sum(p.numel() for p in teacher.parameters()), "settings": as_dict(settings)}
    if policy is not None:  # where the responses came from: the steps on the student's samples, a few of them
        steps = min(batches_per_epoch, cap or batches_per_epoch)
        record.causal_lm["data_source"] = {
            "on_policy": settings.on_policy, "seq_kd": settings.seq_kd, "generation": as_dict(settings.generation),
            "on_policy_steps": settings.on_policy_steps(job.seeds.sampling, epochs, steps), "steps_per_epoch": steps,
            "samples": []}  # the teacher's generations (seq_kd): causal_lm.teacher.seq_kd
    cctx = CausalContext(**{f.name: getattr(ctx, f.name) for f in dataclasses.fields(RunContext)}, causal=s_data,
                         policy=policy)
    if own is not None:
        cctx.tokenizer = own  # the student's padding and dev sequences are in its tokens
        record.causal_lm["vocabularies"] = {"teacher": {"source": tokenizer_source(job.settings.teacher),
                                                        "size": len(ctx.tokenizer), "data": data.info["key"]},
                                            "student": {"source": str(job.student.tokenizer), "size": len(own)},
                                            "alignment": "the first min(n_T, n_S) response targets of each"}
    if shared is not None:
        record.causal_lm["vocabularies"] = {
            "teacher": {"source": tokenizer_source(job.settings.teacher), "size": len(ctx.tokenizer)},
            "student": {"source": str(job.student.tokenizer), "size": int(arch.vocab_size)}, "shared_ids": shared,
            "alignment": "shared_prefix: the teacher's tokens on both sides, next-token terms over the shared ids",
            # what the dev metrics (teacher's and student's) read: the log-softmax and argmax over ids 0..n-1
            "metrics": {"vocabulary": "shared_ids", "size": shared}}
    train_student(cctx, student, [stage], modules)
    if sharded:  # the lm-eval stage runs in one process: the student is saved to be evaluated afterwards
        out = job.out_dir / "student"  # (docs/guide/gpus.md gives the lm_eval command line)
        fsdp.save_student(student, harness_tokenizer(cctx.tokenizer)[0], out)  # the tokenizer as the stage's reads
        record.student_dir = str(out)
    if settings.lm_eval.tasks and world.main:  # the student after its last epoch, in memory
        batch = job.settings.run.eval_batch_size
        record.lm_eval = run_stage(student, cctx.tokenizer, settings.lm_eval, job.out_dir, batch, chunk)
        record.lm_eval["teacher"] = teacher_stage(teacher, ctx.tokenizer, settings.lm_eval, teacher_info,
                                                  ctx.cache_dir, record.lm_eval["docs"], batch, chunk)
