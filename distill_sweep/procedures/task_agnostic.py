"""Task-agnostic distillation (the paper's second half, Tables 2 and 4): distillation during pre-training.

The teacher is a pre-trained model with its MLM head, never fine-tuned (`teacher=bert_base`; offline
`teacher=tiny_mlm`, random weights); the student comes from `student=` (a fresh random encoder, or
`student=truncated init=first`, whose MLM head is then copied from the teacher too) and learns on a corpus
(`corpus=`, see corpus.py) in ONE stage, `pretrain`, whose loss is

  sum_term weight * term   over the objective's terms on the mapped layers (default map: top, the last
                           student layer <-> the last teacher layer, as the paper); the hidden-state terms
                           also pair the embedding outputs unless `procedure.embeddings_pair=false` (the
                           paper's reference code, and its presets)
  + kd_weight * T^2 KL(softmax(z_t / T) || softmax(z_s / T)) + mlm_weight * CE(z_s, masked tokens)
                           (vanilla KD on the MLM logits) when the objective has no terms (vanilla_kd) or a
                           `combined` stage; kd_weight/mlm_weight default to alpha / 1 - alpha, T is
                           objective.temperature, the KL is averaged over the masked positions (the reference)
                           or every real token (DistilBERT), set by `procedure.kd`.

An objective's `intermediate`/`prediction` split is the task-specific schedule: here "prediction" is what the
GLUE fine-tuning does later, so a terms-only objective (att_mse, ...) trains its terms alone, as the paper's
reference code did.

Global batch: `procedure.global_batch` sequences per update, as `global_batch / micro_batch` micro-batches
whose gradients are averaged (`accumulated`): one driver step is one update, so checkpoints and resumes fall
on update boundaries. The dev metrics (`mlm_accuracy`, the primary metric, and `mlm_loss`) are the student's
MLM predictions on the held-out documents: they read the MLM head, which only the KD/MLM losses train, so for
a terms-only objective they say little; the student's value is its GLUE fine-tuning. The record holds the
corpus (and whether its cache was built or reused), the KD form, and `student_dir`, where the student is
saved (`save_pretrained`, with the tokenizer) for the fine-tuning: `student=distilled student.source=<config hash>`
(what `finetune_grid` runs), or `student=pretrained student.name_or_path=<student_dir>`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import PreTrainedModel

from distill_sweep.config.parse import as_dict
from distill_sweep.data.corpus import (
    IGNORE,
    PackedCorpus,
    load_corpus,
)
from distill_sweep.errors import ConfigError
from distill_sweep.models.loading import as_masked_lm, has_mlm_head, head_deferred, mlm_head
from distill_sweep.models.toy_vocabulary import vocabulary
from distill_sweep.objectives.core import build_objective
from distill_sweep.objectives.inputs import as_target, fp32_region
from distill_sweep.students import BuildInputs
from distill_sweep.teachers.finetuned import check_beats_baseline, masked_lm_teacher
from distill_sweep.training import distributed, fsdp
from distill_sweep.training.context import Role, RunContext
from distill_sweep.training.loop import LossFn, autocast, model_inputs, seed_everything, to_device
from distill_sweep.training.stages import Stage, StageDriver

from .common import train_student
from .sequences import accumulated, sequence_driver, stage_plan
from .task_agnostic_settings import MLM_ACCURACY, TaskAgnosticSettings

STAGE = "pretrain"
# Terms that read the training set's class labels (a memory bank of classes): a corpus has none.
LABELLED_TERMS = ("hid_cls_contrast",)


# ------------------------------------------------------------------------------------------- the checks
def check_job(settings: TaskAgnosticSettings, job: Any) -> None:
    """Rules over the whole job, from configs alone (ConfigError, one line)."""
    teacher = job.settings.teacher
    if teacher.finetuned_path or teacher.ensemble:
        what = "teacher.finetuned_path (a fine-tuned classifier)" if teacher.finetuned_path else "teacher.ensemble"
        raise ConfigError(f"procedure=task_agnostic distils a pre-trained teacher with its MLM head: {what} "
                          "does not apply")
    if has_mlm_head(job.teacher_arch) is False:
        raise ConfigError(f"teacher={teacher.name} ({teacher.name_or_path}) has no MLM head (its config names "
                          f"{', '.join(job.teacher_arch.architectures)}): task-agnostic distillation needs the "
                          "pre-trained model with its MLM head")
    if job.objective is not None:
        labelled = [t for t in job.objective.terms if t in LABELLED_TERMS]
        if labelled:
            raise ConfigError(f"objective={job.objective.name}: term {labelled[0]} needs the class labels of a "
                              "task; procedure=task_agnostic learns from unlabelled text")
    if job.settings.optimizer.batch_size is not None:
        raise ConfigError("procedure=task_agnostic takes its batch from procedure.global_batch and "
                          "procedure.micro_batch: leave optimizer.batch_size null")
    if teacher.name_or_path is not None:
        vocab = int(job.teacher_arch.vocab_size)
    else:  # built from config: its vocabulary is the tokenizer's (known here for the toy one)
        vocab = len(vocabulary()) if teacher.tokenizer == "toy" else None
    student_vocab = int(job.student_arch.vocab_size)
    if job.student_kind.name == "pretrained" and vocab is not None and student_vocab != vocab:
        raise ConfigError(f"the student's vocabulary has {student_vocab} tokens and the teacher's {vocab}: "
                          "distillation on the MLM logits needs one vocabulary")


# ----------------------------------------------------------------------------------------------- losses
def mlm_kd_loss(student_logits: Tensor, teacher_logits: Tensor, labels: Tensor, valid: Tensor, *,
                temperature: float, positions: str) -> tuple[Tensor, Tensor]:
    """(T^2 KL(softmax(z_t/T) || softmax(z_s/T)) averaged over the KD positions, the MLM cross-entropy averaged
    over the masked positions). Logits (B, S, V); labels (B, S), IGNORE where nothing is predicted; valid (B, S)
    real tokens. KD positions: the masked ones, or every real token (`positions="all"`)."""
    where = kd_positions(labels, valid, positions)
    return kd_and_mlm(student_logits[where], teacher_logits[where], labels[where], temperature)


def kd_positions(labels: Tensor, valid: Tensor, positions: str) -> Tensor:
    """(B, S) bool: where the KD term is taken (the masked tokens, or every real token); it holds every masked
    token, so the MLM loss is read from the same rows."""
    return labels != IGNORE if positions == "masked" else valid.bool()


def kd_and_mlm(student_rows: Tensor, teacher_rows: Tensor, row_labels: Tensor, temperature: float
               ) -> tuple[Tensor, Tensor]:
    """`mlm_kd_loss` on the logits of the KD positions only, (N, V), with their labels (N,)."""
    with fp32_region(student_rows.device):
        t = float(temperature)
        logp_s = F.log_softmax(student_rows.float() / t, dim=-1)
        logp_t = F.log_softmax(as_target(teacher_rows) / t, dim=-1)
        kd = (logp_t.exp() * (logp_t - logp_s)).sum(-1).mean() * (t * t)
        masked = row_labels != IGNORE
        mlm = F.cross_entropy(student_rows[masked].float(), row_labels[masked])
    return kd, mlm


@dataclass(frozen=True)
class KDForm:
    """The vanilla-KD part of the loss as used (recorded)."""

    kd_weight: float
    mlm_weight: float
    temperature: float
    positions: str


def loss_parts(objective: Any, kd: Any, student_config: Any, teacher_config: Any, layer_map: Any, *,
               embeddings_pair: bool = True) -> tuple[Any | None, KDForm | None]:
    """The objective's terms on the mapped layers (None for none) and the vanilla-KD form (None when the
    objective has terms and no combined stage), from the objective and `procedure.kd` settings;
    `embeddings_pair`: `procedure.embeddings_pair` (the hidden-state terms also pair the embedding outputs)."""
    terms = build_objective(objective, student_config=student_config, teacher_config=teacher_config,
                            layer_map=layer_map, train_labels=None, num_labels=2, embeddings_pair=embeddings_pair)
    if terms is not None and "combined" not in objective.stages:
        return terms, None
    return terms, KDForm(objective.alpha if kd.kd_weight is None else kd.kd_weight,
                         1.0 - objective.alpha if kd.mlm_weight is None else kd.mlm_weight,
                         objective.temperature, kd.positions)


def pretrain_loss(student: nn.Module, teacher: nn.Module, terms: Any | None, kd: KDForm | None) -> LossFn:
    """The `pretrain` stage's loss of one micro-batch (see the module docstring).

    The models run without their MLM heads (`head_deferred`): the heads are applied to the KD positions'
    hidden states only (the masked tokens by default), and not at all when the objective has no KD part. The
    logits at those positions are the full forward's; the vocabulary-sized GEMM over every other token is gone.
    Sharded (FSDP2), the heads are in the models' root units: the student's stays gathered from its forward to its
    backward, a sharded teacher's is gathered again for its rows (fsdp.py).
    """
    def loss_fn(batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        total: Tensor | None = None
        parts: dict[str, float] = {}
        with head_deferred(student) as s_head, head_deferred(teacher) as t_head:
            if terms is not None:
                with torch.no_grad():
                    t = terms.features(teacher, batch, "teacher")
                s = terms.features(student, batch, "student")
                total, parts = terms(s, t, batch)
                s_last, t_last = s.logits, t.logits  # the last hidden states: the heads are deferred
            else:
                inputs = model_inputs(dict(batch))
                with torch.no_grad():
                    t_last = teacher(**inputs).logits
                s_last = student(**inputs).logits
        if kd is not None:
            where = kd_positions(batch["labels"], batch["attention_mask"], kd.positions)
            with torch.no_grad(), fsdp.gathered(teacher):  # a sharded teacher's head, outside its forward
                t_rows = t_head(t_last[where])
            kd_value, mlm = kd_and_mlm(s_head(s_last[where]), t_rows, batch["labels"][where], kd.temperature)
            parts.update(kd=float(kd_value.detach()), mlm=float(mlm.detach()))
            weighted = kd.kd_weight * kd_value + kd.mlm_weight * mlm
            total = weighted if total is None else total + weighted
        assert total is not None, "an objective with neither terms nor KD"
        return total, parts

    return loss_fn




# --------------------------------------------------------------------------------------------- evaluation
@torch.no_grad()
def mlm_evaluate(model: PreTrainedModel, dev_loaders: dict[str, Callable[[], Iterator[dict[str, Tensor]]]],
                 metrics: Any, device: torch.device, precision: str) -> dict[str, float]:
    """Masked-token accuracy and cross-entropy on the dev slice (the MLM head applied at masked positions
    only). The stage driver's `evaluate_fn`; `metrics` is unused."""
    was_training = model.training
    model.eval()
    nll, correct, count = 0.0, 0, 0
    try:
        for batches in dev_loaders.values():
            for batch in batches():
                batch = to_device(batch, device)
                masked = batch["labels"] != IGNORE
                # through the model's own forward, its head deferred (not `model.base_model`): a sharded model's
                # hooks gather its root unit there, the head's weights with it
                with autocast(device, precision), head_deferred(model) as head:
                    hidden = model(**model_inputs(batch)).logits
                    logits = head(hidden[masked]).float()
                gold = batch["labels"][masked]
                nll += float(F.cross_entropy(logits, gold, reduction="sum"))
                correct += int((logits.argmax(-1) == gold).sum())
                count += int(gold.numel())
    finally:
        model.train(was_training)
    return {MLM_ACCURACY: correct / max(1, count), "mlm_loss": nll / max(1, count)}


