"""The decoder teacher of procedure=causal_lm, its training from scratch (tiny offline teachers), and the
next-token metrics every causal model is scored by.

A teacher given by `teacher.name_or_path` (hub id or local directory) is loaded with its LM head and used as
it is. One built from `teacher.config` (teacher=tiny_llama, tiny_gpt2) starts random (seeded by
`teacher.finetune.seed`) and is first trained with the next-token cross-entropy on the job's training
sequences for `procedure.teacher_steps` steps, so that the students have something to learn; the trained
teacher is cached in `cache_dir/causal_teachers/<key>/` (the key: its config, seed, data and recipe), so every
job of a sweep distils the same one. A random teacher (`teacher_steps: 0`) is plumbing only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AutoModelForCausalLM, PreTrainedModel

from distill_sweep.config.schema import TeacherSettings
from distill_sweep.data.corpus import IGNORE
from distill_sweep.data.decoder import CausalData
from distill_sweep.data.decoder_settings import CHOICE, PRIMARY
from distill_sweep.errors import ConfigError
from distill_sweep.models.loading import model_error_message, model_source, teacher_config
from distill_sweep.training.loop import autocast, model_inputs, seed_everything, to_device

log = logging.getLogger("distill_sweep")


def load_causal_lm(teacher: TeacherSettings, vocab_size: int) -> PreTrainedModel:
    """The teacher with its LM head: from `name_or_path`, or random from `config` (seeded by the caller)."""
    attn = teacher.attn_implementation
    if teacher.name_or_path is None:
        config = teacher_config(teacher, 2, vocab_size)
        config._attn_implementation = attn
        return AutoModelForCausalLM.from_config(config, attn_implementation=attn)
    source = model_source(str(teacher.name_or_path), "teacher.name_or_path")
    try:
        return AutoModelForCausalLM.from_pretrained(source, trust_remote_code=bool(teacher.trust_remote_code),
                                                    attn_implementation=attn)
    except (OSError, ValueError) as err:
        raise ConfigError(model_error_message(source, err, "teacher.name_or_path")) from None


def next_token_ce(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of the targets (labels already shifted; IGNORE elsewhere)."""
    where = labels != IGNORE
    return F.cross_entropy(logits[where].float(), labels[where])


def teacher_key(teacher: TeacherSettings, data: CausalData, steps: int, lr: float, batch_size: int) -> str:
    blob = json.dumps({"config": dict(teacher.config), "seed": teacher.finetune.seed, "data": data.info.get("cache_key")
                       or data.info.get("key"), "steps": steps, "lr": lr, "batch": batch_size,
                       "attn": teacher.attn_implementation}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def trained_teacher(teacher: TeacherSettings, data: CausalData, vocab_size: int, *, steps: int, lr: float,
                    batch_size: int, cache_dir: Path, device: torch.device, precision: str
                    ) -> tuple[PreTrainedModel, dict[str, Any]]:
    """The frozen, eval-mode teacher and what the record says of it (see the module docstring)."""
    seed_everything(int(teacher.finetune.seed))
    if teacher.name_or_path is not None or steps == 0:
        model = load_causal_lm(teacher, vocab_size)
        info: dict[str, Any] = {"source": "given" if teacher.name_or_path else "random", "path": teacher.name_or_path}
    else:
        key = teacher_key(teacher, data, steps, lr, batch_size)
        path = Path(cache_dir) / "causal_teachers" / f"{teacher.name}-{key}"
        built = not (path / "config.json").exists()
        if built:
            model = load_causal_lm(teacher, vocab_size).to(device)
            _train(model, data, steps=steps, lr=lr, batch_size=batch_size, seed=int(teacher.finetune.seed),
                   device=device, precision=precision)
            _save(model, path)
        model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=teacher.attn_implementation)
        info = {"source": "trained", "path": str(path), "cache": "built" if built else "reused", "steps": steps,
                "lr": lr}
    model.to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, info


def _train(model: PreTrainedModel, data: CausalData, *, steps: int, lr: float, batch_size: int, seed: int,
           device: torch.device, precision: str) -> None:
    """Next-token cross-entropy, AdamW with linear decay, over as many seeded epochs as `steps` needs."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / steps))
    done, epoch = 0, 0
    if len(data.train) < batch_size:
        raise ConfigError(f"{len(data.train)} training sequences: fewer than one batch ({batch_size})")
    while done < steps:
        for batch in data.train_batches(batch_size, seed * 1000 + epoch):
            batch = to_device(batch, device)
            with autocast(device, precision):
                loss = next_token_ce(model(**model_inputs(batch)).logits, batch["labels"])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            done += 1
            if done >= steps:
                break
        epoch += 1
    log.info("causal teacher trained for %d steps (last loss %.4f)", steps, float(loss.detach()))
    model.eval()


def _save(model: PreTrainedModel, path: Path) -> None:
    """Written into a temporary directory and renamed into place: a killed build leaves nothing half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        model.save_pretrained(tmp)
        os.replace(tmp, path)
    except OSError:  # another job renamed its identical copy first
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ metrics
def lm_evaluator(data: CausalData) -> Callable[..., dict[str, float]]:
    """The stage driver's `evaluate_fn` over `data`'s dev slice: token accuracy (primary), perplexity (exp of the
    mean target NLL), and the next-token choice accuracy for classification-style data."""

    @torch.no_grad()
    def evaluate(model: nn.Module, dev_loaders: dict[str, Callable[[], Iterator[dict[str, Tensor]]]],
                 metrics: Any, device: torch.device, precision: str) -> dict[str, float]:
        was_training = model.training
        model.eval()
        nll, correct, count, chosen, choices = 0.0, 0, 0, 0, 0
        choice_ids = torch.tensor(data.choice_ids, dtype=torch.long, device=device) if data.choice_ids else None
        try:
            for batches in dev_loaders.values():
                for batch in batches():
                    batch = to_device(batch, device)
                    with autocast(device, precision):
                        logits = model(**model_inputs(batch)).logits.float()
                    labels = batch["labels"]
                    where = labels != IGNORE
                    rows, gold = logits[where], labels[where]
                    nll += float(F.cross_entropy(rows, gold, reduction="sum"))
                    correct += int((rows.argmax(-1) == gold).sum())
                    count += int(gold.numel())
                    if choice_ids is not None:
                        idx = batch["idx"].cpu().numpy()
                        right = data.dev.choice[idx]
                        keep = np.nonzero(right >= 0)[0]
                        if len(keep):
                            pos = torch.as_tensor(data.dev.first_target[idx][keep] - 1, device=device)
                            scores = logits[torch.as_tensor(keep, device=device), pos][:, choice_ids]
                            chosen += int((scores.argmax(-1).cpu().numpy() == right[keep]).sum())
                            choices += len(keep)
        finally:
            model.train(was_training)
        out = {PRIMARY: correct / max(1, count), "perplexity": math.exp(min(nll / max(1, count), 50.0)),
               "nll": nll / max(1, count)}
        if choice_ids is not None:
            out[CHOICE] = chosen / max(1, choices)
        return out

    return evaluate


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
