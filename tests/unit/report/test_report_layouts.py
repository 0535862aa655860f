"""Other systems' report layouts (distill_sweep.report.layouts): PEA-KD Tables 4 and 5, BiLSTM vs BERT students vs
the teacher, FastBERT's t-tests; on records written through the real Record type, numbers checked by hand."""

from __future__ import annotations

import math
import sys
import types
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import write_record
from scipy import stats as sps

from distill_sweep.records import record
from distill_sweep.report.cli import main, parse_args

SPS1, SPS2 = {"swap_qk": False}, {"swap_qk": True}
STUDENTS = {"BERT3": ("truncated", 3, None), "SPS-1": ("sps", 6, SPS1), "SPS-2": ("sps", 6, SPS2)}
SEEDS = (1, 2, 3)


def _score(student: str, objective: str, task: str, seed: int) -> float:
    """A fraction by row and task, plus a fixed pseudo-random 0..0.05 per run (so paired differences vary)."""
    base = {"BERT3": 0.60, "SPS-1": 0.62, "SPS-2": 0.63}[student] + {"vanilla_kd": 0.0, "pkd": 0.01}[objective]
    noise = zlib.crc32(f"{student}/{objective}/{task}/{seed}".encode()) % 500 / 10_000
    return round(base + {"rte": 0.0, "mrpc": 0.2, "sst2": 0.25, "qnli": 0.2}[task] + noise, 4)


def _ptp_gain(seed: int) -> float:
    return 0.04 + 0.01 * seed


def _peakd(root: Path, student: str, objective: str, task: str, seed: int, procedure: str = "task_specific",
           **kw: object) -> Path:
    name, layers, settings = STUDENTS[student]
    value = _score(student, objective, task, seed) + (_ptp_gain(seed) if procedure == "ptp" else 0.0)
    # MRPC: F1 and accuracy differ, so the column's metric is visible
    score = {"accuracy": value - 0.1, "f1": value} if task == "mrpc" else value
    return write_record(root, task=task, objective=objective, init="3", seed=seed, score=score, procedure=procedure,
                        teacher="bert_base", teacher_layers=12, student=name, student_layers=layers,
                        student_settings=settings, **kw)  # type: ignore[arg-type]


def _mean_std(values: list[float]) -> tuple[float, float]:
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


def _holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment, written out: the i-th smallest times (m - i), running maximum, capped at 1."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def _csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"init": str, "row": str})


# ----------------------------------------------------------------------------- PEA-KD Table 4


def _table4_store(root: Path) -> None:
    """BERT3 / SPS-1 / SPS-2 x vanilla KD / PKD x RTE, MRPC, SST-2, QNLI x 3 seeds, except: PKD SPS-2 has no
    MRPC run at all, its RTE seed 3 failed and its QNLI seed 3 is still running. Records outside the layout: a
    PTP run and a BiLSTM run."""
    for student in STUDENTS:
        for objective in ("vanilla_kd", "pkd"):
            for task in ("rte", "mrpc", "sst2", "qnli"):
                for seed in SEEDS:
                    if (student, objective) == ("SPS-2", "pkd"):
                        if task == "mrpc":
                            continue
                        if (task, seed) == ("rte", 3):
                            _peakd(root, student, objective, task, seed, status="failed", error="boom")
                            continue
                        if (task, seed) == ("qnli", 3):
                            _peakd(root, student, objective, task, seed, status="running")
                            continue
                    _peakd(root, student, objective, task, seed)
    _peakd(root, "SPS-2", "pkd", "rte", 1, procedure="ptp")
    write_record(root, task="rte", objective="vanilla_kd", init="1", seed=1, student="bilstm", student_layers=1,
                 teacher="bert_base", teacher_layers=12)


def _expected_scores(student: str, objective: str, task: str) -> list[float]:
    seeds = [s for s in SEEDS if not ((student, objective) == ("SPS-2", "pkd") and task in ("rte", "qnli") and s == 3)]
    if (student, objective) == ("SPS-2", "pkd") and task == "mrpc":
        seeds = []
    return [100 * _score(student, objective, task, s) for s in seeds]


