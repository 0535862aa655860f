"""The decoder teacher of procedure=causal_lm, its training from scratch (tiny offline teachers), and the
next-token metrics every causal model is scored by.

A teacher given by `teacher.name_or_path` (hub id or local directory) is loaded with its LM head and used as
it is. One built from `teacher.config` (teacher=tiny_llama, tiny_gpt2) starts random (seeded by
`teacher.finetune.seed`) and is first trained with the next-token cross-entropy on the job's training
sequences for `procedure.teacher_steps` steps, so that the students have something to learn. It trains through
the stage driver (training/stages.py: checkpoint and resume at the step, SLURM preemption) and is cached as
encoder teachers are (teachers/cache.py: one build per key under a lock, `teacher.json` written last, a damaged
entry set aside and trained again), in `cache_dir/teachers/<data>/<teacher>-<key>/`. The key holds what
determines the teacher: its config, seed, attention implementation, the tokenizer's ids (`tokenizer_hash`), the
data's content key, the recipe and the precision; never a path. A random teacher (`teacher_steps: 0`) is
plumbing only.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AutoModelForCausalLM, LogitsProcessorList, PreTrainedModel

from distill_sweep.config.schema import OptimizerSettings, RunSettings, TeacherSettings
from distill_sweep.data.corpus import IGNORE
from distill_sweep.data.decoder import CausalData, special_tokens
from distill_sweep.data.decoder_settings import CHOICE, PRIMARY
from distill_sweep.data.fingerprints import tokenizer_hash
from distill_sweep.data.generation_metrics import generation_scores
from distill_sweep.errors import ConfigError
from distill_sweep.models.generation import FirstIds, generate_responses
from distill_sweep.models.lm_head import forward_without_head
from distill_sweep.models.loading import inference_dtype, model_error_message, model_source, teacher_config
from distill_sweep.records.disk import writing
from distill_sweep.teachers.cache import cached_build
from distill_sweep.training import distributed, fsdp
from distill_sweep.training.checkpoint_files import CHECKPOINT
from distill_sweep.training.loop import autocast, model_inputs, seed_everything, to_device
from distill_sweep.training.stages import Stage, StageDriver

log = logging.getLogger("distill_sweep")
KEY_VERSION = 2  # 2: trained by the stage driver, keyed by content (1: its own loop, keyed with paths)
# The teacher's optimiser, whatever the students' `optimizer` settings: a sweep over those reuses one teacher
OPTIMIZER = OptimizerSettings(betas=[0.9, 0.999], eps=1e-8, weight_decay=0.01, max_grad_norm=1.0)
STAGE = "teacher_lm"


@dataclass(frozen=True)
class TeacherRecipe:
    """How a teacher built from its config is trained: `steps` updates of `batch_size` sequences at `lr`."""

    steps: int
    lr: float
    batch_size: int


def load_causal_lm(teacher: TeacherSettings, vocab_size: int, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    """The teacher with its LM head in `dtype`: from `name_or_path` (read in that dtype), or random from `config`
    (seeded by the caller; drawn in float32 and then cast, so a bf16 teacher is the float32 one rounded)."""
    attn = teacher.attn_implementation
    if teacher.name_or_path is None:
        config = teacher_config(teacher, 2, vocab_size)
        config._attn_implementation = attn
        return AutoModelForCausalLM.from_config(config, attn_implementation=attn).to(dtype)
    source = model_source(str(teacher.name_or_path), "teacher.name_or_path")
    try:
        return AutoModelForCausalLM.from_pretrained(source, trust_remote_code=bool(teacher.trust_remote_code),
                                                    attn_implementation=attn, dtype=dtype)
    except (OSError, ValueError) as err:
        raise ConfigError(model_error_message(source, err, "teacher.name_or_path")) from None


def next_token_ce(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of the targets (labels already shifted; IGNORE elsewhere)."""
    where = labels != IGNORE
    return F.cross_entropy(logits[where].float(), labels[where])


def teacher_key(teacher: TeacherSettings, data: CausalData, tokenizer: Any, recipe: TeacherRecipe,
                precision: str) -> dict[str, Any]:
    """Everything that determines the trained teacher, and nothing that says where files live."""
    return {"version": KEY_VERSION, "config": dict(teacher.config or {}), "seed": int(teacher.finetune.seed),
            "attn": teacher.attn_implementation, "tokenizer": tokenizer_hash(tokenizer), "vocab": len(tokenizer),
            "data": data.key, "recipe": asdict(recipe), "optimizer": asdict(OPTIMIZER), "precision": precision}


