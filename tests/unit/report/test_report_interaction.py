"""Table 3's objective x init interaction in the report: stated under the table, every pair of objectives and inits
in its own section and CSV, corrected in one Holm family with the table's init tests (numbers worked by hand)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from helpers import write_record
from scipy import stats as sps

from distill_sweep.report.cli import main

# the init effects (init 1 - init 3) per seed: vanilla_kd (2, 3, 1), att_mse (0, 1, 1): d = (2, 2, 0), t = 2
SCORES = {("vanilla_kd", "1"): [0.80, 0.82, 0.81], ("vanilla_kd", "3"): [0.78, 0.79, 0.80],
          ("att_mse", "1"): [0.70, 0.71, 0.72], ("att_mse", "3"): [0.70, 0.70, 0.71]}


def test_table3_states_the_interaction_test_in_the_tables_holm_family(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    for (objective, init), scores in SCORES.items():
        for seed, score in enumerate(scores):
            write_record(tmp_path, task="rte", objective=objective, init=init, seed=seed, score=score)
    assert main([str(tmp_path), "table=3", "paper=false"]) == 0
    out = capsys.readouterr().out
    assert "objective x init interaction (the paper's claim that the init matters for some objectives" in out
    assert "no contrast is called at alpha=0.05 after Holm" in out  # never "no pair ... differs": an absence
    assert "an interaction below" in out and "cannot be ruled out" in out
    assert ("Holm over one family of 3: the 1 testable interaction tests and the table's 2 other testable verdict "
            "tests") in out  # bold's two tests are the init tests' twins (one task): counted once
    inter = pd.read_csv(tmp_path / "tables" / "interaction_table3.csv")
    (row,) = inter.to_dict("records")
    assert {row["a"], row["b"]} == {"vanilla_kd", "att_mse"}
    assert abs(row["diff"]) == pytest.approx(4.0 / 3.0) and abs(row["t"]) == pytest.approx(2.0)
    p = 1.0 - 2.0 / math.sqrt(6.0)  # Student t, 2 df, |t| = 2 (worked in tests/unit/analysis/test_interaction.py)
    assert row["p"] == pytest.approx(p, abs=1e-9)
    # the family: the init tests of each row (paired t on its seeds) and this one
    p_kd = sps.ttest_rel([80.0, 82.0, 81.0], [78.0, 79.0, 80.0]).pvalue
    p_mse = sps.ttest_rel([70.0, 71.0, 72.0], [70.0, 70.0, 71.0]).pvalue
    ranked = sorted([p, p_kd, p_mse])
    holm = [min(1.0, m * x) for m, x in zip((3, 2, 1), ranked, strict=True)]  # Holm: (m - i) p_(i), made monotone
    holm = [max(holm[: i + 1]) for i in range(3)]
    assert row["p_holm"] == pytest.approx(holm[ranked.index(p)])
    # one family both ways: the init tests' own Holm p are corrected over the same three p-values
    tests = pd.read_csv(tmp_path / "tables" / "ttests_table3.csv")
    for system, p_init in (("vanilla_kd", p_kd), ("att_mse", p_mse)):
        (got,) = tests.loc[tests["system"] == system, "p_holm"]
        assert got == pytest.approx(holm[ranked.index(p_init)])
    assert "Holm correction over one family of 3: the 2 testable pairs of 2 and the table's 1 testable" in out


def test_a_grid_of_two_sources_gets_the_variance_components_table(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """seed=1,2,3 x seeds.data_order=1,2,3: nine runs of one cell, each record stating its seeds; the report keeps
    all nine (not one per master seed), each component with its interval."""
    table = [[0.80, 0.81, 0.82], [0.83, 0.845, 0.845], [0.86, 0.865, 0.885]]  # the master seed dominates
    for s in range(3):
        for o in range(3):
            path = write_record(tmp_path / f"o{o}", task="rte", objective="vanilla_kd", seed=s + 1,
                                score=table[s][o])
            rec = json.loads(path.read_text())
            rec["seeds"] = {"init": s + 1, "data_order": o + 1, "dropout": s + 1, "sampling": s + 1,
                            "own": ["data_order"]}
            rec["config_hash"] = f"{s}{o}" + rec["config_hash"][2:]
            path.write_text(json.dumps(rec))
    assert main([str(tmp_path), "table=1", "paper=false"]) == 0
    out = capsys.readouterr().out
    assert "Variance components: how much of each cell's spread each source of variance explains" in out
    assert "duplicate completed run" not in out
    comp = pd.read_csv(tmp_path / "tables" / "variance_components.csv").set_index("component")
    assert (comp["n"] == 9).all()
    # the ANOVA estimates worked in tests/unit/analysis/test_variance.py (the same table, in points)
    assert comp.loc["init+dropout", "variance"] == pytest.approx((27 - 0.25) / 3, rel=1e-3)
    # the largest, but from 3 levels (2 df) its lead's interval reaches below 0: no source is named
    assert not comp["dominant"].any() and "none clear" in out
    assert comp.loc["init+dropout", "ci_low"] <= comp.loc["init+dropout", "variance"] <= comp.loc["init+dropout",
                                                                                                  "ci_high"]


def test_a_grid_of_one_source_has_no_variance_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for seed in (1, 2, 3):
        write_record(tmp_path, task="rte", objective="vanilla_kd", seed=seed, score=0.8 + 0.01 * seed)
    assert main([str(tmp_path), "table=1", "paper=false"]) == 0
    assert "Variance components" not in capsys.readouterr().out
    assert not (tmp_path / "tables" / "variance_components.csv").exists()
