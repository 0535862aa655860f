"""The master seed is the unit in the tables of their own too: the decoder table and its lm-eval table
(report/decoder.py, report/decoder_lm_eval.py) and Tables 2 and 4 (report/pretraining.py) average a master seed's
runs that vary another source's seed before mean, std, n and the paired tests, on a crossed design (3 master
seeds x 2 data orders), numbers worked by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from distill_sweep.report import decoder, decoder_lm_eval, pretraining

# (objective, master seed, data order) -> dev perplexity; fkl's seed means 3.1, 3.3, 3.0; rkl's 3.4, 3.45, 3.2
PPL = {("fkl", 1, 1): 3.0, ("fkl", 1, 2): 3.2, ("fkl", 2, 1): 3.4, ("fkl", 2, 2): 3.2, ("fkl", 3, 1): 2.9,
       ("fkl", 3, 2): 3.1, ("rkl", 1, 1): 3.3, ("rkl", 1, 2): 3.5, ("rkl", 2, 1): 3.5, ("rkl", 2, 2): 3.4,
       ("rkl", 3, 1): 3.2, ("rkl", 3, 2): 3.2}
MEANS = {"fkl": [3.1, 3.3, 3.0], "rkl": [3.4, 3.45, 3.2]}


def _frame(tmp_path: Path) -> pd.DataFrame:
    rows = []
    for (objective, seed, order), ppl in PPL.items():
        path = tmp_path / f"{objective}-{seed}-{order}" / "result.json"
        path.parent.mkdir()
        # the lm-eval score: 10 x perplexity, so its seed means are 10 x MEANS
        path.write_text(json.dumps({"lm_eval": {"scores": {"arc": {"acc": 10 * ppl}}}}))
        rows.append({"setting": "s", "objective": objective, "init": "skip", "data": "fixed", "layers": "2,4,6",
                     "seed": seed, "seeds": (seed, order, seed, seed), "path": str(path),
                     "teacher_dev": {"perplexity": 2.0}, "perplexity": ppl, "token_accuracy": 0.4,
                     "choice_accuracy": None})
    return pd.DataFrame(rows)


def test_the_decoder_table_averages_a_master_seeds_runs(tmp_path: Path) -> None:
    ((_, headers, rows, test_headers, tests, _),) = decoder.tables(_frame(tmp_path), ddof=1, alpha=0.05)
    cells = {r[0]: dict(zip(headers, r, strict=True)) for r in rows}
    for objective, means in MEANS.items():  # n = 3 master seeds, not 6 runs
        assert cells[objective]["perplexity"] == f"{np.mean(means):.3f}±{np.std(means, ddof=1):.3f} (3)"
    (row,) = [dict(zip(test_headers, t, strict=True)) for t in tests]
    assert row["pairs"] == "3"  # rkl - fkl by master seed: 0.3, 0.15, 0.2
    assert row["mean diff"] == f"{np.mean([0.3, 0.15, 0.2]):+.3f}"
    assert row["p"] == f"{sps.ttest_rel(MEANS['rkl'], MEANS['fkl']).pvalue:.3g}"


def test_the_lm_eval_table_averages_a_master_seeds_runs(tmp_path: Path) -> None:
    headers, rows = decoder_lm_eval.table(_frame(tmp_path), ddof=1)
    cells = {r[0]: dict(zip(headers, r, strict=True)) for r in rows}
    for objective, means in MEANS.items():
        tens = [10 * m for m in means]
        assert cells[objective]["arc: acc"] == f"{np.mean(tens):.2f}±{np.std(tens, ddof=1):.2f} (3)"


def _tables_2_4() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Distillations of att_mse at master seeds 1-3 x data orders 1-2 (six students), each fine-tuned on rte at
    fine-tuning seeds 1 and 2 at two grid points (the cell takes the better of the two)."""
    records, scores = [], []
    for seed in (1, 2, 3):
        for order in (1, 2):
            source = f"src{seed}{order}"
            for ft_seed in (1, 2):
                for lr in (1e-5, 3e-5):
                    path = f"/r/{source}/{ft_seed}/{lr}/result.json"
                    src = {"config_hash": source, "objective": "att_mse", "seed": seed, "teacher": "bert",
                           "student": "fresh", "student_layers": 6, "corpus": "wiki",
                           "init": {"name": "fresh", "layers": []}}
                    records.append({"path": path, "student_name": pretraining.STUDENT,
                                    "student_settings": {"distilled_from": src},
                                    "setup": {"optimizer.lr": lr, "optimizer.batch_size": 32}})
                    # the better point scores 60 + 2 seed + order + ft_seed (the other 10 points less)
                    value = 60.0 + 2 * seed + order + ft_seed - (10.0 if lr == 1e-5 else 0.0)
                    scores.append({"path": path, "task": "rte", "metric": "accuracy", "value": value,
                                   "seed": ft_seed, "seeds": (ft_seed,) * 4})
    return pd.DataFrame(records), pd.DataFrame(scores)


def test_tables_2_and_4_average_a_distillation_master_seeds_runs() -> None:
    records, sc = _tables_2_4()
    best = pretraining.best_over_grid(pretraining.distilled_runs(records, sc))
    assert len(best) == 12 and set(best["value"]) == {60.0 + 2 * s + o + f for s in (1, 2, 3) for o in (1, 2)
                                                      for f in (1, 2)}
    table = pretraining.build("table2", "T2", best, False, "header")
    (row,) = table.rows
    cell = row.cells["rte"]
    # master seed s: the mean of its 4 runs (orders 1, 2 x fine-tuning seeds 1, 2) = 60 + 2 s + 3
    means = [63.0 + 2 * s for s in (1, 2, 3)]
    assert cell.n == 3 and cell.runs == 12
    assert cell.mean == pytest.approx(np.mean(means)) and cell.std == pytest.approx(2.0)
    half = sps.t.ppf(0.975, 2) * 2.0 / math.sqrt(3)  # the t-interval over the 3 master seeds
    assert (cell.ci_low, cell.ci_high) == (pytest.approx(np.mean(means) - half), pytest.approx(np.mean(means) + half))
    assert any("master seeds" in note for note in table.notes)