def teacher_dir(cache_dir: Path, teacher: TeacherSettings, data: CausalData, key: dict[str, Any]) -> Path:
    """The cache entry: `<cache_dir>/teachers/<data name>/<teacher name>-<12 hex of the key>`."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return Path(cache_dir) / "teachers" / data.name / f"{teacher.name}-{digest}"


def trained_teacher(teacher: TeacherSettings, data: CausalData, tokenizer: Any, recipe: TeacherRecipe, *,
                    cache_dir: Path, device: torch.device, precision: str, run: RunSettings
                    ) -> tuple[PreTrainedModel, dict[str, Any]]:
    """The frozen, eval-mode teacher and what the record says of it (see the module docstring). `run`: the job's
    run settings (checkpoint.every_steps, log_every, eval_batch_size, skip_nonfinite)."""
    seed_everything(int(teacher.finetune.seed))
    dtype = inference_dtype(precision)  # read in the run's compute dtype: no float32 copy on the device
    if teacher.name_or_path is not None or recipe.steps == 0:
        model = load_causal_lm(teacher, len(tokenizer), dtype)
        info: dict[str, Any] = {"source": "given" if teacher.name_or_path else "random", "path": teacher.name_or_path}
    else:
        if len(data.train) < recipe.batch_size:
            raise ConfigError(f"{len(data.train)} training sequences: fewer than one batch ({recipe.batch_size})")
        key = teacher_key(teacher, data, tokenizer, recipe, precision)

        def train(out_dir: Path) -> dict[str, float]:
            with distributed.alone():  # rank 0 alone (main_first): the others wait for the cache
                return _train(teacher, data, len(tokenizer), recipe, out_dir, device=device, precision=precision,
                              run=run)

        path, source, dev = cached_build(teacher_dir(cache_dir, teacher, data, key), key, train, doing="training")
        model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=teacher.attn_implementation,
                                                     dtype=dtype)
        info = {"source": "trained", "path": str(path), "cache": "built" if source == "trained" else "reused",
                "steps": recipe.steps, "lr": recipe.lr, "dev": dev}
    model.to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, info


def _train(teacher: TeacherSettings, data: CausalData, vocab_size: int, recipe: TeacherRecipe, out_dir: Path, *,
           device: torch.device, precision: str, run: RunSettings) -> dict[str, float]:
    """Next-token cross-entropy for `recipe.steps` updates (AdamW, linear decay to 0), as one stage of the
    driver checkpointed in `out_dir` (the cache's unfinished entry): a killed or preempted training resumes at
    its step in whichever job takes the lock next. Saves the model there; returns its dev metrics."""
    seed = int(teacher.finetune.seed)
    seed_everything(seed)
    model = load_causal_lm(teacher, vocab_size).to(device)

    def batches(stage: Stage, epoch: int) -> Iterator[dict[str, Tensor]]:
        # one driver epoch of `steps` updates running through as many seeded passes over the data as it takes;
        # a resumed epoch replays the same order
        return itertools.chain.from_iterable(data.train_batches(recipe.batch_size, seed * 1000 + n)
                                             for n in itertools.count())

    def loss(batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, float]]:
        return next_token_ce(model(**model_inputs(batch)).logits, batch["labels"]), {}

    history: list[dict[str, Any]] = []
    stage = Stage(STAGE, 1, recipe.lr, recipe.batch_size, 0.0, loss, list(model.parameters()))
    driver = StageDriver(model=model, state={"model": model}, train_size=recipe.steps * recipe.batch_size,
                         loader=batches, dev_loaders={"validation": lambda: data.dev_batches(run.eval_batch_size)},
                         metrics=None, device=device, precision=precision, optimizer_cfg=OPTIMIZER,
                         checkpoint=out_dir / CHECKPOINT, key=out_dir.name, history=history,
                         every_steps=run.checkpoint.every_steps, log_every=run.log_every,
                         skip_nonfinite=run.skip_nonfinite, label="teacher ", evaluate_fn=lm_evaluator(data))
    log.info("training the decoder teacher %s (seed %d) for %d steps", teacher.name, seed, recipe.steps)
    driver.run([stage])
    model.eval()
    with writing(out_dir, f"its {CHECKPOINT} is kept: the next run trains from it"):
        model.save_pretrained(out_dir)
    (out_dir / CHECKPOINT).unlink(missing_ok=True)
    return history[-1]["dev"]


# ------------------------------------------------------------------------------------------------ metrics
def lm_evaluator(data: CausalData, sink: Callable[[dict[str, np.ndarray]], None] | None = None,
                 tokenizer: Any | None = None, batch_size: int = 64, ids: int | None = None, chunk: int = 0
                 ) -> Callable[..., dict[str, float]]:
    """The stage driver's `evaluate_fn` over `data`'s dev slice: token accuracy (primary), perplexity (exp of the
    mean target NLL), and the next-token choice accuracy for classification-style data. With `sink`, each
    evaluation also hands it every dev sequence's `nll` (summed over its targets), `targets` and `correct`, in
    row order: the sums the metrics are made of (records/predictions.py keeps them). With `tokenizer` (the one
    `data` is in; instruction data), also the greedy responses to the dev prompts scored against the references:
    exact match and ROUGE-L F1 (`greedy_responses` in batches of `batch_size`, data/generation_metrics.py).
    With `ids` = n (procedure.vocab=shared_prefix), everything reads ids 0..n-1 only: the log-softmax is
    renormalised over them, the argmax and the greedy responses are taken among them. With `chunk` > 0
    (procedure.logit_chunk) the logits are made `chunk` predicting rows at a time from the last hidden states and
    the LM head (`_scored`), so a batch's full-vocabulary logits never exist at once: the same numbers."""

    @torch.no_grad()
    def evaluate(model: nn.Module, dev_loaders: dict[str, Callable[[], Iterator[dict[str, Tensor]]]],
                 metrics: Any, device: torch.device, precision: str) -> dict[str, float]:
        was_training = model.training
        model.eval()
        nll, correct, count, chosen, choices = 0.0, 0, 0, 0, 0
        choice_ids = torch.tensor(data.choice_ids, dtype=torch.long, device=device) if data.choice_ids else None
        per_nll, per_targets, per_correct = (np.zeros(len(data.dev), dtype=t) for t in (np.float64, np.int64, np.int64))
        try:
            for batches in dev_loaders.values():
                for batch in batches():
                    batch = to_device(batch, device)
                    labels = batch["labels"]
                    where = labels != IGNORE
                    gold = labels[where]
                    idx = batch["idx"].cpu().numpy()
                    right = data.dev.choice[idx] if choice_ids is not None else np.zeros(0, np.int64)
                    keep = np.nonzero(right >= 0)[0]
                    at = (torch.as_tensor(keep, device=device),
                          torch.as_tensor(data.dev.first_target[idx][keep] - 1, device=device))
                    row_nll, total, row_right, scores = _scored(model, batch, where, gold, at, chunk, ids, device,
                                                                precision)
                    nll += float(total)
                    correct += int(row_right.sum())
                    count += int(gold.numel())
                    if sink is not None:  # the same sums per sequence (float64: they add up to the totals)
                        seq = where.nonzero()[:, 0]
                        n = torch.zeros(len(labels), dtype=torch.float64, device=device)
                        n.index_add_(0, seq, row_nll.double())
                        per_nll[idx] = n.cpu().numpy()
                        per_targets[idx] = where.sum(1).cpu().numpy()
                        per_correct[idx] = (torch.zeros(len(labels), dtype=torch.long, device=device)
                                            .index_add_(0, seq, row_right.long()).cpu().numpy())
                    if choice_ids is not None and len(keep):
                        chosen += int((scores[:, choice_ids].argmax(-1).cpu().numpy() == right[keep]).sum())
                        choices += len(keep)
        finally:
            model.train(was_training)
        out = {PRIMARY: correct / max(1, count), "perplexity": math.exp(min(nll / max(1, count), 50.0)),
               "nll": nll / max(1, count)}
        if choice_ids is not None:
            out[CHOICE] = chosen / max(1, choices)
        if sink is not None:
            sink({"nll": per_nll, "targets": per_targets, "correct": per_correct})
        if tokenizer is not None:
            out.update(generation_scores(*greedy_responses(model, data, tokenizer, device, precision, batch_size,
                                                           ids)))
        return out

    return evaluate


def _scored(model: nn.Module, batch: dict[str, Tensor], where: Tensor, gold: Tensor, at: tuple[Tensor, Tensor],
            chunk: int, ids: int | None, device: torch.device, precision: str
            ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The dev batch's predicting rows (`where`, targets `gold`): each row's target NLL (float32), their sum, whether its
    argmax is the target, and the float32 logits at the positions `at` (rows, positions: the choice rows). Whole
    logits (`chunk` 0) or `chunk` rows at a time from the hidden states (models/lm_head.py; a sharded model's head
    gathered for them, training/fsdp.py)."""
    if chunk <= 0:
        with autocast(device, precision):
            logits = model(**model_inputs(batch)).logits.float()
        if ids is not None:  # the ids the metrics read (the student's others were never trained)
            logits = logits[..., :ids]
        rows = logits[where]
        return (F.cross_entropy(rows, gold, reduction="none"), F.cross_entropy(rows, gold, reduction="sum"),
                rows.argmax(-1) == gold, logits[at])
    with autocast(device, precision):
        head = forward_without_head(model, batch, hidden=False, chunk=chunk).head
    assert head is not None
    if ids is not None:
        head = head.first_ids(ids)
    hidden = head.hidden[where]
    nll, right = torch.empty(len(gold), device=device), torch.empty(len(gold), dtype=torch.bool, device=device)
    with fsdp.gathered(model):
        for start in range(0, len(gold), chunk):
            sl = slice(start, start + chunk)
            logits = head.rows(hidden[sl]).float()
            nll[sl] = F.cross_entropy(logits, gold[sl], reduction="none")
            right[sl] = logits.argmax(-1) == gold[sl]
            del logits  # before the next chunk's are made
        scores = head.rows(head.hidden[at]).float()
    return nll, nll.sum(), right, scores


@torch.no_grad()
def greedy_responses(model: nn.Module, data: CausalData, tokenizer: Any, device: torch.device, precision: str,
                     batch_size: int, ids: int | None = None) -> tuple[list[str], list[str]]:
    """(the model's greedy response to each dev prompt, its reference response), decoded without special tokens,
    in row order. Prompts are the dev sequences up to their first target ([BOS] prompt), generated in batches
    (models/generation.py) until [EOS] or, at most, as many new tokens as the batch's longest reference (response
    and [EOS]): the cap that keeps a rambling student's evaluation short, as MiniLLM's evaluation caps length.
    `ids` = n: only ids 0..n-1 are generated."""
    dev, (_, eos, pad) = data.dev, special_tokens(tokenizer)
    processors = LogitsProcessorList([FirstIds(ids)] if ids is not None else [])
    responses: list[str] = []
    references: list[str] = []
    for start in range(0, len(dev), batch_size):
        rows = range(start, min(start + batch_size, len(dev)))
        longest = int(max(dev.lengths[i] - dev.first_target[i] for i in rows))
        with autocast(device, precision):
            generated = generate_responses(model, [dev.ids[i, :dev.first_target[i]] for i in rows],
                                           max_new_tokens=longest, eos=eos, pad=pad, device=device,
                                           processors=processors)
        for i, new in zip(rows, generated, strict=True):
            responses.append(tokenizer.decode(new[:-1] if new[-1:] == [eos] else new, skip_special_tokens=True))
            references.append(tokenizer.decode(dev.ids[i, dev.first_target[i]:dev.lengths[i] - 1].tolist(),
                                               skip_special_tokens=True))
    return responses, references


def unigram_baseline(data: CausalData) -> dict[str, float]:
    """Always predicting the dev targets' most frequent token: its token accuracy (and the choice accuracy of
    always answering the most frequent choice), what a teacher must beat."""
    counts: dict[int, int] = {}
    for batch in data.dev_batches(256):
        gold = batch["labels"][batch["labels"] != IGNORE]
        for token, n in zip(*np.unique(gold.numpy(), return_counts=True), strict=True):
            counts[int(token)] = counts.get(int(token), 0) + int(n)
    total = sum(counts.values())
    out = {PRIMARY: max(counts.values()) / total if total else 0.0}
    rows, right = data.dev_choice_rows()
    if data.choice_ids:
        out[CHOICE] = float(np.bincount(right).max() / len(rows)) if len(rows) else 0.0
    return out
