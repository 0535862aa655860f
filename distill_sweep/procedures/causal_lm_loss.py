"""procedure=causal_lm's loss (its one `distill` stage): the objective's terms, the teacher's side live or read from
the teacher-output store's sparse entries or hidden states (its head applied here), plus ce_weight x the next-token cross-entropy; the teacher reads its own
tokens where the student has its own tokenizer, and on-policy steps train on the student's samples. Built by
procedures/causal_lm.py's `run`; the benchmarks time it as the job's own step (bench/decoder_step.py,
bench/memory.py, bench/gpu_decoder.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

import torch
from torch import Tensor, nn

from distill_sweep.data.decoder import CausalData
from distill_sweep.models.capture import Features
from distill_sweep.models.lm_head import HeadLogits
from distill_sweep.objectives.causal import SPARSE_KEYS, TOP_K
from distill_sweep.objectives.chunked import lm_features, mean_over_targets
from distill_sweep.objectives.uld import TEACHER_LABELS
from distill_sweep.teachers.decoder import next_token_ce
from distill_sweep.training import fsdp
from distill_sweep.training.loop import LossFn

from .causal_lm_settings import HIDDEN
from .on_policy import OnPolicy


def distill_loss(student: nn.Module, teacher: nn.Module, terms: Any | None, ce_weight: float,
                 stored: Any | None, estimator: str = TOP_K, teacher_data: CausalData | None = None,
                 policy: OnPolicy | None = None, chunk: int = 0) -> LossFn:
    """The objective's terms (teacher features live, or its sparse entries from the store, read by `estimator`:
    procedure.teacher_logits; `hidden`: its last hidden states from the store, its head applied here) + ce_weight x CE. `teacher_data`: the same training pairs in the teacher's tokens,
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
            if stored is not None and estimator == HIDDEN:  # its logits made from the stored states by its head
                t = Features(logits=None, hidden_states=None, head=stored_head(teacher, stored.gather(batch), chunk))
            elif stored is not None:
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


def stored_head(teacher: nn.Module, hidden: Tensor, chunk: int) -> HeadLogits:
    """The teacher's logits left unmade from its stored last hidden states (procedure.teacher_logits=hidden): its
    own LM head (tied or not, bias if any: the module the model's forward applies) under the autocast the loss runs
    in, as its forward would have applied it (models/lm_head.py); `chunk` rows at a time when the student's are."""
    device = hidden.device.type
    return HeadLogits(hidden, teacher.get_output_embeddings(), torch.is_autocast_enabled(device),
                      torch.get_autocast_dtype(device), int(chunk))