def unigram_accuracy(dev_loaders: dict[str, Callable[[], Iterator[dict[str, Tensor]]]]) -> float:
    """The dev masked-token accuracy of always predicting the dev slice's most frequent masked token."""
    counts: Counter[int] = Counter()
    for batches in dev_loaders.values():
        for batch in batches():
            gold = batch["labels"][batch["labels"] != IGNORE]
            counts.update(gold.tolist())
    total = sum(counts.values())
    return max(counts.values()) / total if total else 0.0


# ------------------------------------------------------------------------------------------------ the run
@dataclass
class CorpusContext(RunContext):
    """The run context over a corpus: the driver reads packed batches and scores the dev MLM predictions."""

    corpus: PackedCorpus | None = None

    def driver(self, *, role: Role, **driver_args: Any) -> StageDriver:
        assert self.corpus is not None  # (only the student trains here: a corpus fine-tunes no teacher)
        driver = sequence_driver(self, self.corpus, self.job.procedure_settings.global_batch, mlm_evaluate,
                                 **driver_args)
        driver.measure_cost()  # the record's cost (training/cost.py)
        return driver






def build_mlm_student(ctx: RunContext, teacher: PreTrainedModel) -> tuple[PreTrainedModel, str]:
    """The job's student as a masked-LM model (seeded by the job's init seed) and where its MLM head comes from:
    copied from the teacher when the student copies teacher layers at the teacher's width, else fresh."""
    job = ctx.job
    seed_everything(job.seeds.init)
    arch = job.student_kind.describe(job.student, teacher.config)
    student = job.student_kind.build(job.student, BuildInputs(arch=arch, teacher=teacher, init=job.init,
                                                              num_labels=2, label_names=[]))
    student = as_masked_lm(student)
    if int(student.config.vocab_size) != int(teacher.config.vocab_size):
        raise ConfigError(f"the student's vocabulary has {student.config.vocab_size} tokens and the teacher's "
                          f"{teacher.config.vocab_size}: distillation on the MLM logits needs one vocabulary")
    source = "fresh"
    if job.student_kind.uses_init and job.init.layers and student.config.hidden_size == teacher.config.hidden_size:
        with torch.no_grad():
            mlm_head(student).load_state_dict(mlm_head(teacher).state_dict())
        source = "copied"
    return student.to(ctx.device), source




