"""A decoder LM's logits left unmade: its last hidden states and its LM head, for losses that make the logits a
chunk of positions at a time (objectives/chunked.py), so that a batch's full-vocabulary logits never exist at once.

`forward_without_head` runs the model through its own forward (so that a wrapper's hooks run, FSDP's root
unshard among them) asking for one position's logits only (`logits_to_keep=1`) and its hidden states, whose last
is after the final norm in these families, and returns Features whose `logits` is None and whose `head` holds what
the logits are made of. The families here (families.py: Llama-shaped, GPT-2) make their logits as `lm_head(last hidden state)` and
nothing more (no logit scale or soft-capping), so `HeadLogits.rows` gives exactly the rows of the model's logits.
The head runs under the autocast the forward ran under (recorded when the backbone ran), as the model's own head
would: the loss's fp32 region must not turn a bf16 run's head into a float32 matmul.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .capture import MODEL_INPUT_KEYS, Features
from .families import family_of_model

__all__ = ["HeadLogits", "forward_without_head"]


@dataclass(frozen=True)
class HeadLogits:
    """The logits `head(hidden)` of every position, made on demand for some rows (`rows`)."""

    hidden: Tensor  # (B, S, D): the last hidden states, after the final norm
    head: nn.Module  # the LM head: (N, D) -> (N, V)
    autocast: bool  # whether the forward ran under autocast (then the head does too, at `dtype`)
    dtype: torch.dtype
    chunk: int  # the losses' rows per chunk (procedure.logit_chunk)
    ids: int | None = None  # the first `ids` columns only (procedure.vocab=shared_prefix), None: all

    def rows(self, hidden_rows: Tensor) -> Tensor:
        """The logits (N, V) of hidden rows (N, D) taken from `hidden` (gradient through the head and the rows)."""
        device = hidden_rows.device.type
        with torch.autocast(device_type=device, dtype=self.dtype, enabled=self.autocast):
            logits = self.head(hidden_rows)
        return logits if self.ids is None else logits[..., :self.ids]

    def first_ids(self, n: int) -> HeadLogits:
        """The same logits cut to ids 0..n-1."""
        return dataclasses.replace(self, ids=int(n) if self.ids is None else min(self.ids, int(n)))

    def full(self) -> Tensor:
        """Every position's logits (B, S, V) at once: what the chunked losses avoid (tests, fallbacks)."""
        return self.rows(self.hidden)


def forward_without_head(model: nn.Module, batch: Mapping[str, Tensor], *, hidden: bool, chunk: int) -> Features:
    """One forward of a decoder LM without its logits (one position's per row): Features with `head` set (its
    losses in chunks of `chunk` rows), all hidden states when `hidden` (embeddings first). Grad mode is the
    caller's."""
    family_of_model(model)  # a TypeError for a model of no known family, before any work
    inputs = {k: batch[k] for k in MODEL_INPUT_KEYS if k in batch and batch[k] is not None}
    out = model(**inputs, output_hidden_states=True, logits_to_keep=1, return_dict=True)
    last = out.hidden_states[-1]
    device = last.device.type
    on = torch.is_autocast_enabled(device)
    head = HeadLogits(last, model.get_output_embeddings(), on, torch.get_autocast_dtype(device), int(chunk))
    return Features(logits=None, hidden_states=tuple(out.hidden_states) if hidden else None, head=head)
