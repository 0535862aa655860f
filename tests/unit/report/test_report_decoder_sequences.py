"""report.decoder.comparisons: the decoder table's pairs over seeds x dev sequences, from the per-sequence
summaries beside the records; records without them keep a one-line note, damaged or changed-dev ones are named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from distill_sweep.analysis import example_stats, few_seeds
from distill_sweep.records.predictions import SequenceSummary, write_predictions
from distill_sweep.report import decoder


def _run(root: Path, objective: str, seed: int, summary: np.ndarray | None, dev: str = "d1") -> dict:
    directory = root / f"{objective}-{seed}"
    directory.mkdir()
    if summary is not None:
        write_predictions(directory, {}, {}, {"validation": dev}, "distill", 2,
                          sequences={"validation": SequenceSummary(summary[:, 0], summary[:, 1].astype(np.int64),
                                                                   summary[:, 2].astype(np.int64))})
    return {"setting": "s", "objective": objective, "init": "prune", "seed": seed,
            "path": str(directory / "result.json")}


def _summaries(rng: np.random.Generator, n: int) -> np.ndarray:
    targets = rng.integers(1, 9, size=n)
    return np.column_stack([targets * rng.uniform(1.0, 2.0, size=n), targets, rng.binomial(targets, 0.4)]
                           ).astype(np.float64)


def _ppl(s: np.ndarray) -> float:
    return float(np.exp(s[:, 0].sum() / s[:, 1].sum()))


def test_pairs_over_seeds_and_sequences_and_the_note_without_summaries(tmp_path: Path):
    rng = np.random.default_rng(3)
    fkl = {s: _summaries(rng, 20) for s in (1, 2, 3)}
    rkl = {s: _summaries(rng, 20) for s in (1, 2, 3)}
    runs = [_run(tmp_path, "fkl", s, fkl[s]) for s in fkl] + [_run(tmp_path, "rkl", s, rkl[s]) for s in rkl]
    runs += [_run(tmp_path, "gjsd", s, None) for s in (1, 2)]  # written before records kept summaries
    rows, two_runs, notes = decoder.comparisons(pd.DataFrame(runs))
    (row,) = rows
    assert two_runs == []  # 3 seeds: no test of two runs beside the methods' comparison
    assert row[:4] == ["rkl vs fkl", "prune", "3", "20"]
    per_seed = [_ppl(rkl[s]) - _ppl(fkl[s]) for s in (1, 2, 3)]
    assert float(row[4]) == pytest.approx(np.mean(per_seed), abs=5e-4)
    mb = example_stats.multi_bootstrap_sequences(np.stack([rkl[s] for s in (1, 2, 3)]),
                                                 np.stack([fkl[s] for s in (1, 2, 3)]), "perplexity")
    # at few seeds: the hull of the multi-bootstrap's interval and the t-interval of the per-seed differences
    half = float(stats.t.ppf(0.975, 2)) * np.std(per_seed, ddof=1) / np.sqrt(3)
    low, high = min(mb["ci_low"], np.mean(per_seed) - half), max(mb["ci_high"], np.mean(per_seed) + half)
    assert row[5] == f"[{low:+.3f}, {high:+.3f}]"
    assert row[6] == decoder._p(few_seeds.guarded(mb, per_seed)["p"]) == row[7]  # one row: Holm leaves p as is
    assert any("1 pair(s) without per-sequence dev summaries" in n for n in notes)


def test_a_changed_dev_set_or_a_damaged_file_is_left_out_and_named(tmp_path: Path):
    rng = np.random.default_rng(4)
    runs = [_run(tmp_path, "fkl", 1, _summaries(rng, 8)), _run(tmp_path, "rkl", 1, _summaries(rng, 8)),
            _run(tmp_path, "fkl", 2, _summaries(rng, 8)), _run(tmp_path, "rkl", 2, _summaries(rng, 8), dev="d2"),
            _run(tmp_path, "fkl", 3, _summaries(rng, 8)), _run(tmp_path, "rkl", 3, _summaries(rng, 8))]
    (tmp_path / "rkl-3" / "dev_predictions.npz").write_bytes(b"damaged")
    rows, two_runs, notes = decoder.comparisons(pd.DataFrame(runs))
    # seed 2 on other dev sequences, seed 3 unreadable: one seed left, a test of its two runs, apart
    assert rows == []
    (row,) = two_runs
    assert row[:4] == ["rkl vs fkl", "prune", "1", "8"]
    assert any("1 seed pair(s) left out: scored on other dev sequences" in n for n in notes)
    assert any("summaries left out" in n and "rkl-3" in n and "unreadable" in n for n in notes)


def test_summaries_that_do_not_give_their_records_perplexity_are_left_out(tmp_path: Path):
    """Per-sequence summaries were never checked against their record: a run whose file gives another perplexity
    than its record's final dev value is now left out and named."""
    from distill_sweep.records.record import Record, write_record

    rng = np.random.default_rng(5)
    runs, sums = [], {}
    for objective in ("fkl", "rkl"):
        for seed in (1, 2, 3):
            sums[(objective, seed)] = _summaries(rng, 8)
            runs.append(_run(tmp_path, objective, seed, sums[(objective, seed)]))
    for run in runs:
        s = sums[(run["objective"], run["seed"])]
        stated = _ppl(s) * (1.5 if (run["objective"], run["seed"]) == ("rkl", 2) else 1.0)  # rkl 2: not its file's
        write_record(Path(run["path"]), Record(task="causal_toy", objective=run["objective"], seed=run["seed"],
                                               status="completed", procedure="causal_lm",
                                               final={"dev": {"perplexity": stated}}))
    rows, _, notes = decoder.comparisons(pd.DataFrame(runs))
    (row,) = rows
    assert row[2] == "2 (of 3; seed 2 left out)"  # named, not only counted
    (line,) = [n for n in notes if "rkl-2" in n]
    assert "left out" in line and "perplexity" in line and "where its record says" in line