def run(ctx: RunContext) -> None:
    job, record = ctx.job, ctx.record
    settings: TaskAgnosticSettings = job.procedure_settings
    assert job.objective is not None
    with distributed.main_first():  # one cache build, not one per rank
        corpus = load_corpus(settings.corpus, ctx.tokenizer, ctx.cache_dir)
    batches_per_epoch = len(corpus.train) // settings.global_batch
    if batches_per_epoch < 1:
        raise ConfigError(f"corpus={settings.corpus.name} has {len(corpus.train)} training sequences, fewer than "
                          f"one global batch (procedure.global_batch={settings.global_batch})")
    cctx = CorpusContext(**{f.name: getattr(ctx, f.name) for f in dataclasses.fields(RunContext)}, corpus=corpus)
    teacher = masked_lm_teacher(ctx)
    run_settings = job.settings.run
    dev = {"validation": lambda: corpus.dev_batches(run_settings.eval_batch_size)}
    record.teacher.dev = mlm_evaluate(teacher, dev, None, ctx.device, ctx.precision)
    baseline = {MLM_ACCURACY: unigram_accuracy(dev)}
    record.teacher.majority_baseline = baseline
    # a teacher no better than always predicting the most frequent token (random weights, a head that was
    # initialised when loaded) teaches nothing: refused before the student is built
    check_beats_baseline(ctx, record.teacher.dev, baseline, "the unigram baseline (the dev slice's most "
                         "frequent masked token, always)")
    student, head_source = build_mlm_student(ctx, teacher)
    terms, kd = loss_parts(job.objective, settings.kd, student.config, teacher.config, job.layer_map,
                           embeddings_pair=settings.embeddings_pair)
    modules = {"objective": terms.to(ctx.device)} if terms is not None else {}
    sharded = fsdp.active()
    if sharded:  # several processes: FSDP2 (training/fsdp.py), before the parameters are listed
        record.fsdp = fsdp.shard_all(student, modules, teacher, job.settings.run.fsdp.teacher, ctx.device,
                                     ctx.precision, keep_gathered=bool(terms is not None and terms.student_qkv_layers))
    params = list(student.parameters()) + (list(terms.parameters()) if terms is not None else [])
    opt = job.settings.optimizer
    epochs, cap = stage_plan(settings, batches_per_epoch, run_settings)
    # the global batch as micro-batches of `micro_batch` rows: on one process `accumulated`; several, each rank its
    # slice with FSDP reducing the gradients (sharded_loss: a micro-batch weighs its rows, all of one size here)
    update_loss = fsdp.sharded_loss if sharded else accumulated
    loss_fn = update_loss(pretrain_loss(student, teacher, terms, kd), params, settings.micro_batch)
    stage = Stage(STAGE, epochs, opt.lr or settings.lr, settings.global_batch,
                  settings.warmup_ratio if opt.warmup_ratio is None else opt.warmup_ratio, loss_fn, params,
                  max_steps_per_epoch=cap)
    record.corpus = corpus.describe()
    record.data.train_size, record.data.dev_size = batches_per_epoch * settings.global_batch, len(corpus.dev)
    record.task_agnostic = {
        "global_batch": settings.global_batch, "micro_batch": settings.micro_batch,
        "accumulation_steps": settings.global_batch // settings.micro_batch // distributed.world().size,
        "ranks": distributed.world().size, "epochs": epochs,
        "steps": epochs * min(batches_per_epoch, cap or batches_per_epoch),
        "kd": dataclasses.asdict(kd) if kd is not None else None, "mlm_head": head_source,
        "settings": as_dict(settings)}
    train_student(cctx, student, [stage], modules)
    out = job.out_dir / "student"
    fsdp.save_student(student, ctx.tokenizer, out)  # sharded: gathered onto rank 0, which writes it
    record.student_dir = str(out)
