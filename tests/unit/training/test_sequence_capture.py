"""A decoder student's per-sequence dev summaries (training/prediction_capture.SequenceCapture, fed by
teachers/decoder.lm_evaluator's sink): each sequence's sums against that sequence scored alone, their totals
against the dev metrics, the file against a real job's record, and a changed or damaged file caught."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_models import tiny_llama

from distill_sweep.data.decoder import from_instructions
from distill_sweep.data.decoder_settings import InstructionSettings
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer
from distill_sweep.records.predictions import PREDICTIONS, PredictionsError, read_predictions
from distill_sweep.teachers.decoder import lm_evaluator
from distill_sweep.training.prediction_capture import SequenceCapture, sequences_hash


def _data_and_model(cache: Path):
    tok = build_toy_tokenizer(cache)
    data = from_instructions(InstructionSettings(num_examples=30, dev_examples=10), tok, max_seq_length=48)
    torch.manual_seed(0)
    model = tiny_llama()
    model.resize_token_embeddings(len(tok))
    return data, model


@pytest.mark.slow  # a tiny Llama over the dev slice, padded and row by row
def test_each_sequences_sums_equal_it_scored_alone_and_add_up_to_the_metrics(tmp_path: Path, shared_cache: Path):
    data, model = _data_and_model(shared_cache)
    history: list[dict] = []
    dev = data.dev
    capture = SequenceCapture(tmp_path, sequences_hash(dev.ids, dev.lengths, dev.first_target, dev.choice), history)
    got = lm_evaluator(data, capture.keep)(model, {"validation": lambda: data.dev_batches(4)}, None,
                                           torch.device("cpu"), "fp32")
    history.append({"stage": "distill", "epoch": 1, "dev": got})
    assert capture.finish(0, history[0]) == tmp_path / PREDICTIONS
    summary = read_predictions(tmp_path).sequences["validation"]  # type: ignore[union-attr]
    with torch.no_grad():  # row by row, unpadded: position t predicts token t + 1 from first_target on
        for i in range(len(dev)):
            n, first = int(dev.lengths[i]), int(dev.first_target[i])
            ids = torch.as_tensor(dev.ids[i, :n])[None]
            logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
            gold = ids[0, first:n]
            assert summary.targets[i] == n - first
            assert summary.nll[i] == pytest.approx(-float(logp[first - 1:n - 1].gather(1, gold[:, None]).sum()),
                                                   rel=1e-5)
            assert summary.correct[i] == int((logp[first - 1:n - 1].argmax(-1) == gold).sum())
    assert summary.token_accuracy() == pytest.approx(got["token_accuracy"], abs=1e-12)
    assert summary.perplexity() == pytest.approx(got["perplexity"], rel=1e-6)
    assert not (tmp_path / "dev_predictions.partial").exists()


@pytest.mark.slow  # two evaluations of a tiny Llama
def test_a_damaged_or_changed_dev_file_is_caught(tmp_path: Path, shared_cache: Path):
    data, model = _data_and_model(shared_cache)
    dev = data.dev
    files = {}
    for name, ids in (("same", dev.ids), ("changed", np.where(dev.ids == dev.ids[0, 1], dev.ids[0, 2], dev.ids))):
        (tmp_path / name).mkdir()
        history: list[dict] = []
        capture = SequenceCapture(tmp_path / name, sequences_hash(ids, dev.lengths, dev.first_target, dev.choice),
                                  history)
        lm_evaluator(data, capture.keep)(model, {"validation": lambda: data.dev_batches(4)}, None,
                                         torch.device("cpu"), "fp32")
        history.append({"stage": "distill", "epoch": 1, "dev": {}})
        files[name] = capture.finish(0, history[0])
    same, changed = read_predictions(tmp_path / "same"), read_predictions(tmp_path / "changed")
    assert same is not None and changed is not None and not same.same_dev(changed, "validation")
    path = files["same"]
    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["nll/validation"] = arrays["nll/validation"] + 1e-9  # changed after its checksum was taken
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    with pytest.raises(PredictionsError, match="nll/validation does not match its checksum"):
        read_predictions(tmp_path / "same")
