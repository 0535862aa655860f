"""The record's `teacher_outputs.bytes_per_trained_token` (procedures/causal_lm.py reads it from the opened store) for
every store mode, against a hand count: a hidden store spends H values of its dtype a position, a sparse one (top_k
and its variants, sampled) k values (float16) and k ids (uint16, int32 past 65,536 tokens), every stored position of
every row at the split's width, over the positions the student trains on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from distill_sweep.data.decoder import Sequences
from distill_sweep.teachers.hidden_store import HiddenOutputs
from distill_sweep.teachers.output_store import SAMPLED, TOP_K
from distill_sweep.teachers.sparse_store import TopKOutputs, topk_dtypes

H, K = 8, 4
# two rows of width 6: row 0 has 6 tokens, its first target at 2 (6 - 2 = 4 trained positions); row 1 has 3 tokens,
# targets from 1 (3 - 1 = 2): 6 trained positions out of 2 x 6 = 12 stored
SPLIT = Sequences(ids=np.ones((2, 6), np.int64), lengths=np.array([6, 3]), first_target=np.array([2, 1]),
                  choice=np.array([-1, -1]))
STORED, TRAINED = 12, 6


def _sparse(tmp_path: Path, vocab: int, mode: str) -> TopKOutputs:
    dtypes = topk_dtypes(vocab)
    return TopKOutputs(tmp_path, "k", np.zeros((2, 6, K), dtypes["values"]), np.zeros((2, 6, K), dtypes["indices"]),
                       torch.zeros(2, 2), built=True, mode=mode)


@pytest.mark.parametrize(("name", "per_position"), [
    ("hidden fp32", H * 4),  # H float32 values
    ("hidden bf16", H * 2),  # H bfloat16 values (kept as their 16 bits)
    ("top_k", K * (2 + 2)),  # k float16 log-probabilities + k uint16 ids
    ("top_k, vocabulary past 16 bits", K * (2 + 4)),  # + k int32 ids
    ("sampled", K * (2 + 2)),
])
def test_bytes_per_trained_token_is_the_hand_count_for_every_store_mode(tmp_path: Path, name: str,
                                                                          per_position: int) -> None:
    assert SPLIT.targets() == TRAINED
    store = {"hidden fp32": lambda: HiddenOutputs(tmp_path, "h", np.zeros((2, 6, H), np.float32), torch.float32,
                                                  torch.zeros(2, 2), built=True),
             "hidden bf16": lambda: HiddenOutputs(tmp_path, "h", np.zeros((2, 6, H), np.uint16), torch.bfloat16,
                                                  torch.zeros(2, 2), built=True),
             "top_k": lambda: _sparse(tmp_path, 32_768, TOP_K),
             "top_k, vocabulary past 16 bits": lambda: _sparse(tmp_path, 128_256, TOP_K),
             "sampled": lambda: _sparse(tmp_path, 32_768, SAMPLED)}[name]()
    assert store.bytes_per_token() == per_position == store.describe()["bytes_per_token"]
    assert store.bytes_per_trained_token(SPLIT.targets()) == pytest.approx(STORED * per_position / TRAINED)
