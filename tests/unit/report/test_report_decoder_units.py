"""The decoder's comparisons over dev sequences, lm-eval's over documents and lm-eval's spread table on a crossed
grid (3 master seeds x 2 data orders per objective): a master seed's runs are averaged first, the unit of
replication (analysis/replication.py), never the last run read kept. Expected numbers worked by hand here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from distill_sweep.analysis import example_stats
from distill_sweep.records.lm_eval_results import TaskSamples, write_samples
from distill_sweep.records.predictions import SequenceSummary, write_predictions
from distill_sweep.report import decoder, decoder_lm_eval

SEEDS, ORDERS = (1, 2, 3), (1, 2)


def _dir(root: Path, objective: str, seed: int, order: int) -> Path:
    out = root / f"{objective}-{seed}-{order}"
    out.mkdir()
    return out


def _row(objective: str, seed: int, out: Path) -> dict:
    return {"setting": "s", "objective": objective, "init": "prune", "data": "fixed", "seed": seed,
            "path": str(out / "result.json")}


def test_lm_eval_comparisons_average_a_master_seeds_runs(tmp_path: Path) -> None:
    """rkl's data order 2 scores every document right, order 1 none: the master seed's mean is 0.5 per document;
    fkl scores 0.5 by alternating documents. The mean difference is 0 (the last run read alone: +0.5), over 3
    master seeds, not 6 runs."""
    docs = 40
    rows = []
    for seed in SEEDS:
        for order in ORDERS:
            for objective, acc in (("fkl", (np.arange(docs) % 2).astype(float)),
                                   ("rkl", np.full(docs, float(order == 2)))):
                out = _dir(tmp_path, objective, seed, order)
                (out / "result.json").write_text(json.dumps({"lm_eval": {"scores": {"t": {"acc": acc.mean()}}}}))
                write_samples(out, {"t": TaskSamples("h", np.arange(docs), {"acc": acc})})
                rows.append(_row(objective, seed, out))
    got, _ = decoder_lm_eval.comparisons(pd.DataFrame(rows))
    ((label, _, metric, seeds, n_docs, diff, _, p, _),) = got
    assert (label, metric, seeds, n_docs) == ("rkl vs fkl", "t: acc", "3", str(docs))
    assert diff == "+0.000"  # (0 + 1) / 2 - 0.5 per document; the last run alone reads +0.500
    assert float(p) > 0.5


def _summaries(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    targets = rng.integers(1, 9, size=n)
    return np.column_stack([targets * scale * rng.uniform(0.9, 1.1, size=n), targets,
                            rng.binomial(targets, 0.4)]).astype(np.float64)


def _ppl(s: np.ndarray) -> float:
    return float(np.exp(s[:, 0].sum() / s[:, 1].sum()))


def test_decoder_comparisons_average_a_master_seeds_runs(tmp_path: Path) -> None:
    """rkl's data order 2 has a far higher NLL per target than its order 1; a unit's perplexity is the mean of its
    two runs' (as the table's cells, decoder.seed_means), the pair's difference the mean over 3 master seeds."""
    rng = np.random.default_rng(5)
    summaries = {(o, s, d): _summaries(rng, 12, 1.0 if (o, d) != ("rkl", 2) else 2.0)
                 for o in ("fkl", "rkl") for s in SEEDS for d in ORDERS}
    rows = []
    for (objective, seed, order), summary in summaries.items():
        out = _dir(tmp_path, objective, seed, order)
        write_predictions(out, {}, {}, {"validation": "d1"}, "distill", 2,
                          sequences={"validation": SequenceSummary(summary[:, 0], summary[:, 1].astype(np.int64),
                                                                   summary[:, 2].astype(np.int64))})
        rows.append(_row(objective, seed, out))
    found, two_runs, _ = decoder.comparisons(pd.DataFrame(rows))
    (row,) = found
    assert two_runs == [] and row[:4] == ["rkl vs fkl", "prune", "3", "12"]

    def unit(objective: str, seed: int) -> float:
        return float(np.mean([_ppl(summaries[(objective, seed, d)]) for d in ORDERS]))

    by_hand = np.mean([unit("rkl", s) - unit("fkl", s) for s in SEEDS])
    last = np.mean([_ppl(summaries[("rkl", s, 2)]) - _ppl(summaries[("fkl", s, 2)]) for s in SEEDS])
    assert float(row[4]) == pytest.approx(by_hand, abs=5e-4)
    assert abs(last - by_hand) > 0.5  # what reading the last run alone gave: far from the units' mean


def test_sequence_bootstrap_takes_a_units_runs() -> None:
    """example_stats.multi_bootstrap_sequences on per-unit runs [R, N, 3]: the observed difference is the mean over
    units of (the mean of A's runs' perplexities - B's); one run per unit equals the [S, N, 3] form."""
    rng = np.random.default_rng(8)
    a = [np.stack([_summaries(rng, 10, 1.0 + 0.2 * r) for r in range(2)]) for _ in range(3)]
    b = [np.stack([_summaries(rng, 10, 1.0) for _ in range(2)]) for _ in range(3)]
    got = example_stats.multi_bootstrap_sequences(a, b, "perplexity", resamples=200)
    by_hand = np.mean([np.mean([_ppl(r) for r in ua]) - np.mean([_ppl(r) for r in ub]) for ua, ub in zip(a, b)])
    assert got["diff"] == pytest.approx(by_hand)
    single = example_stats.multi_bootstrap_sequences([u[:1] for u in a], [u[:1] for u in b], "perplexity",
                                                     resamples=200)
    stacked = example_stats.multi_bootstrap_sequences(np.stack([u[0] for u in a]), np.stack([u[0] for u in b]),
                                                      "perplexity", resamples=200)
    assert single == pytest.approx(stacked)


def test_the_spread_table_counts_master_seeds(tmp_path: Path) -> None:
    """2 master seeds x 2 data orders, each run sampled with evaluation seeds 1, 2: a master seed's values are its
    runs' mean per sampling seed, so n = 2 and the training sd is over the master seeds' means."""
    per_run = {(1, 1): [0.2, 0.4], (1, 2): [0.4, 0.6], (2, 1): [0.6, 0.6], (2, 2): [0.8, 1.0]}
    rows = []
    for (seed, order), values in per_run.items():
        out = _dir(tmp_path, "fkl", seed, order)
        block = {"scores": {"r": {"rouge_l": float(np.mean(values))}},
                 "sampling": {"seeds": [1, 2], "scores": {"r": {"rouge_l": values}}}}
        (out / "result.json").write_text(json.dumps({"lm_eval": block}))
        rows.append(_row("fkl", seed, out))
    _, got = decoder_lm_eval.spread(pd.DataFrame(rows))
    ((_, _, _, mean, sd_t, sd_s, design, *_),) = got
    # units: seed 1 -> [0.3, 0.5] (mean 0.4), seed 2 -> [0.7, 0.8] (mean 0.75); sd of 0.4, 0.75 over 2 units
    assert mean == f"{(0.4 + 0.75) / 2:.3f}" and sd_t == f"{np.std([0.4, 0.75], ddof=1):.3f} (2)"
    # within a unit over its 2 sampling seeds: squares (0.1^2 x 2 + 0.05^2 x 2) over 2 degrees of freedom
    assert sd_s == f"{np.sqrt((2 * 0.01 + 2 * 0.0025) / 2):.3f} (2)" and design == "crossed"
