"""distill_sweep.records.predictions: the dev predictions beside a record, written, read and checked."""

from __future__ import annotations

import json
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


def _rewrite(path: Path, **changes: object) -> None:
    """The file at `path` rewritten with some members replaced (np.savez, as write_predictions lays it out)."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays.update(changes)  # type: ignore[arg-type]
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


@pytest.mark.parametrize("case", ["truncated", "meta_list", "meta_no_dev_hash", "unequal", "nan_nll"])
def test_an_untrustworthy_file_is_one_predictions_error(tmp_path: Path, case: str) -> None:
    """A partial copy (BadZipFile), an odd meta (TypeError/KeyError) or unequal arrays (ValueError downstream)
    were tracebacks or silently accepted; each is now one PredictionsError naming the file."""
    if case == "nan_nll":
        summary = predictions.SequenceSummary(np.array([1.0, np.nan]), np.array([2, 3]), np.array([1, 1]))
        path = predictions.write_predictions(tmp_path, {}, {}, {"validation": "h"}, "distill", 1,
                                             sequences={"validation": summary})
    elif case == "unequal":
        path = predictions.write_predictions(tmp_path, {"validation": np.array([1, 0, 2], dtype=np.int16)},
                                             {"validation": np.array([1, 1])}, {"validation": "h"}, "prediction", 1)
    else:
        path = _write(tmp_path)
    if case == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif case == "meta_list":
        _rewrite(path, meta=np.array(json.dumps([1, 2])))
    elif case == "meta_no_dev_hash":
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
        del meta["dev_hash"]
        _rewrite(path, meta=np.array(json.dumps(meta)))
    with pytest.raises(predictions.PredictionsError) as info:
        predictions.read_predictions(tmp_path)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)
