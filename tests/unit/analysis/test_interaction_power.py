"""The dry run's power line for Table 3's interaction: the grid's n, Table 3's Holm family and the detectable
interaction, against a hand computation (scipy's noncentral t and statsmodels' solver, not the code's own)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from helpers import write_record
from scipy import stats as sps
from statsmodels.stats.power import TTestPower

from distill_sweep.analysis import interaction_power
from distill_sweep.analysis.interaction import family_size
from distill_sweep.report import decoder, pretraining
from distill_sweep.report.cli import main

TABLE3_TASKS = ("qnli", "sst2", "mnli", "mrpc", "qqp", "rte", "cola")
TABLE3_OBJECTIVES = ("vanilla_kd", "hid_cls", "hid_cls_contrast", "hid_seq", "att_kl", "att_mse")


def _planned(tasks, objectives, inits, seeds, procedure="task_specific") -> list[dict]:
    return [{"task": t, "procedure": procedure, "objective": o, "init": i, "seed": s}
            for t in tasks for o in objectives for i in inits for s in seeds]


def _power(d: float, n: int, level: float) -> float:
    """A two-sided one-sample t-test's power at Cohen's d on n units, from scipy's noncentral t."""
    crit = sps.t.ppf(1 - level / 2, n - 1)
    nc = d * math.sqrt(n)
    lower = float(sps.nct.cdf(-crit, n - 1, nc))  # NaN far in its tail (about 1e-17 there): 0
    return float(sps.nct.sf(crit, n - 1, nc)) + (0.0 if math.isnan(lower) else lower)


def _d_star(n: int, level: float) -> float:
    """Cohen's d that test detects with 80% power at `level`, by bisection (statsmodels' TTestPower agrees at 28
    units; at 3 its solver and its power function fail: 0.61 where it says 0.8, NaN near d = 5.7; a simulation of
    400,000 draws gives 80.07% at the d found for 3 units at 0.05/3)."""
    lo, hi = 0.0, 100.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _power(mid, n, level) < 0.8 else (lo, mid)
    return (lo + hi) / 2


def _numbers(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"\u00b1([0-9.]+)", line)]


def test_table3_preset_power_by_hand(tmp_path: Path) -> None:
    planned = _planned(TABLE3_TASKS, TABLE3_OBJECTIVES, ("1", "2", "3"), (1, 2, 3, 4))
    assert interaction_power.grid_shape(planned) == (6, 3, 28)  # 7 tasks x 4 master seeds per row x init
    # Table 3's family: 6 rows x 3 init pairs (the inits within each row) + 15 row pairs x 3 init pairs + bold in
    # each row's 7 task columns (its Avg over the 7 GLUE tasks is the pooled test's twin); no no-KD row: no map
    assert family_size(6, 3, TABLE3_TASKS) == 6 * 3 + 15 * 3 + 6 * 7 == 105
    line = interaction_power.power_line(tmp_path / "none", planned)
    # a contrast (A_x - A_y) - (B_x - B_y) of 4 independent unit scores of sd sigma has sd 2 sigma
    expected = 2.0 * _d_star(28, 0.05 / 105)
    assert expected / 2.0 == pytest.approx(TTestPower().solve_power(nobs=28, alpha=0.05 / 105, power=0.8), abs=1e-6)
    assert _numbers(line) == [pytest.approx(expected, abs=0.006)]
    assert "x sigma" in line and "unknown until runs exist" in line and "0.05/105" in line


def test_sigma_from_completed_records_by_hand(tmp_path: Path) -> None:
    # 2 objectives x 2 inits x 3 seeds on rte; the seeds' scores in points: cells of sd 1, 1, 2, 2 (steps of 1 or
    # 2 points): pooled variance (2*1 + 2*1 + 2*4 + 2*4) / 8 = 2.5
    for objective, step in (("vanilla_kd", 0.01), ("att_kl", 0.02)):
        for init in ("1", "3"):
            for seed in (1, 2, 3):
                write_record(tmp_path, task="rte", objective=objective, init=init, seed=seed,
                             score=0.6 + step * seed)
    write_record(tmp_path, task="sst2", objective="vanilla_kd", init="1", seed=1, score=0.9)  # not planned: out
    planned = _planned(("rte",), ("vanilla_kd", "att_kl"), ("1", "3"), (1, 2, 3))
    sigma, df = interaction_power.unit_sd(tmp_path, planned)
    assert df == 8 and sigma == pytest.approx(math.sqrt(2.5), abs=1e-9)
    line = interaction_power.power_line(tmp_path, planned)
    per_sigma = 2.0 * _d_star(3, 0.05 / family_size(2, 2, ["rte"]))  # 2 init tests + 1 contrast (bold: twins)
    assert family_size(2, 2, ["rte"]) == 3
    shown, per = _numbers(line)
    assert shown == pytest.approx(per_sigma * math.sqrt(2.5), rel=2e-3)
    assert per == pytest.approx(per_sigma, abs=0.006) and "8 df" in line


def test_no_line_without_an_interaction_to_test(tmp_path: Path) -> None:
    one_init = _planned(("rte",), ("vanilla_kd", "att_kl"), ("1",), (1, 2))
    one_row = _planned(("rte",), ("vanilla_kd",), ("1", "3"), (1, 2))
    decoders = _planned(("toy",), ("fkl", "rkl"), ("skip", "bottom"), (1, 2), procedure="causal_lm")
    for planned in (one_init, one_row, decoders):
        assert interaction_power.power_line(tmp_path, planned) == ""


def test_the_family_is_the_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The report's own Table 3 family on a grid of 2 objectives and the no-KD row x 2 inits x 2 tasks x 2 seeds:
    3 init pairs, 3 contrasts, bold in 3 rows x 2 task columns, the map's 2 rows x 2 inits x 2 columns = 20."""
    for task in ("rte", "mrpc"):
        for k, (procedure, objective) in enumerate((("task_specific", "vanilla_kd"), ("task_specific", "att_kl"),
                                                    ("finetune", "none"))):
            for init in ("1", "3"):
                for seed in (1, 2):
                    # init effects that differ between rows, by seed and task: every contrast testable
                    score = (0.6 + 0.01 * k + 0.003 * seed * (1 + k)
                             + (init == "3") * (0.002 * seed * (1 + k % 2) + 0.001 * (task == "rte") * k))
                    write_record(tmp_path, task=task, objective=objective, init=init, seed=seed, score=score,
                                 procedure=procedure)
    assert main([str(tmp_path), "table=3", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    expected = family_size(3, 2, ["rte", "mrpc"], baseline=True)
    assert expected == 3 + 3 + 3 * 2 + 2 * 2 * 2 == 20
    assert f"Holm over one family of {expected}: the 3 testable interaction tests" in out


def test_own_tables_are_the_reports() -> None:
    assert set(interaction_power.OWN_TABLES) == {decoder.PROCEDURE, pretraining.SOURCE_PROCEDURE}
