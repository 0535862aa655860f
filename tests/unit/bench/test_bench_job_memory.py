"""bench/job_memory.py's points measure what its table says, checked without running a job: the composed job reads
every sequence at the point's length over a vocabulary of the point's size, with the chunk and teacher mode named."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from distill_sweep.bench import job_memory
from distill_sweep.data.decoder import from_corpus
from distill_sweep.job.identity import identify


def test_a_points_job_reads_sequences_of_its_length_over_its_vocabulary(tmp_path: Path) -> None:
    seq, vocab = 40, 300
    job = identify(job_memory.job_config(tmp_path, seq, vocab, 8, "hidden"))
    settings = job.procedure_settings
    assert (settings.logit_chunk, settings.teacher_logits, settings.batch_size) == (8, "hidden", 1)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tokenizer")
    assert len(tokenizer) == vocab
    data = from_corpus(settings.corpus, tokenizer, tmp_path / "cache")
    assert (len(data.train), len(data.dev)) == (job_memory.TRAIN_SEQUENCES, job_memory.DEV_SEQUENCES)
    assert set(data.train.lengths) == set(data.dev.lengths) == {seq}  # [BOS], seq - 2 words, [EOS]
    assert data.train.targets() == job_memory.TRAIN_SEQUENCES * (seq - 1)  # every position but the last
    assert int(data.train.ids.max()) < vocab and (data.train.ids == tokenizer.unk_token_id).sum() == 0


def test_bad_arguments_are_refused_before_any_work() -> None:
    with pytest.raises(SystemExit, match="--seqs must be >= 4"):
        job_memory.main(["--seqs", "2"])
