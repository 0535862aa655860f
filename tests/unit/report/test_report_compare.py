"""Two results directories compared (report/compare.py): pairs by config hash or by job (every seed source), per-task
differences with their t-interval and paired t-test worked by hand, and every record in no pair named with why."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from distill_sweep.records import files
from distill_sweep.report import compare


def _record(root: Path, task: str, objective: str, seed: int, score: float, digest: str | None,
            **extra: Any) -> Path:
    path = root / task / objective / f"seed-{seed}" / (digest or f"nohash-{len(list(root.rglob('*.json')))}")
    files.write_json_atomic(path / "result.json", {
        "status": "completed", "task": task, "objective": objective, "seed": seed, "procedure": "task_specific",
        "primary_metric": "accuracy", "config_hash": digest, "init": {"spec": "skip"},
        "student": {"name": "truncated"}, "teacher": {"name": "tiny"}, "best": {"dev": {"accuracy": score}},
        "final": {"dev": {"accuracy": score}}, "epochs": [{"stage": "prediction", "dev": {"accuracy": score}}],
        **extra})
    return path / "result.json"


def _pair(a: Path, b: Path, match: str) -> compare.Pairing:
    return compare.pair(compare.read_side(a, "A"), compare.read_side(b, "B"), match)


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A: toy seeds 1-3 at 0.80, 0.70, 0.60 and rte seed 1 at 0.5; B: the same toy jobs at 0.80, 0.72, 0.65 (one
    identical), rte missing, and a job of its own."""
    a, b = tmp_path / "a", tmp_path / "b"
    for seed, (sa, sb) in enumerate([(0.80, 0.80), (0.70, 0.72), (0.60, 0.65)], start=1):
        _record(a, "toy", "vanilla_kd", seed, sa, f"{seed:02d}" * 8)
        _record(b, "toy", "vanilla_kd", seed, sb, f"{seed:02d}" * 8)
    _record(a, "rte", "vanilla_kd", 1, 0.5, "ff" * 8)
    _record(b, "toy", "att_mse", 1, 0.9, "ee" * 8)
    return a, b


def test_pairs_by_hash_with_the_differences_worked_by_hand(tmp_path: Path) -> None:
    a, b = _dirs(tmp_path)
    got = _pair(a, b, "hash")
    assert sorted(got.pairs["seed"]) == [1, 2, 3] and list(got.only_a["task"]) == ["rte"]
    assert list(got.only_b["objective"]) == ["att_mse"]
    (row,) = compare.summary(got.pairs)
    # differences 0, 0.02, 0.05: mean 0.07/3; sd = sqrt(((0-m)^2 + (0.02-m)^2 + (0.05-m)^2) / 2)
    d = [0.0, 0.02, 0.05]
    m = sum(d) / 3
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / 2)
    half = 4.302652729911275 * sd / math.sqrt(3)  # t_{0.975, 2}
    t = m / (sd / math.sqrt(3))
    p = 2 * (1 - 0.5 * (1 + t / math.sqrt(2 + t * t)))  # Student t with 2 df: CDF = 1/2 + t / (2 sqrt(2 + t^2))
    assert row[:5] == ["toy", "accuracy", "3", "1", f"{100 * m:+.2f}"]
    assert row[5] == f"[{100 * (m - half):+.2f}, {100 * (m + half):+.2f}]"
    assert row[6] == f"{p:.3g}" and row[7] == "5.00"


def test_pairs_by_job_ignore_the_hash(tmp_path: Path) -> None:
    """Two grids whose configs differ (another hash) still pair by task, objective, init, seed..."""
    a, b = tmp_path / "a", tmp_path / "b"
    _record(a, "toy", "vanilla_kd", 1, 0.7, "aa" * 8)
    _record(b, "toy", "vanilla_kd", 1, 0.75, "bb" * 8)
    by_hash, by_job = _pair(a, b, "hash"), _pair(a, b, "job")
    assert by_hash.pairs.empty and len(by_job.pairs) == 1 and not by_job.unpaired
    assert by_job.pairs["diff"].iloc[0] == pytest.approx(0.05)


def _order_seeds(order: int) -> dict[str, Any]:
    return {"init": 1, "data_order": order, "dropout": 1, "sampling": 1, "own": ["data_order"]}


