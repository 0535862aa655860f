"""A teacher first run truncated still reports every layer's hidden state from a later full forward (transformers 5
hooks a model's layers at its first forward; `truncated` hooks them all first)."""

from __future__ import annotations

import torch
from transformers import BertConfig, BertForSequenceClassification

from distill_sweep.models.capture import run_with_features


def test_a_full_forward_after_a_truncated_first_one_has_every_hidden_state() -> None:
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=6,
                                                     num_attention_heads=2, intermediate_size=32)).eval()
    batch = {"input_ids": torch.randint(0, 50, (2, 5)), "attention_mask": torch.ones(2, 5, dtype=torch.long)}
    with torch.no_grad():
        short = run_with_features(model, batch, hidden=True, qkv_layers=[], depth=3).hidden_states
        full = run_with_features(model, batch, hidden=True, qkv_layers=[]).hidden_states
    assert short is not None and full is not None
    assert (len(short), len(full)) == (4, 7)
    assert all(torch.equal(a, b) for a, b in zip(short, full[:4], strict=False))
