"""procedure.on_policy / seq_kd / generation (the data-source axis of causal_lm): the tests that run a job, a
command or processes (its fast tests: tests/unit/procedures/test_on_policy.py)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from helpers import causal_lm_settings as settings
from helpers import on_policy_toy
from tiny_models import tiny_llama

from distill_sweep.data.decoder import from_instructions, special_tokens
from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
from distill_sweep.procedures.on_policy import OnPolicy, mark_positions
from distill_sweep.procedures.sequences import rank_slice
from distill_sweep.training import distributed

toy = pytest.fixture(scope="module", name="toy")(on_policy_toy)


def _rank_worker(rank: int, port: int, cache: str, out: dict) -> None:
    """Rank `rank` of 2 (gloo): its slice of the global batch, marked and sampled as the job does."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    torch.set_num_threads(1)
    world = distributed.setup(torch.device("cpu"))
    try:
        tok = build_toy_tokenizer(Path(cache))
        data = from_instructions(InstructionSettings(num_examples=80, dev_examples=8), tok, max_seq_length=48)
        student = tiny_llama()
        student.resize_token_embeddings(len(tok))
        policy = OnPolicy(settings(on_policy=1.0), 3, data, special_tokens(tok))
        loader = mark_positions(lambda stage, epoch: (rank_slice(b, world) for b in data.train_batches(8, 7)))
        mine = [policy.batch(student, b) for b, _ in zip(loader(None, 1), range(2))]
        gathered: list = [None, None]
        dist.all_gather_object(gathered, [(b["idx"].tolist(), b["input_ids"].tolist()) for b in mine])
        out[rank] = gathered
    finally:
        dist.destroy_process_group()


def test_two_ranks_each_sample_their_slice_the_tokens_one_process_samples(toy, shared_cache: Path):
    tok, data, student = toy
    policy = OnPolicy(settings(on_policy=1.0), 3, data, special_tokens(tok))
    loader = mark_positions(lambda stage, epoch: data.train_batches(8, 7))
    whole = [policy.batch(student, b) for b, _ in zip(loader(None, 1), range(2))]
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_rank_worker, args=(_free_port(), str(shared_cache), out), nprocs=2)
        assert out[0] == out[1]  # every rank holds the same global view
        ranks = out[0]
    for step, batch in enumerate(whole):
        (idx0, ids0), (idx1, ids1) = ranks[0][step], ranks[1][step]
        assert idx0 + idx1 == batch["idx"].tolist()
        fixed = data.batch(data.train, batch["idx"].numpy())
        assert not torch.equal(fixed["input_ids"], batch["input_ids"])  # sampled, not the data's responses
        # rank r's rows are the global batch's rows r*4..r*4+3, sampled to the same tokens (widths differ by padding)
        for r, ids in enumerate((ids0, ids1)):
            for i, row in enumerate(ids):
                n = int(batch["attention_mask"][4 * r + i].sum())
                assert row[:n] == batch["input_ids"][4 * r + i, :n].tolist()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