def test_pairs_by_job_keep_every_seed_source(tmp_path: Path) -> None:
    """A `seed x seeds.data_order` grid run twice: --match job kept one run per master seed and dropped the others
    without a word, pairing runs of different data orders (a -10.00-point difference where the true partner is
    identical). Now each run pairs with its own data order: three identical pairs, nothing unpaired."""
    a, b = tmp_path / "a", tmp_path / "b"
    for order, score in ((1, 0.70), (2, 0.60), (3, 0.50)):
        _record(a, "toy", "vanilla_kd", 1, score, f"a{order}" * 8, seeds=_order_seeds(order))
        _record(b, "toy", "vanilla_kd", 1, score, f"b{order}" * 8, seeds=_order_seeds(order))
    got = _pair(a, b, "job")
    assert len(got.pairs) == 3 and list(got.pairs["diff"]) == [0.0, 0.0, 0.0] and not got.unpaired
    # a record from before the seeds block is the master seed's run of every source: it pairs with data order 1
    # (the master seed), not with 2 or 3
    c = tmp_path / "c"
    _record(c, "toy", "vanilla_kd", 1, 0.70, "cc" * 8)
    old = _pair(c, a, "job")
    assert len(old.pairs) == 1 and old.pairs["path_b"].iloc[0].endswith("a1" * 5)
    assert sorted(e["label"] for e in old.unpaired) == [
        "toy/vanilla_kd init-skip seed 1 (seeds.data_order=2)", "toy/vanilla_kd init-skip seed 1 (seeds.data_order=3)"]


def test_records_without_a_hash_never_pair_by_hash(tmp_path: Path) -> None:
    """Hashless records paired with each other ("1 pair, identical") and the rest vanished unlisted."""
    a, b = tmp_path / "a", tmp_path / "b"
    for seed in (1, 2):
        _record(a, "toy", "vanilla_kd", seed, 0.7, None)
        _record(b, "toy", "vanilla_kd", seed, 0.6 + seed / 10, None)
    by_hash = _pair(a, b, "hash")
    assert by_hash.pairs.empty and len(by_hash.unpaired) == 4
    assert {e["why"] for e in by_hash.unpaired} == {"no config_hash to pair by (--match job pairs them by job)"}
    by_job = _pair(a, b, "job")
    assert sorted(by_job.pairs["diff"].round(6)) == [0.0, 0.1]


def test_several_records_of_one_job_are_not_paired_by_guess(tmp_path: Path) -> None:
    """Two records of one job in A (a grid over the learning rate, say): which one pairs was the first by path."""
    a, b = tmp_path / "a", tmp_path / "b"
    _record(a, "toy", "vanilla_kd", 1, 0.7, "a1" * 8)
    _record(a, "toy", "vanilla_kd", 1, 0.5, "a2" * 8)
    _record(b, "toy", "vanilla_kd", 1, 0.7, "b1" * 8)
    got = _pair(a, b, "job")
    assert got.pairs.empty
    assert sorted((e["side"], e["detail"]) for e in got.unpaired) == [("A", "2 of this job in A"),
                                                                      ("A", "2 of this job in A"), ("B", "")]


def test_the_command_writes_the_table_and_names_every_unpaired_record(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _dirs(tmp_path)
    torn = a / "torn" / "result.json"
    torn.parent.mkdir(parents=True)
    torn.write_text('{"status": "compl')
    word = _record(a, "toy", "att_kl", 1, 0.7, "dd" * 8)
    word.write_text(json.dumps({**json.loads(word.read_text()), "seed": "one"}))
    huge = _record(a, "toy", "att_kl", 2, 0.7, "cc" * 8, seeds={"init": 10**30, "own": ["init"]})
    _record(b, "toy", "hid_seq", 1, 0.7, "ab" * 8, status="failed", best=None)
    _record(b, "toy", "hid_seq", 2, 0.7, "ac" * 8, best=None)  # completed, no scores
    assert compare.main([str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "compare.md").read_text()
    assert text == capsys.readouterr().out
    assert "| toy    | accuracy | 3       | 1           | +2.33" in text
    assert "1 job(s) only in A: rte/vanilla_kd init-skip seed 1 (ffffffffff)" in text
    assert "1 job(s) only in B: toy/att_mse init-skip seed 1 (eeeeeeeeee)" in text
    assert f"3 record(s) of A in no pair, cannot be read: {torn.parent} [unreadable (JSONDecodeError" in text
    assert f"{huge.parent} [seeds.init 1000000000000000000000000000000 is not a seed" in text
    assert f"{torn.parent} [unreadable (JSONDecodeError" in text and f"{word.parent} [seed 'one' is not an" in text
    assert "1 record(s) of B in no pair, not completed: toy/hid_seq init-skip seed 1 (abababab" in text
    assert ("1 record(s) of B in no pair, status completed but incomplete (the sweeper runs them again): "
            "toy/hid_seq init-skip seed 2 (acacacacac) [no best.dev]") in text
    assert len(pd.read_csv(tmp_path / "out" / "compare.csv")) == 3
    unpaired = pd.read_csv(tmp_path / "out" / "compare_unpaired.csv")
    assert len(unpaired) == 7 and set(unpaired["side"]) == {"A", "B"}
    assert compare.main([str(a), str(tmp_path / "nowhere")]) == 2


def test_out_naming_a_file_is_one_line_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was a FileExistsError traceback, after both stores had been read."""
    a, b = _dirs(tmp_path)
    (tmp_path / "taken").write_text("mine")
    assert compare.main([str(a), str(b), "--out", str(tmp_path / "taken")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and "is a file, not a directory" in err
    assert (tmp_path / "taken").read_text() == "mine" and not list(tmp_path.glob("compare*"))
