"""A corpus of damaged stores, each read by the three read-only tools: the report, `status` and `report.compare`.

Every store is six good records and one damaged one. Each tool leaves the damaged record out (or counts it
damaged) and names it with why, and reads the rest as if it were absent. Before, these were an OverflowError or a
ValueError traceback of the report, a record dropped without a word, or counted completed by `status`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import write_record

from distill_sweep.report import compare
from distill_sweep.report.cli import main as report
from distill_sweep.status import status_text

HUGE = 10**30


def _epoch_word(d: dict[str, Any]) -> None:
    d["epochs"][0]["epoch"] = "first"


# what is damaged -> (the change, what the note says)
CORPUS: dict[str, tuple[Any, str]] = {
    "a seed source past int64": ({"seeds": {"init": HUGE, "own": ["init"]}}, f"seeds.init {HUGE} is not a seed"),
    "the master seed past int64": ({"seed": HUGE}, f"seed {HUGE} is not a seed"),
    "a seed source as a word": ({"seeds": {"data_order": "two", "own": ["data_order"]}},
                                "seeds.data_order 'two' is not a seed"),
    "the seed as a word": ({"seed": "one"}, "seed 'one' is not an integer"),
    "the wall time as a word": ({"wall_time_s": "slow"}, "wall_time_s 'slow' is not a number"),
    "an epoch number as a word": (_epoch_word, "epochs[0].epoch 'first' is not an integer"),
    "a tuning block as a word": ({"tune_trial": "x"}, "tune_trial 'x' is not an object"),
    "torn": ('{"status": "completed", "task": "to', "unreadable (JSONDecodeError"),
}


def _store(root: Path, damage: str) -> Path:
    """att_kl and att_mse x seeds 0-2 on toy, and a seventh att_kl run (seed 3) damaged by `damage`."""
    for seed in range(3):
        write_record(root, objective="att_kl", seed=seed, score=0.70 + 0.01 * seed)
        write_record(root, objective="att_mse", seed=seed, score=0.60 + 0.01 * seed)
    victim = write_record(root, objective="att_kl", seed=3, score=0.99)
    change, _ = CORPUS[damage]
    if isinstance(change, str):
        victim.write_text(change)
    else:
        d = json.loads(victim.read_text())
        change(d) if callable(change) else d.update(change)
        victim.write_text(json.dumps(d))
    return victim


@pytest.mark.parametrize("damage", list(CORPUS))
def test_each_reader_leaves_the_damaged_record_out_and_names_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str) -> None:
    store = tmp_path / "store"
    victim = _store(store, damage)
    why = CORPUS[damage][1]

    assert report([str(store), "table=1", "paper=false", "format=text", f"out={tmp_path / 'tables'}"]) == 0
    out = capsys.readouterr()
    named = [line for line in (out.out + out.err).splitlines() if str(victim) in line]
    assert named and all(why in line for line in named)
    runs = pd.read_csv(tmp_path / "tables" / "runs_table1.csv")
    assert len(runs) == 6 and str(victim) not in set(runs["path"])  # the six good runs, and they alone

    lines = status_text(store).splitlines()
    assert lines[0] == f"{store}: 7 jobs: 6 completed, 1 damaged" and lines[2] == f"  {victim}: " + lines[2].split(
        ": ", 1)[1] and why in lines[2]

    assert compare.main([str(store), str(store), "--out", str(tmp_path / "cmp")]) == 0
    capsys.readouterr()
    pairs = pd.read_csv(tmp_path / "cmp" / "compare.csv")
    unpaired = pd.read_csv(tmp_path / "cmp" / "compare_unpaired.csv")
    assert len(pairs) == 6 and list(unpaired["side"]) == ["A", "B"]
    assert set(unpaired["path"]) == {str(victim.parent)} and all(why in d for d in unpaired["detail"])


def test_the_reports_job_lists_name_every_seed_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two failed jobs that differ only in seeds.data_order were listed as one job twice."""
    for seed in range(2):
        write_record(tmp_path, objective="att_kl", seed=seed)
    for order in (1, 2):
        path = write_record(tmp_path / f"order{order}", objective="att_mse", seed=1, status="failed", error="E")
        d = json.loads(path.read_text())
        d["seeds"] = {"init": 1, "data_order": order, "dropout": 1, "sampling": 1, "own": ["data_order"]}
        path.write_text(json.dumps(d))
    assert report([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    assert "toy / att_mse / init 1 / seed 1: E" in out
    assert "toy / att_mse / init 1 / seed 1 (seeds.data_order=2): E" in out
