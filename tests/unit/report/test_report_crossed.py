"""The report on a crossed grid (`objective=vanilla_kd,hid_cls init=1,2 seed=1,2,3 seeds.data_order=1,2 -m`, and
with seeds.dropout crossed too): it runs, and every table's unit is the master seed, its runs averaged first
(analysis/replication.py). Expected numbers recomputed from the scores with numpy/scipy."""

from __future__ import annotations

import json
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import write_record
from scipy import stats as sps

from distill_sweep.analysis import curves, frames
from distill_sweep.report import compare
from distill_sweep.report.cli import main

OBJECTIVES, INITS, SEEDS, ORDERS = ("vanilla_kd", "hid_cls"), ("1", "2"), (1, 2, 3), (1, 2)
LAYERS = {"1": "4,8,12", "2": "1,8,12"}  # helpers' inits of a 12-layer teacher into 3 layers


def _crossed(root: Path, dropouts: tuple[int | None, ...]) -> dict[tuple, float]:
    """Write the grid's records (scores seeded at random, in percent) and return (objective, init, seed, order,
    dropout) -> score in points."""
    rng = np.random.default_rng(7)
    got = {}
    for objective, init, seed, order, dropout in product(OBJECTIVES, INITS, SEEDS, ORDERS, dropouts):
        score = round(float(70 + rng.normal()), 4)
        path = write_record(root / f"order{order}-dropout{dropout}", task="rte", objective=objective, init=init,
                            seed=seed, score=score / 100)
        rec = json.loads(path.read_text())
        own = ["data_order", *(["dropout"] if dropout is not None else [])]
        rec["seeds"] = {"init": seed, "data_order": order, "dropout": dropout or seed, "sampling": seed, "own": own}
        rec["config_hash"] = f"{order}{dropout or 0}" + rec["config_hash"][2:]
        path.write_text(json.dumps(rec))
        got[(objective, init, seed, order, dropout)] = score
    return got


def _units(scores: dict[tuple, float], objective: str, init: str) -> np.ndarray:
    """The master seeds' means of one cell, in seed order."""
    return np.array([np.mean([v for k, v in scores.items() if k[:3] == (objective, init, seed)]) for seed in SEEDS])


@pytest.mark.parametrize("dropouts", [(None,), (1, 2)], ids=["seed x data_order", "seed x data_order x dropout"])
def test_a_crossed_grid_reports_with_the_master_seed_as_unit(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             dropouts: tuple[int | None, ...]) -> None:
    scores = _crossed(tmp_path, dropouts)
    runs = len(ORDERS) * len(dropouts)
    assert main([str(tmp_path), "paper=false"]) == 0  # was: ValueError: cannot handle a non-unique multi-index!
    capsys.readouterr()
    tables = tmp_path / "tables"
    assert f"(up to {runs} per seed here) are averaged first" in (tables / "report.md").read_text()
    for key in ("table1", "table3"):
        cells = pd.read_csv(tables / f"{key}.csv")
        cells = cells[cells["task"] == "rte"]
        assert not cells.empty and (cells["n"] == len(SEEDS)).all()  # master seeds, not the 6 or 12 runs
    cells = pd.read_csv(tables / "table3.csv").query("task == 'rte'")
    for objective, init in product(OBJECTIVES, INITS):
        (cell,) = cells[(cells["objective"] == objective) & (cells["init"] == LAYERS[init])].to_dict("records")
        units = _units(scores, objective, init)
        assert cell["mean"] == pytest.approx(units.mean(), abs=1e-9)
        assert cell["std"] == pytest.approx(units.std(ddof=1), abs=1e-9)
        low, high = sps.t.interval(0.95, len(units) - 1, loc=units.mean(), scale=sps.sem(units))
        assert (cell["ci_low"], cell["ci_high"]) == pytest.approx((low, high), abs=1e-9)
    # Table 1 (init 1 = skip): the two objectives paired on their 3 master seeds' means
    (t1,) = pd.read_csv(tables / "ttests_table1.csv").to_dict("records")
    a, b = _units(scores, t1["a"], "1"), _units(scores, t1["b"], "1")
    assert t1["n"] == len(SEEDS) and t1["p"] == pytest.approx(sps.ttest_rel(a, b).pvalue, abs=1e-12)
    # Table 3: each row's inits on 3 units; the interaction on 3 units of (A_x - A_y) - (B_x - B_y)
    t3 = pd.read_csv(tables / "ttests_table3.csv")
    assert (t3["n"] == len(SEEDS)).all()
    (inter,) = pd.read_csv(tables / "interaction_table3.csv").to_dict("records")
    contrast = ((_units(scores, inter["a"], "1") - _units(scores, inter["a"], "2"))
                - (_units(scores, inter["b"], "1") - _units(scores, inter["b"], "2")))
    assert inter["n"] == len(SEEDS)
    assert inter["p"] == pytest.approx(sps.ttest_1samp(contrast, 0.0).pvalue, abs=1e-12)
    # Table 1 names the init it shows, and every init's comparison of the objectives is a table of its own
    report = (tables / "report.md").read_text()
    assert "## Table 1: objectives (init skip: layers 4,8,12)" in report
    every = pd.read_csv(tables / "ttests_table1_inits.csv")
    assert sorted(every["init_label"]) == sorted(LAYERS.values()) and (every["n"] == len(SEEDS)).all()
    (mixed,) = every[every["init_label"] == LAYERS["2"]].to_dict("records")
    a, b = _units(scores, mixed["a"], "2"), _units(scores, mixed["b"], "2")
    assert mixed["p"] == pytest.approx(sps.ttest_rel(a, b).pvalue, abs=1e-12)
    # the dev curves' bands: over the master seeds too
    means = curves.curve_means(frames.load_store(tmp_path).curves, ("system", "init_label"))
    assert not means.empty and (means["n"] == len(SEEDS)).all()
    # the variance table still sees every run (it needs them to tell the sources apart)
    components = pd.read_csv(tables / "variance_components.csv")
    assert (components["n"] == len(SEEDS) * runs).all()


