"""distill_sweep.records.predictions: the dev predictions beside a record, written, read and checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distill_sweep.records import predictions


def _write(tmp_path: Path, dev_hash: str = "h1") -> Path:
    return predictions.write_predictions(
        tmp_path, {"validation": np.array([1, 0, 2], dtype=np.int16)}, {"validation": np.array([1, 1, 2])},
        {"validation": dev_hash}, "prediction", 3)


def test_round_trip(tmp_path: Path) -> None:
    path = _write(tmp_path)
    assert path == tmp_path / predictions.PREDICTIONS and not list(tmp_path.glob(".*tmp"))  # renamed into place
    got = predictions.read_predictions(tmp_path)
    assert got is not None and (got.stage, got.epoch) == ("prediction", 3)
    assert got.preds["validation"].tolist() == [1, 0, 2] and got.labels["validation"].tolist() == [1, 1, 2]
    assert got.dev_hash == {"validation": "h1"}
    with np.load(path, allow_pickle=False) as data:  # plain arrays, no pickle
        assert set(data.files) == {"meta", "pred/validation", "label/validation"}


def test_no_file_is_none_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    assert predictions.read_predictions(tmp_path) is None
    path = _write(tmp_path)
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["pred/validation"] = np.array([1, 1, 2], dtype=np.int16)  # changed after its checksum was taken
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    with pytest.raises(predictions.PredictionsError, match="pred/validation does not match its checksum"):
        predictions.read_predictions(tmp_path)
    path.write_bytes(b"not an npz")
    with pytest.raises(predictions.PredictionsError, match="unreadable"):
        predictions.read_predictions(tmp_path)


def test_a_changed_dev_set_is_told_apart(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _write(tmp_path / "a", "h1")
    _write(tmp_path / "b", "h2")
    a, b = predictions.read_predictions(tmp_path / "a"), predictions.read_predictions(tmp_path / "b")
    assert a is not None and b is not None
    assert a.same_dev(a, "validation") and not a.same_dev(b, "validation") and not a.same_dev(a, "test")
