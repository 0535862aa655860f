"""The teacher-output store's sparse modes for decoder LMs (teachers/output_store.py): compact entries (float16
log-probabilities, 16-bit ids), the top_k and sampled modes as separate stores, the sampler drawing from the
teacher's distribution, and a sampled store checksummed, row-checked and rebuilt as the others."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from test_decoder_teacher import CPU, instructions, teacher

from distill_sweep.teachers.output_store import StoreMismatchError
from distill_sweep.teachers.sparse_store import (
    bytes_per_token,
    open_or_build_topk,
    sparse_entries,
    topk_dtypes,
)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """The machine's rule: one intra-op thread."""


def test_entries_are_stored_in_half_the_bytes_of_float32_values_and_int32_ids(tmp_path: Path) -> None:
    data, tok = instructions(tmp_path)
    model, _ = teacher(tmp_path, data, tok)
    k = 5
    store = open_or_build_topk(model, data, k, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    meta = json.loads((store.path / "meta.json").read_text())
    assert meta["arrays"]["values"]["dtype"] == "float16" and meta["arrays"]["indices"]["dtype"] == "uint16"
    n, width = data.train.ids.shape
    stored = np.load(store.path / "values.npy").nbytes + np.load(store.path / "indices.npy").nbytes
    assert stored == n * width * k * (2 + 2)  # the files' arrays: 4 bytes an entry
    assert store.describe()["bytes_per_token"] == 4 * k <= (4 + 4) * k / 2  # float32 + int32 was 8k
    # a vocabulary past 16-bit ids keeps int32 ids: 6 bytes an entry
    assert topk_dtypes(65_536)["indices"] == "uint16" and topk_dtypes(65_537)["indices"] == "int32"
    assert bytes_per_token(topk_dtypes(151_936), 32) == 32 * 6
    # what is gathered is the teacher's top-k log-probabilities, to float16's precision
    batch = data.batch(data.train, np.array([2, 11]))
    values, indices = store.gather(batch)
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits, -1)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(values[real], logp.gather(-1, indices)[real], rtol=1e-3, atol=1e-3)
    assert torch.equal(indices[real], logp.topk(k, -1).indices[real])


def test_the_sampler_draws_from_the_teachers_distribution() -> None:
    """4,000 positions of one distribution x 4 draws: each token's share of the 16,000 draws within 5 standard
    errors of its probability (binomial: sqrt(p (1 - p) / 16,000) <= 0.004), and the stored values are the
    teacher's log-probabilities of the drawn ids."""
    p = torch.tensor([0.5, 0.3, 0.15, 0.05, 0.0])
    logits = torch.log(p.clamp(min=1e-30)).expand(4000, 5)
    values, ids = sparse_entries(logits, 4, "sampled", torch.Generator().manual_seed(1))
    share = torch.bincount(ids.flatten(), minlength=5).double() / ids.numel()
    bound = 5 * torch.sqrt(p.double() * (1 - p.double()) / ids.numel())
    assert (share - p.double()).abs().le(bound + 1e-12).all(), share
    torch.testing.assert_close(values, torch.log(p.clamp(min=1e-30))[ids])


def test_the_sampled_estimate_from_real_draws_approaches_full_kds_gradient() -> None:
    """The student's gradient averaged over 2,000 positions of 8 draws each is p_S - (draw shares), which is within
    0.02 of full forward KL's p_S - p_T; top_k's (k = 2) is 0.17 away on tokens 2 and 3."""
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    from distill_sweep.objectives.causal import causal_kd

    values, ids = sparse_entries(torch.log(p).expand(1, 2000, 4), 8, "sampled", torch.Generator().manual_seed(3))
    z = torch.tensor([0.2, -0.1, 0.4, 0.0])
    s = z.expand(1, 2000, 4).clone().requires_grad_(True)
    causal_kd(s, (values, ids), torch.zeros(1, 2000, dtype=torch.long), kind="fkl", sparse="sampled").backward()
    mean_grad = s.grad[0].sum(0)  # the loss is a mean over positions: summed, one position's expected gradient
    full = torch.softmax(z, -1) - p
    assert (mean_grad - full).abs().max() < 0.02
    assert math.isclose(float(full[2]), 0.173, abs_tol=1e-3)


def test_a_sampled_store_is_its_own_seeded_store_checked_as_the_others(tmp_path: Path) -> None:
    data, tok = instructions(tmp_path)
    model, _ = teacher(tmp_path, data, tok)
    top = open_or_build_topk(model, data, 4, cache_dir=tmp_path, group="g", precision="fp32", device=CPU)
    sampled = open_or_build_topk(model, data, 4, cache_dir=tmp_path, group="g", precision="fp32", device=CPU,
                                 mode="sampled")
    assert sampled.built and sampled.path != top.path and sampled.path.name.startswith("g-sampled4-")
    assert json.loads((sampled.path / "meta.json").read_text())["mode"] == "sampled"
    batch = data.batch(data.train, np.array([0, 5, 7]))
    values, ids = sampled.gather(batch)
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits, -1)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(values[real], logp.gather(-1, ids)[real], rtol=1e-3, atol=1e-3)
    # draws repeat tokens (with replacement): not the top-k's distinct ids
    assert any(len(set(row.tolist())) < 4 for row in ids[real])
    # another cache: built again, the same draws (the seed is in the key)
    again = open_or_build_topk(model, data, 4, cache_dir=tmp_path / "other", group="g", precision="fp32",
                               device=CPU, mode="sampled")
    assert again.built and np.array_equal(np.array(again.indices), np.array(sampled.indices))
    # damaged ids: set aside and rebuilt
    file = sampled.path / "indices.npy"
    raw = bytearray(file.read_bytes())
    raw[-8:] = b"\xff" * 8  # (the last row ends in padding, stored as zeros)
    file.write_bytes(bytes(raw))
    rebuilt = open_or_build_topk(model, data, 4, cache_dir=tmp_path, group="g", precision="fp32", device=CPU,
                                 mode="sampled")
    assert rebuilt.built and np.array_equal(np.array(rebuilt.indices), np.array(again.indices))
    batch["idx"] = torch.tensor([5, 0, 7])
    with pytest.raises(StoreMismatchError, match="not the rows it was built from"):
        rebuilt.gather(batch)


def test_bytes_per_trained_token_is_the_store_over_the_positions_trained_on(tmp_path) -> None:
    """Two rows of width 5, k = 4, float16 + uint16: 2 x 5 x 4 x 4 = 160 bytes stored. Row 0 has 5 tokens and
    its first target at position 3 (a prompt of 2), row 1 has 4 tokens and targets from 1: (5 - 3) + (4 - 1) = 5
    trained positions, so 32 bytes per trained token against bytes_per_token's 16 per stored position."""
    import torch

    from distill_sweep.data.corpus import IGNORE
    from distill_sweep.data.decoder import CausalData, Sequences
    from distill_sweep.teachers.sparse_store import TopKOutputs

    split = Sequences(ids=np.arange(10).reshape(2, 5) + 5, lengths=np.array([5, 4]), first_target=np.array([3, 1]),
                      choice=np.array([-1, -1]))
    data = CausalData("d", split, split, 0, [], {})
    labels = data.batch(split, np.arange(2))["labels"]
    assert split.targets() == int((labels != IGNORE).sum()) == 5  # the same positions the batches train on
    store = TopKOutputs(tmp_path, "k", np.zeros((2, 5, 4), np.float16), np.zeros((2, 5, 4), np.uint16),
                        torch.zeros(2, 2), built=True)
    assert store.bytes_per_token() == 16
    assert store.bytes_per_trained_token(split.targets()) == 32.0