def test_compare_pairs_each_run_and_tests_over_master_seeds(tmp_path: Path) -> None:
    """--match job on a crossed grid pairs run with run (by its seeds per source), and the t-test's units are the
    master seeds: the 6 runs' differences averaged within each of the 3."""
    a, b = _crossed(tmp_path / "a", (None,)), _crossed(tmp_path / "b", (None,))
    del a, b  # the same seeded scores on both sides: shift B's vanilla_kd, init 1 runs by a known amount
    shift = {(1, 1): 0.01, (1, 2): 0.03, (2, 1): 0.0, (2, 2): 0.02, (3, 1): 0.05, (3, 2): 0.01}
    for path in (tmp_path / "b").rglob("result.json"):
        rec = json.loads(path.read_text())
        if rec["objective"] == "vanilla_kd" and rec["init"]["spec"] == "1":
            for epoch in (rec["best"], *rec["epochs"]):
                epoch["dev"]["accuracy"] += shift[(rec["seed"], rec["seeds"]["data_order"])]
            path.write_text(json.dumps(rec))
    pairing = compare.pair(compare.read_side(tmp_path / "a", "A"), compare.read_side(tmp_path / "b", "B"), "job")
    assert len(pairing.pairs) == 24 and pairing.only_a.empty and pairing.only_b.empty
    (row,) = compare.summary(pairing.pairs)
    units = np.array([np.mean([shift[(s, o)] for o in ORDERS]) for s in SEEDS] + [0.0] * 9)  # 12 master seeds
    assert row[2] == "24 (12 master seeds)"
    assert row[6] == f"{sps.ttest_1samp(units, 0.0).pvalue:.3g}"
    assert row[4] == f"{100 * units.mean():+.2f}"


def test_the_multi_bootstrap_averages_a_master_seeds_runs(tmp_path: Path) -> None:
    """The crossed grid with dev predictions: the comparisons over seeds and dev examples pair 3 master seeds (not
    the last run of each), each unit's accuracy the mean of its 2 runs'."""
    from distill_sweep.records.predictions import write_predictions

    n = 300
    labels = np.random.default_rng(0).integers(0, 2, n)
    accuracy: dict[tuple, float] = {}
    for k, (objective, seed, order) in enumerate(product(OBJECTIVES, SEEDS, ORDERS)):
        rng = np.random.default_rng(k)
        preds = np.where(rng.random(n) < (0.8 if objective == "vanilla_kd" else 0.7), labels, 1 - labels)
        acc = float(np.mean(preds == labels))
        path = write_record(tmp_path / f"order{order}", task="toy", objective=objective, seed=seed, score=acc)
        write_predictions(path.parent, {"validation": preds}, {"validation": labels}, {"validation": "dev"},
                          "prediction", 1)
        rec = json.loads(path.read_text())
        rec["seeds"] = {"init": seed, "data_order": order, "dropout": seed, "sampling": seed, "own": ["data_order"]}
        rec["config_hash"] = f"{order}0" + rec["config_hash"][2:]
        path.write_text(json.dumps(rec))
        accuracy[(objective, seed, order)] = 100 * acc
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    (row,) = pd.read_csv(tmp_path / "tables" / "examples_table1.csv").to_dict("records")
    units = [np.mean([accuracy[(row["a"], s, o)] - accuracy[(row["b"], s, o)] for o in ORDERS]) for s in SEEDS]
    assert row["seeds"] == len(SEEDS) and row["mean_diff"] == pytest.approx(np.mean(units))
    assert row["p_seeds"] == pytest.approx(sps.ttest_1samp(units, 0.0).pvalue)


def test_table1_without_its_init_names_the_one_it_shows(tmp_path: Path) -> None:
    """No skip init, and mixed and bottom with as many runs each: Table 1 shows mixed (first in the paper's init
    order), titled by its own name and layers, and says why; not "init skip: layers 1,2,3"."""
    for objective, init, seed in product(OBJECTIVES, ("3", "2"), SEEDS):
        write_record(tmp_path, task="rte", objective=objective, init=init, seed=seed, score=0.7 + 0.01 * seed)
    assert main([str(tmp_path), "paper=false", "format=text"]) == 0
    report = (tmp_path / "tables" / "table1.md").read_text()
    assert "Table 1: objectives (init mixed: layers 1,8,12)" in report
    assert ("no records with init 'skip'; Table 1 uses the most common init instead: mixed (layers 1,8,12) (first "
            "in init order of the 2 with 6 runs each)") in report