def test_peakd4_layout_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _table4_store(tmp_path)
    assert main([str(tmp_path), "table=peakd4", "metric=paper"]) == 0  # PEA-KD's columns whatever metric= says
    out = capsys.readouterr().out
    tables = tmp_path / "tables"
    for name in ("peakd4.md", "peakd4.tex", "peakd4.csv", "ttests_peakd4.csv", "paper_peakd4.csv"):
        assert (tables / name).is_file(), name
    assert not (tables / "table1.csv").exists()  # table=peakd4: the layout only
    assert "== PEA-KD Table 4: shuffled parameter sharing (BERT3 vs SPS-1 vs SPS-2) ==" in out

    t4 = _csv(tables / "peakd4.csv")
    rows = list(dict.fromkeys(t4["row"]))
    assert rows == ["vanilla KD / BERT3", "vanilla KD / SPS-1", "vanilla KD / SPS-2", "PKD / BERT3", "PKD / SPS-1",
                    "PKD / SPS-2"]  # neither the PTP run nor the BiLSTM run is a row
    assert list(dict.fromkeys(t4["task"])) == ["rte", "mrpc", "sst2", "qnli", "avg"]
    metrics = t4.drop_duplicates("task").set_index("task")["metric"]
    assert list(metrics[["rte", "mrpc", "sst2", "qnli"]]) == ["accuracy", "f1", "accuracy", "accuracy"]
    cells = t4.set_index(["row", "task"])
    for student in STUDENTS:
        for objective, kd in (("vanilla_kd", "vanilla KD"), ("pkd", "PKD")):
            for task in ("rte", "mrpc", "sst2", "qnli"):
                values = _expected_scores(student, objective, task)
                cell = cells.loc[(f"{kd} / {student}", task)]
                assert cell["n"] == len(values)
                if not values:
                    assert pd.isna(cell["mean"])
                    continue
                mean, std = _mean_std(values)
                assert cell["mean"] == pytest.approx(mean) and cell["std"] == pytest.approx(std, nan_ok=True)
    # Avg over the four tasks, only for complete rows (PKD / SPS-2 has no MRPC)
    avg = np.mean([np.mean(_expected_scores("SPS-1", "pkd", t)) for t in ("rte", "mrpc", "sst2", "qnli")])
    assert cells.loc[("PKD / SPS-1", "avg"), "mean"] == pytest.approx(avg)
    assert pd.isna(cells.loc[("PKD / SPS-2", "avg"), "mean"]) and cells.loc[("PKD / SPS-2", "avg"), "note"] == "missing MRPC"
    md = (tables / "peakd4.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("| PKD ") and "| SPS-2 " in x)
    assert line.count("— (0)") == 1 and "(2)" in line  # MRPC without runs; RTE and QNLI with 2 completed
    assert "RTE (acc)" in md and "MRPC (F1)" in md
    tex = (tables / "peakd4.tex").read_text()
    assert r"\begin{tabular}{llrrrrr}" in tex and tex.count(r"\midrule") == 2  # header rule + between KD groups


def test_peakd4_ttests_and_paper(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _table4_store(tmp_path)
    assert main([str(tmp_path), "table=peakd4"]) == 0
    out = capsys.readouterr().out
    tables = tmp_path / "tables"
    tests = pd.read_csv(tables / "ttests_peakd4.csv")
    base = "vanilla KD / BERT3"
    expected = [(r, base) for r in ("vanilla KD / SPS-1", "vanilla KD / SPS-2", "PKD / BERT3", "PKD / SPS-1",
                                    "PKD / SPS-2")] + [("PKD / SPS-1", "PKD / BERT3"), ("PKD / SPS-2", "PKD / SPS-1")]
    assert list(zip(tests["a"], tests["b"], strict=True)) == expected

    def paired(a: str, b: str) -> tuple[list[float], list[float]]:
        (kd_a, st_a), (kd_b, st_b) = (x.split(" / ") for x in (a, b))
        obj = {"vanilla KD": "vanilla_kd", "PKD": "pkd"}
        xa, xb = [], []
        for task in ("rte", "mrpc", "sst2", "qnli"):  # matched on (task, seed), pooled over tasks
            for seed in SEEDS:
                if seed > len(_expected_scores(st_a, obj[kd_a], task)) or seed > len(_expected_scores(st_b, obj[kd_b], task)):
                    continue
                xa.append(100 * _score(st_a, obj[kd_a], task, seed))
                xb.append(100 * _score(st_b, obj[kd_b], task, seed))
        return xa, xb

    p_values = []
    for row in tests.to_dict("records"):
        xa, xb = paired(row["a"], row["b"])
        res = sps.ttest_rel(xa, xb)
        assert row["n"] == len(xa)
        assert row["t"] == pytest.approx(res.statistic) and row["p"] == pytest.approx(res.pvalue)
        assert row["mean_diff"] == pytest.approx(np.mean(np.array(xa) - np.array(xb)))
        p_values.append(res.pvalue)
    assert tests.set_index(["a", "b"]).loc[("PKD / SPS-2", base), "n"] == 7  # 3 tasks x 3 seeds - failed, running
    # one Holm family with the table's bold tests (best vs runner-up per KD group and column): 2 groups x 5 columns
    bold = _bold_p_table4()
    assert len(bold) == 10
    assert list(tests["p_holm"]) == pytest.approx(_holm(p_values + bold)[:len(p_values)])
    assert "Holm correction over one family of 17: the 7 testable pairs of 7 and the table's 10" in out
    assert "Holm over one family of 17: the table's 10 such test(s)" in out  # bold's footnote, the same family

    comp = pd.read_csv(tables / "paper_peakd4.csv").set_index(["method", "task"])
    sps1 = comp.loc[("SPS-1", "rte")]
    assert sps1["paper"] == pytest.approx(63.5) and sps1["row"] == "PKD / SPS-1"
    assert sps1["ours"] == pytest.approx(np.mean(_expected_scores("SPS-1", "pkd", "rte")))
    assert sps1["delta"] == pytest.approx(sps1["ours"] - 63.5)
    assert comp.loc[("BERT3", "avg"), "paper"] == pytest.approx(80.0)
    assert pd.isna(comp.loc[("SPS-2", "mrpc"), "ours"]) and comp.loc[("SPS-2", "mrpc"), "paper"] == pytest.approx(86.8)
    assert "— vs 86.8" in out  # the paper's number beside our missing cell


def _bold_p_table4() -> list[float]:
    """The raw p of Table 4's bold tests, worked by hand: in each KD group and column the best row (highest mean)
    against the runner-up, a paired t-test on their matched seeds (Avg: matched (task, seed) pairs over the four
    tasks, rows with every task only)."""
    tasks = ("rte", "mrpc", "sst2", "qnli")

    def by_seed(student: str, objective: str, task: str) -> dict[tuple[str, int], float]:
        seeds = [s for s in SEEDS if not ((student, objective) == ("SPS-2", "pkd") and task in ("rte", "qnli")
                                          and s == 3)]
        values = _expected_scores(student, objective, task)
        return {(task, s): v for s, v in zip(seeds, values, strict=False)}

    out = []
    for objective in ("vanilla_kd", "pkd"):
        for col in (*tasks, "avg"):
            cols = tasks if col == "avg" else (col,)
            runs = {s: [by_seed(s, objective, t) for t in cols] for s in STUDENTS}
            runs = {s: {k: v for d in ds for k, v in d.items()} for s, ds in runs.items() if all(ds)}
            means = {s: float(np.mean([np.mean(_expected_scores(s, objective, t)) for t in cols])) for s in runs}
            best, second = sorted(runs, key=means.__getitem__, reverse=True)[:2]
            both = sorted(set(runs[best]) & set(runs[second]))
            out.append(float(sps.ttest_rel([runs[best][k] for k in both], [runs[second][k] for k in both]).pvalue))
    return out


# ----------------------------------------------------------------------------- PEA-KD Table 5


def test_peakd5_layout_ptp_vs_without(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SPS-2 with and without PTP; vanilla KD with PTP never ran (a row of missing cells, an untestable pair)."""
    for task in ("rte", "qnli"):
        for seed in SEEDS:
            _peakd(tmp_path, "SPS-2", "vanilla_kd", task, seed)
            _peakd(tmp_path, "SPS-2", "pkd", task, seed)
            _peakd(tmp_path, "SPS-2", "pkd", task, seed, procedure="ptp")
    assert main([str(tmp_path), "table=peakd5", "paper=false"]) == 0
    out = capsys.readouterr().out
    tables = tmp_path / "tables"
    assert not (tables / "paper_peakd5.csv").exists()
    t5 = _csv(tables / "peakd5.csv")
    assert list(dict.fromkeys(t5["row"])) == ["SPS-2 / vanilla KD / without PTP", "SPS-2 / vanilla KD / with PTP",
                                              "SPS-2 / PKD / without PTP", "SPS-2 / PKD / with PTP"]
    assert list(dict.fromkeys(t5["task"])) == ["rte", "mrpc", "sst2", "qnli", "avg"]  # PEA-KD's four columns
    cells = t5.set_index(["row", "task"])
    assert (cells.xs("SPS-2 / vanilla KD / with PTP")["n"].dropna() == 0).all()
    assert cells.loc[("SPS-2 / PKD / with PTP", "mrpc"), "n"] == 0
    ptp = [100 * (_score("SPS-2", "pkd", "qnli", s) + _ptp_gain(s)) for s in SEEDS]
    mean, std = _mean_std(ptp)
    assert cells.loc[("SPS-2 / PKD / with PTP", "qnli"), "mean"] == pytest.approx(mean)
    assert cells.loc[("SPS-2 / PKD / with PTP", "qnli"), "std"] == pytest.approx(std)
    line = next(x for x in out.splitlines() if x.startswith("SPS-2 ") and " vanilla KD  with PTP " in x)
    assert line.count("— (0)") == 4  # a skeleton row without runs

    tests = pd.read_csv(tables / "ttests_peakd5.csv").set_index(["a", "b"])
    assert list(tests.index) == [
        ("SPS-2 / vanilla KD / with PTP", "SPS-2 / vanilla KD / without PTP"),
        ("SPS-2 / PKD / with PTP", "SPS-2 / PKD / without PTP"),
        ("SPS-2 / PKD / without PTP", "SPS-2 / vanilla KD / without PTP"),
        ("SPS-2 / PKD / with PTP", "SPS-2 / vanilla KD / without PTP")]
    missing = tests.iloc[0]
    assert missing["n"] == 0 and not missing["testable"]
    assert missing["note"] == "no completed runs of SPS-2 / vanilla KD / with PTP"
    with_ptp = [100 * (_score("SPS-2", "pkd", t, s) + _ptp_gain(s)) for t in ("rte", "qnli") for s in SEEDS]
    without = [100 * _score("SPS-2", "pkd", t, s) for t in ("rte", "qnli") for s in SEEDS]
    row = tests.loc[("SPS-2 / PKD / with PTP", "SPS-2 / PKD / without PTP")]
    assert row["n"] == 6 and row["p"] == pytest.approx(sps.ttest_rel(with_ptp, without).pvalue)
    # one family with bold: the best of SPS-2's rows against the runner-up in RTE and QNLI (no Avg: two tasks)
    assert "Holm correction over one family of 5: the 3 testable pairs of 4 and the table's 2" in out


# ----------------------------------------------------------------------------- BiLSTM


def _bilstm_store(root: Path) -> dict[tuple[str, str], list[float]]:
    """Toy task: BiLSTM and BERT3 x no KD / vanilla KD / logit MSE x 3 seeds; the teacher's dev accuracy 0.888
    is in every record that loaded it (the BiLSTM's no-KD runs load none); BERT3 logit MSE has one seed only."""
    scores = {("BiLSTM", "no KD"): [0.998, 1.0, 0.996], ("BiLSTM", "vanilla KD"): [0.976, 0.968, 0.984],
              ("BiLSTM", "logit MSE"): [0.932, 0.938, 0.946], ("BERT3", "no KD"): [0.918, 0.904, 0.914],
              ("BERT3", "vanilla KD"): [0.906, 0.9, 0.89], ("BERT3", "logit MSE"): [0.878]}
    for (student, kd), values in scores.items():
        name, layers, init = ("bilstm", 1, "1") if student == "BiLSTM" else ("truncated", 3, "1")
        procedure, objective = ("finetune", "none") if kd == "no KD" else \
            ("task_specific", {"vanilla KD": "vanilla_kd", "logit MSE": "logit_mse"}[kd])
        teacher_dev = None if (student, kd) == ("BiLSTM", "no KD") else {"accuracy": 0.888}
        for seed, value in zip(SEEDS, values, strict=False):
            write_record(root, task="toy", objective=objective, procedure=procedure, init=init, seed=seed, score=value,
                         teacher="tiny", teacher_layers=6, student=name, student_layers=layers, teacher_dev=teacher_dev)
    return {k: [100 * v for v in vs] for k, vs in scores.items()}


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_bilstm_layout_from_preset(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    scores = _bilstm_store(tmp_path)
    fake = types.ModuleType("distill_sweep.sweep.compose")
    fake.expected_jobs = lambda name: []  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "distill_sweep.sweep.compose", fake)
    assert main([str(tmp_path), "preset=bilstm"]) == 0  # table=all: the preset's layout, then Tables 1 and 3
    out = capsys.readouterr().out
    headings = [line for line in out.splitlines() if line.startswith("== ")]
    assert headings[1] == "== BiLSTM vs BERT students vs the teacher (Tang et al. 2019) =="
    assert headings.index("== Table 1: objectives (init skip: layers 2,4,6) ==") > 1
    tables = tmp_path / "tables"
    t = _csv(tables / "bilstm.csv")
    assert list(dict.fromkeys(t["row"])) == ["teacher", "BiLSTM / no KD", "BiLSTM / vanilla KD", "BiLSTM / logit MSE",
                                             "BERT3 / no KD", "BERT3 / vanilla KD", "BERT3 / logit MSE"]
    cells = t[t["task"] == "toy"].set_index("row")
    teacher = cells.loc["teacher"]
    assert teacher["mean"] == pytest.approx(88.8) and teacher["n"] == 1 and pd.isna(teacher["std"])
    for (student, kd), values in scores.items():
        mean, std = _mean_std(values)
        cell = cells.loc[f"{student} / {kd}"]
        assert cell["mean"] == pytest.approx(mean) and cell["n"] == len(values)
        assert cell["std"] == pytest.approx(std, nan_ok=True)
    assert "teacher    fine-tuned  88.8 (1)" in out

    tests = pd.read_csv(tables / "ttests_bilstm.csv").set_index(["a", "b"])
    assert list(tests.index) == [("BiLSTM / logit MSE", "BiLSTM / vanilla KD"), ("BiLSTM / no KD", "BiLSTM / vanilla KD"),
                                 ("BERT3 / logit MSE", "BERT3 / vanilla KD"), ("BERT3 / no KD", "BERT3 / vanilla KD")]
    for (a, b), row in tests.iterrows():
        xa, xb = (scores[tuple(x.split(" / "))] for x in (a, b))  # type: ignore[index]
        if len(xa) < 2:
            assert not row["testable"] and row["n"] == 1
            continue
        res = sps.ttest_rel(xa, xb)
        assert row["p"] == pytest.approx(res.pvalue) and row["t"] == pytest.approx(res.statistic)
    testable = tests[tests["testable"]]
    # one family with bold: per student the best KD row (no KD) against the runner-up (vanilla KD) on toy; the same
    # pairs as two of the tests, counted again (a layout tests only its own pairs: no twins taken)
    bold = [sps.ttest_rel(scores[(s, "no KD")], scores[(s, "vanilla KD")]).pvalue for s in ("BiLSTM", "BERT3")]
    assert list(testable["p_holm"]) == pytest.approx(_holm([*testable["p"], *bold])[:len(testable)])


# ----------------------------------------------------------------------------- selection, FastBERT, nothing to show


@pytest.mark.parametrize("args, layouts, generic", [
    ([], [], ["1", "2", "3", "4"]),
    (["preset=peakd_demo"], ["peakd4", "peakd5"], ["1", "2", "3", "4"]),
    (["preset=peakd_table4", "table=1"], [], ["1"]),
    (["preset=pkd"], [], ["1", "2", "3", "4"]),
    (["table=bilstm"], ["bilstm"], []),
    (["table=fastbert", "preset=peakd_demo"], ["fastbert"], []),
])
def test_layout_selection(args: list[str], layouts: list[str], generic: list[str]) -> None:
    opts = parse_args(["r", *args])
    assert opts.layouts == layouts and opts.tables == generic


def test_no_records_of_the_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_record(tmp_path, task="toy", procedure="finetune", seed=0)
    assert main([str(tmp_path), "table=peakd5"]) == 0
    out = capsys.readouterr().out
    assert "no records of this layout's rows (Student, KD, PTP: SPS-2 / vanilla KD / without PTP;" in out
    assert not (tmp_path / "tables" / "peakd5.csv").exists()


def test_fastbert_speeds_tested_against_speed_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    accuracy = {0.0: [0.90, 0.90, 0.90], 0.5: [0.88, 0.85, 0.87], 1.0: [0.60, 0.66, 0.61]}
    for i, seed in enumerate(SEEDS):
        path = write_record(tmp_path, task="toy", objective="none", procedure="fastbert", init="1", seed=seed,
                            score=0.9, teacher="tiny", teacher_layers=6)
        rec = record.Record.from_dict(record.load_json(path))
        rec.extra["early_exit"] = [{"speed": s, "dev": {"accuracy": a[i]}, "mean_exit_layer": 6.0 - 5 * s,
                                    "speedup": 1.0 + s} for s, a in accuracy.items()]
        record.write_record(path, rec)
    assert main([str(tmp_path), "table=fastbert"]) == 0
    out = capsys.readouterr().out
    assert "== Early exit: speed vs accuracy (FastBERT) ==" in out and "== Table 1" not in out
    tests = pd.read_csv(tmp_path / "tables" / "ttests_early_exit.csv").set_index(["a", "b"])
    assert list(tests.index) == [("speed 0.5", "speed 0"), ("speed 1", "speed 0")]
    p = [sps.ttest_rel([100 * x for x in accuracy[s]], [100 * x for x in accuracy[0.0]]).pvalue for s in (0.5, 1.0)]
    assert list(tests["p"]) == pytest.approx(p) and list(tests["p_holm"]) == pytest.approx(_holm(p))
    summary = pd.read_csv(tmp_path / "tables" / "early_exit.csv").set_index("speed")
    assert summary.loc[0.5, "mean"] == pytest.approx(100 * np.mean(accuracy[0.5]))
    assert (tmp_path / "tables" / "early_exit.png").is_file()


def test_one_label_two_inits_are_two_rows_tested_init_by_init(tmp_path: Path) -> None:
    """Truncated students at two inits get the same labels: two rows named by their init, and each no-KD row is
    tested against the vanilla-KD row of its own init."""
    values = {("1", "finetune"): [0.70, 0.74, 0.71], ("1", "task_specific"): [0.69, 0.70, 0.72],
              ("3", "finetune"): [0.66, 0.69, 0.65], ("3", "task_specific"): [0.71, 0.73, 0.70]}
    for (init, procedure), scores in values.items():
        for seed, value in zip(SEEDS, scores, strict=True):
            write_record(tmp_path, task="toy", procedure=procedure, init=init, seed=seed, score=value, teacher="tiny",
                         teacher_layers=6, teacher_dev={"accuracy": 0.8})
    assert main([str(tmp_path), "table=bilstm"]) == 0
    t = _csv(tmp_path / "tables" / "bilstm.csv")
    assert list(dict.fromkeys(t["row"]))[4:] == ["BERT3 / no KD [init 2,4,6]", "BERT3 / no KD [init 1,2,3]",
                                                 "BERT3 / vanilla KD [init 2,4,6]", "BERT3 / vanilla KD [init 1,2,3]",
                                                 "BERT3 / logit MSE"]
    tests = pd.read_csv(tmp_path / "tables" / "ttests_bilstm.csv")
    tested = tests[tests["n"] > 0].set_index(["a", "b"])
    assert list(tested.index) == [("BERT3 / no KD [init 2,4,6]", "BERT3 / vanilla KD [init 2,4,6]"),
                                  ("BERT3 / no KD [init 1,2,3]", "BERT3 / vanilla KD [init 1,2,3]")]
    p = sps.ttest_rel([100 * x for x in values[("3", "finetune")]], [100 * x for x in values[("3", "task_specific")]])
    assert tested.iloc[1]["p"] == pytest.approx(p.pvalue)


def test_paper_numbers_only_beside_rows_of_the_papers_teacher(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for seed in SEEDS:
        write_record(tmp_path, task="rte", objective="pkd", init="3", seed=seed, score=0.7, teacher="tiny",
                     teacher_layers=6, student="sps", student_layers=6, student_settings=SPS2)
    assert main([str(tmp_path), "table=peakd5"]) == 0
    out = capsys.readouterr().out
    assert "- SPS-2 / PKD / without PTP: teacher has 6 layers, the paper's 12" in out
    comp = pd.read_csv(tmp_path / "tables" / "paper_peakd5.csv").set_index(["method", "task"])
    assert pd.isna(comp.loc[("PeaBERT3-p", "rte"), "ours"]) and comp.loc[("PeaBERT3-p", "rte"), "paper"] == 68.6
    assert comp.loc[("PeaBERT3-p", "avg"), "paper"] == 82.9 and comp.loc[("PeaBERT3", "qnli"), "paper"] == 87.1
