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
the sweeper's build job when several jobs read it) and the teacher does not run during training.

Dev metrics: next-token accuracy on the held-out targets (`token_accuracy`, the primary metric: it picks the
best epoch, higher is better), `perplexity` (exp of the mean target NLL) and, for classification-style
instruction data, `choice_accuracy` (the next-token choice among the choices' first tokens); for instruction
data, the greedy responses' `exact_match` and `rouge_l` against the references (`generation_evaluator`).
With `vocab=shared_prefix` every dev metric reads the n shared ids only (the record's
`causal_lm.vocabularies.metrics`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from transformers import PreTrainedModel

from distill_sweep.config.parse import as_dict
from distill_sweep.data.decoder import CausalData, from_corpus, from_instructions, special_tokens
from distill_sweep.errors import ConfigError
from distill_sweep.models.capture import Features
from distill_sweep.models.families import FAMILIES, family_of_model, is_causal_type
from distill_sweep.models.inits import StudentInit
from distill_sweep.models.layer_map import map_spec, resolve_map
from distill_sweep.models.loading import tokenizer_source
from distill_sweep.models.toy_vocabulary import vocabulary
from distill_sweep.models.vocabularies import Vocabulary, load_named, shared_prefix, vocabulary_of
from distill_sweep.objectives import ANY_VOCAB_TERMS, NEXT_TOKEN_TERMS, TERMS
from distill_sweep.objectives.causal import SAMPLED, SPARSE_KEYS, TOP_K, TOP_K_FULL, TOP_K_TAIL
from distill_sweep.objectives.chunked import lm_features, mean_over_targets
from distill_sweep.objectives.core import build_objective
from distill_sweep.objectives.shared_ids import SharedIds
from distill_sweep.objectives.uld import TEACHER_LABELS
from distill_sweep.students import BuildInputs
from distill_sweep.students.prune import block_importance, prune_layers
from distill_sweep.teachers.decoder import (
    TeacherRecipe,
    lm_evaluator,
    next_token_ce,
    trained_teacher,
    unigram_baseline,
)
from distill_sweep.teachers.engine import check_engine, check_head_size
from distill_sweep.teachers.finetuned import check_beats_baseline
from distill_sweep.teachers.generations import open_or_build_generations
from distill_sweep.teachers.output_plan import decoder_group
from distill_sweep.teachers.sparse_store import TopKOutputs, open_or_build_topk
from distill_sweep.training import distributed, fsdp
from distill_sweep.training.context import Role, RunContext
from distill_sweep.training.loop import LossFn, seed_everything
from distill_sweep.training.prediction_capture import SequenceCapture, dev_sequences_hash
from distill_sweep.training.stages import Stage, StageDriver

from .causal_lm_settings import CausalLMSettings
from .common import train_student
from .decoder_pack import join, once, shared_teacher
from .lm_eval_stage import check_tasks, run_stage, teacher_stage
from .on_policy import OnPolicy, RecordSamples, mark_positions
from .sequences import accumulated, sequence_driver, stage_plan

STAGE = "distill"
STUDENTS = ("truncated", "fresh")  # the student types built for decoders
SHARED_PREFIX = "shared_prefix"  # procedure.vocab: the next-token terms over the ids both vocabularies share


# ------------------------------------------------------------------------------------------- the checks
def check_job(settings: CausalLMSettings, job: Any) -> None:
    """Rules over the whole job, from configs alone (ConfigError, one line)."""
    teacher = job.settings.teacher
    model_type = str(getattr(job.teacher_arch, "model_type", ""))
    if not is_causal_type(model_type):
        known = ", ".join(t for f in FAMILIES.values() if f.causal for t in f.model_types)
        raise ConfigError(f"procedure=causal_lm distils a decoder LM ({known}): teacher={teacher.name} is a "
                          f"{model_type} model (try teacher=tiny_llama or teacher=tiny_gpt2)")
    if teacher.finetuned_path or teacher.ensemble:
        raise ConfigError("procedure=causal_lm takes one decoder teacher: teacher.finetuned_path and "
                          "teacher.ensemble do not apply")
    if job.student_kind.name not in STUDENTS:
        raise ConfigError(f"student={job.student_kind.name} is not built for decoders: procedure=causal_lm takes "
                          f"student={' or student='.join(STUDENTS)}")
    if job.settings.optimizer.batch_size is not None:
        raise ConfigError("procedure=causal_lm takes its batch from procedure.batch_size: leave "
                          "optimizer.batch_size null")
    terms = list(job.objective.terms) if job.objective is not None else []
    if not terms and not settings.ce_weight:
        stages = set(job.objective.stages) if job.objective is not None else set()
        why = (f"objective={job.objective_name} distils a classifier's logits in a prediction stage, which "
               "procedure=causal_lm does not run (its one stage sums the objective's terms)"
               if stages & {"prediction", "combined"} else f"objective={job.objective_name} has no terms")
        raise ConfigError(f"{why}: next-token KD is objective=fkl (or rkl, gjsd; hid_seq for hidden states), or "
                          "set procedure.ce_weight > 0")
    check_vocabularies(settings, job, terms)
    first_token = [t for t in terms if TERMS[t].cls_only]
    if first_token:
        raise ConfigError(f"term {first_token[0]} of objective={job.objective_name} reads the first token's state "
                          "([CLS]); a decoder's first token is [BOS], which the causal mask lets see only itself, so "
                          "its state is the same for every sequence: use hid_seq (every real token)")
    check_logit_stages(job.objective, terms)
    # teacher.engine=vllm: its environment is installed, and its build runs the teacher's attention
    check_head_size(check_engine(teacher.engine, teacher.engine_python), job.teacher_arch)
    if settings.teacher_top_k is not None:
        live = [t for t in terms if t not in NEXT_TOKEN_TERMS]
        if live:
            raise ConfigError(f"procedure.teacher_top_k stores the teacher's logits so that it need not run, but "
                              f"term {live[0]} reads its hidden states: use it with fkl/rkl/gjsd terms only")
        check_sparse_terms(settings.logits_mode(), job.objective.terms if job.objective is not None else {})
        # a teacher built from its config with the toy tokenizer gets the toy vocabulary (trained_teacher)
        toy = teacher.name_or_path is None and tokenizer_source(teacher) == "toy"
        vocab = len(vocabulary()) if toy else int(job.teacher_arch.vocab_size)
        if settings.teacher_top_k > vocab:
            raise ConfigError(f"procedure.teacher_top_k={settings.teacher_top_k} is larger than the vocabulary "
                              f"({vocab})")
    # last: it imports lm_eval (seconds); a task name the harness does not know is refused before any training
    check_tasks(settings.lm_eval)


def check_logit_stages(objective: Any, terms: list[str]) -> None:
    """An objective with terms whose stages also distil a classifier's logits (a prediction stage, or a combined
    stage with alpha > 0): the one stage here sums the terms alone, so that KD term would be dropped unseen."""
    kd = [s for s in objective.stages if s == "prediction" or (s == "combined" and objective.alpha > 0)]
    if terms and kd:
        what = ("a prediction stage" if kd[0] == "prediction" else
                f"a combined stage that adds alpha={objective.alpha:g} x")
        raise ConfigError(f"objective={objective.name} has {what} KD on a classifier's logits (T="
                          f"{objective.temperature:g}), which procedure=causal_lm does not run: its one stage sums the "
                          f"objective's terms ({', '.join(terms)}) and its next-token KD is the fkl term; use "
                          "objective=fkl_hid_seq, or objective.stages=[intermediate] for the terms alone")


def vocabulary_pair(job: Any) -> tuple[Vocabulary, Vocabulary] | None:
    """(the teacher's, the student's) vocabularies where the student has its own tokenizer (`student.tokenizer`)
    and its tokens are not the teacher's; else None. Reads the toy word lists or the tokenizers' files only."""
    own = getattr(job.student, "tokenizer", None)
    if own is None:
        return None
    trust = bool(job.settings.teacher.trust_remote_code)
    teacher = vocabulary_of(tokenizer_source(job.settings.teacher), "teacher.tokenizer", trust)
    student = vocabulary_of(str(own), "student.tokenizer", trust)
    return None if teacher.tokens == student.tokens else (teacher, student)


def check_vocabularies(settings: CausalLMSettings, job: Any, terms: list[str]) -> None:
    """A teacher/student pair with two vocabularies: only terms that need no shared vocabulary (uld, nll), no
    stored top-k (its ids are the teacher's), and instruction data (each pair tokenised by both sides)."""
    if "uld" in terms and settings.teacher_top_k is not None:
        raise ConfigError("term uld sorts the teacher's whole next-token distribution: leave "
                          "procedure.teacher_top_k null (a stored top-k drops its tail)")
    if settings.vocab == SHARED_PREFIX:
        shared_ids(settings, job)
        return
    pair = vocabulary_pair(job)
    if pair is None:
        return
    teacher, student = pair
    one_vocab = [t for t in terms if t not in ANY_VOCAB_TERMS]
    if one_vocab or settings.teacher_top_k is not None:
        what = (f"term {one_vocab[0]} of objective={job.objective_name}" if one_vocab else
                f"procedure.teacher_logits={settings.logits_mode()}")
        raise ConfigError(f"{what} needs one vocabulary for the teacher and the student, but the teacher's tokenizer "
                          f"is {teacher.describe()} and the student's {student.describe()}: use objective=uld "
                          "(sorted probabilities, any two vocabularies) or leave student.tokenizer null")
    if settings.data != "instructions":
        raise ConfigError(f"student.tokenizer={student.source} is not the teacher's ({teacher.source}): "
                          "procedure.data=corpus packs each tokenizer's tokens into other sequences, so the two "
                          "sides would read different text; use procedure.data=instructions")
    if settings.generates():
        what = f"procedure.on_policy={settings.on_policy:g}" if settings.on_policy > 0 else "procedure.seq_kd=true"
        raise ConfigError(f"{what} trains on generated tokens, which exist in the generating model's vocabulary "
                          f"only, but the teacher's tokenizer is {teacher.describe()} and the student's "
                          f"{student.describe()}: leave student.tokenizer null")


def shared_ids(settings: CausalLMSettings, job: Any) -> int:
    """procedure.vocab=shared_prefix: n, the ids 0..n-1 the two vocabularies share (refused in one line where the
    student has the teacher's vocabulary, where they differ, or with what needs all the teacher's ids)."""
    pair = vocabulary_pair(job)
    if pair is None:
        raise ConfigError("procedure.vocab=shared_prefix distils over the ids two vocabularies share, but the student "
                          "has the teacher's (student.tokenizer null or the same tokens): leave procedure.vocab=full")
    n = shared_prefix(*pair)
    if settings.teacher_top_k is not None:
        raise ConfigError(f"procedure.vocab=shared_prefix compares the ids 0..{n - 1} both vocabularies have, but "
                          "procedure.teacher_top_k stores the teacher's top ids over all of its own: leave it null")
    if settings.generates():
        raise ConfigError("procedure.vocab=shared_prefix: the generated responses of procedure.on_policy / seq_kd "
                          "may hold ids the other side does not have: leave procedure.vocab=full")
    return n


def check_shared_data(data: CausalData, n: int, tokenizer: Any) -> None:
    """Every token of the data in the ids 0..n-1 the student has (ConfigError, one line, naming the first other)."""
    for split in (data.train, data.dev):
        real = np.arange(split.ids.shape[1])[None, :] < split.lengths[:, None]
        beyond = split.ids[real & (split.ids >= n)]
        if len(beyond):
            raise ConfigError(f"procedure.vocab=shared_prefix: the student has ids 0..{n - 1} but {data.name} holds "
                              f"id {int(beyond[0])} ({tokenizer.convert_ids_to_tokens(int(beyond[0]))!r}), which only "
                              "the teacher's vocabulary has; use objective=uld")


def check_sparse_terms(mode: str, terms: Mapping[str, Any]) -> None:
    """What each sparse estimator can serve (objectives/causal.py says why): top_k_tail and sampled read the
    teacher's probabilities at T = 1, and sampled estimates forward KL only."""
    for name, term in terms.items():
        temperature = getattr(term, "temperature", 1.0)
        if mode in (TOP_K_TAIL, SAMPLED) and temperature != 1.0:
            raise ConfigError(f"procedure.teacher_logits={mode} stores the teacher's probabilities at T = 1 (its "
                              f"tail or its draws at another T would need the whole vocabulary): term {name} has "
                              f"temperature {temperature}; set it to 1 or use teacher_logits=top_k")
        if mode == TOP_K_FULL and name != "fkl":
            raise ConfigError(f"procedure.teacher_logits=top_k_full compares the teacher's k tokens with the student's "
                              f"full softmax, a forward KL: term {name} is not fkl; use objective=fkl, or "
                              "teacher_logits=top_k or top_k_tail")
        if mode == SAMPLED and name != "fkl":
            raise ConfigError(f"procedure.teacher_logits=sampled estimates forward KL without bias, and only it: "
                              f"term {name} is not linear in the teacher's probabilities; use objective=fkl, or "
                              "teacher_logits=top_k_tail")


# ------------------------------------------------------------------------------------------------- loss
def distill_loss(student: nn.Module, teacher: nn.Module, terms: Any | None, ce_weight: float,
                 stored: Any | None, estimator: str = TOP_K, teacher_data: CausalData | None = None,
                 policy: OnPolicy | None = None, chunk: int = 0) -> LossFn:
    """The objective's terms (teacher features live, or its sparse entries from the store, read by `estimator`:
    procedure.teacher_logits) + ce_weight x CE. `teacher_data`: the same training pairs in the teacher's tokens,
    where the student has its own tokenizer (the teacher reads the rows of the batch's `idx` there). `policy`
    (procedure.on_policy > 0): at its steps the batch becomes the student's samples for its prompts, which the
    teacher then scores live; the targets are the sampled tokens. `chunk` > 0 (procedure.logit_chunk): the
    next-token terms and the CE make the logits that many positions at a time (objectives/chunked.py)."""

    def loss_fn(batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        batch = dict(batch)
        if policy is not None:
            batch = policy.batch(student, batch)
        parts: dict[str, float] = {}
        total: Tensor | None = None
        if terms is not None:
            if stored is not None:
                values, indices = SPARSE_KEYS[estimator]
                batch[values], batch[indices] = stored.gather(batch)
                t = Features(logits=None, hidden_states=None)  # the teacher's side is the stored top-k alone
            else:
                t_batch = batch
                if teacher_data is not None:  # the same rows, in the teacher's tokens
                    device = batch["input_ids"].device
                    t_batch = {k: v.to(device) for k, v in
                               teacher_data.batch(teacher_data.train, batch["idx"].cpu().numpy()).items()}
                    batch[TEACHER_LABELS] = t_batch["labels"]
                with torch.no_grad():
                    t = lm_features(terms, teacher, t_batch, "teacher", chunk)
            s = lm_features(terms, student, batch, "student", chunk)
            # chunked (t.head set), the terms apply the teacher's head outside its forward: a sharded teacher's root
            # unit gathered for them (the student's stays gathered from its forward to its backward: fsdp.py)
            with fsdp.gathered(teacher) if t.head is not None else nullcontext():
                total, parts = terms(s, t, batch)
        else:
            s = lm_features(None, student, batch, "student", chunk)
        if ce_weight:
            ce = mean_over_targets(s, batch["labels"], next_token_ce)
            parts["ce"] = float(ce.detach())
            total = ce_weight * ce if total is None else total + ce_weight * ce
        assert total is not None
        return total, parts

    return loss_fn


# ----------------------------------------------------------------------------------------------- the run
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
    ids only (`metric_ids`)."""
    instructions = job.procedure_settings.data == "instructions"
    return lm_evaluator(data, sink, tokenizer if instructions else None, job.settings.run.eval_batch_size,
                        metric_ids(job))


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


def teacher_and_store(ctx: RunContext) -> tuple[CausalData, PreTrainedModel, dict[str, Any], TopKOutputs | None]:
    """The job's data, its frozen teacher (trained and cached first if built from its config) and, with
    `procedure.teacher_top_k`, the teacher's top-k store (built first if no job built it); the record's
    `teacher_outputs` says which."""
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
    stored, store_info = None, {"mode": "live", "reason": "procedure.teacher_top_k is null: the full logits, live"}
    if settings.teacher_top_k is not None:
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
    if settings.lm_eval.tasks and world.main:  # the student after its last epoch, in memory
        batch = job.settings.run.eval_batch_size
        record.lm_eval = run_stage(student, cctx.tokenizer, settings.lm_eval, job.out_dir, batch)
        record.lm_eval["teacher"] = teacher_stage(teacher, ctx.tokenizer, settings.lm_eval, teacher_info,
                                                  ctx.cache_dir, record.lm_eval["docs"], batch)
