"""distill_sweep.training.prediction_capture: the stage driver's evaluate function that also keeps each dev
example's prediction, in row order, and the best epoch's as the record's file."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from torch import nn

from distill_sweep.data.batching import make_loader
from distill_sweep.data.fingerprints import content_hash
from distill_sweep.records.predictions import read_predictions
from distill_sweep.training.loop import evaluate
from distill_sweep.training.metrics import compute_metrics
from distill_sweep.training.prediction_capture import PARTIAL, DevPredictionCapture


class MeanOfIds(nn.Module):
    """Logits from the mean token id: deterministic per row, different between rows of different lengths."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(-1.0, 1.0, classes))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_: Any) -> SimpleNamespace:
        mean = (input_ids * attention_mask).sum(1) / attention_mask.sum(1)
        return SimpleNamespace(logits=torch.sin(mean[:, None] * (1 + torch.arange(len(self.scale)))) + self.scale)


def _dev(n: int = 37) -> Dataset:
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 9, n)
    ids = [list(rng.integers(5, 50, k)) for k in lengths]  # rows of different lengths: the loader sorts them
    return Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * k for k in lengths],
                              "labels": list(rng.integers(0, 3, n)), "idx": list(range(n))})


def _row_logits(model: nn.Module, ds: Dataset) -> np.ndarray:
    out = []
    for row in ds:
        ids = torch.tensor([row["input_ids"]])
        out.append(model(ids, torch.ones_like(ids)).logits.detach().numpy()[0])
    return np.stack(out)


def test_predictions_in_row_order_and_the_best_epochs_file(tmp_path: Path) -> None:
    ds = _dev()
    task = SimpleNamespace(is_regression=False, metrics=["accuracy"], name="toy")
    loaders = {"validation": make_loader(ds, 8, shuffle=False, seed=0, pad_token_id=0, by_length=True)}
    history: list[dict[str, Any]] = []
    capture = DevPredictionCapture(tmp_path, {"validation": ds}, history, regression=False)
    model = MeanOfIds(3)
    device = torch.device("cpu")
    metric_fn = lambda logits, labels: compute_metrics(task, logits, labels)  # noqa: E731
    first = capture.evaluate(model, loaders, metric_fn, device, "fp32")
    assert first == evaluate(model, loaders, metric_fn, device, "fp32")  # the driver's metrics, unchanged
    history.append({"stage": "prediction", "epoch": 1, "dev": first})
    with torch.no_grad():
        model.scale.add_(torch.tensor([0.0, 0.0, 3.0]))  # the second epoch predicts class 2 everywhere
    capture.evaluate(model, loaders, metric_fn, device, "fp32")
    history.append({"stage": "prediction", "epoch": 2, "dev": {}})
    assert sorted(p.name for p in (tmp_path / PARTIAL).iterdir()) == ["0.npz", "1.npz"]

    with torch.no_grad():
        model.scale.sub_(torch.tensor([0.0, 0.0, 3.0]))  # back to the first epoch's model
    expected = _row_logits(model, ds).argmax(axis=1)  # row by row, in the split's order
    assert capture.finish(0, history[0]) == tmp_path / "dev_predictions.npz"
    got = read_predictions(tmp_path)
    assert got is not None and (got.stage, got.epoch) == ("prediction", 1)
    assert got.preds["validation"].tolist() == expected.tolist()
    assert got.labels["validation"].tolist() == ds["labels"]
    assert float(np.mean(got.preds["validation"] == got.labels["validation"])) == first["accuracy"]
    assert got.dev_hash == {"validation": content_hash(ds, ["input_ids", "labels", "idx"])}
    assert not (tmp_path / PARTIAL).exists()  # the other epochs' predictions are removed


def test_an_epoch_evaluated_before_predictions_were_kept_leaves_no_file(tmp_path: Path) -> None:
    capture = DevPredictionCapture(tmp_path, {"validation": _dev()}, [], regression=False)
    assert capture.finish(3, {"stage": "prediction", "epoch": 4}) is None
    assert read_predictions(tmp_path) is None
