"""bench.memory: the resident-set high-water mark of a fresh process sees a step's torch tensors (the unchunked
step's peak is several times one model's float32 logits), and the chunked step's peak stays below it."""

from __future__ import annotations

import pytest

from distill_sweep.bench.memory import logits_mb, measure


def test_the_chunked_step_peaks_below_the_unchunked_one_and_the_measure_sees_the_logits():
    seq, vocab = 1024, 8192  # one model's float32 logits: 32 MB
    assert logits_mb(seq, vocab) == pytest.approx(32.0)
    whole, chunked = (measure(seq, vocab, chunk, 32, "cpu") for chunk in (0, 64))
    assert whole["peak_mb"] > 3 * logits_mb(seq, vocab)  # logits, their copies and gradient: the measure sees them
    assert chunked["peak_mb"] < whole["peak_mb"] / 3
