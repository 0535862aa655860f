"""distill_sweep.report: table layout, bolding, partial sweeps, the CLI end to end on fabricated records."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
from test_stats import write_record  # the record fabricator (contract schema + store layout)

from distill_sweep import report, stats

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
REPO = Path(__file__).resolve().parents[1]


def _table(root: Path, *, by_init: bool = False, metric: str = "header") -> report.Table:
    store = stats.load_store(root)
    sc, _ = stats.scores(store.records, metric)
    agg = stats.aggregate(sc)
    return report.build_table("t", "T", store.records, agg, stats.row_averages(agg), by_init, metric)


# ----------------------------------------------------------------------------- formatting


def test_best_in_column_bolding(tmp_path: Path) -> None:
    for seed in range(2):
        write_record(tmp_path, task="rte", objective="vanilla_kd", seed=seed, score=0.60)
        write_record(tmp_path, task="rte", objective="att_kl", seed=seed, score=0.70)
        write_record(tmp_path, task="toy", objective="vanilla_kd", seed=seed, score=0.90)
        write_record(tmp_path, task="toy", objective="att_kl", seed=seed, score=0.80)
    table = _table(tmp_path)
    assert [r.labels[0] for r in table.rows] == ["vanilla_kd", "att_kl"]  # paper order
    kd, kl = table.rows
    assert kl.cells["rte"].bold and not kd.cells["rte"].bold
    assert kd.cells["toy"].bold and not kl.cells["toy"].bold
    assert report.fmt_cell(kl.cells["rte"], "markdown") == "**70.0±0.00** (2)"
    assert report.fmt_cell(kl.cells["rte"], "latex") == r"\textbf{70.0$\pm$0.00} (2)"
    assert report.fmt_cell(kd.cells["rte"], "terminal") == "60.0±0.00 (2)"
    assert report.fmt_cell(kl.cells["rte"], "terminal") == "70.0±0.00* (2)"


def test_bolding_ties_and_single_candidates() -> None:
    def row(name: str, mean: float, group: str = "") -> report.Row:
        return report.Row((name,), group, {"rte": report.Cell(mean, 1.0, 4)})

    rows = [row("a", 80.04), row("b", 80.01), row("c", 79.0)]
    report.mark_best(rows, ["rte"])
    assert [r.cells["rte"].bold for r in rows] == [True, True, False]  # both print as 80.0
    lone = [row("a", 50.0, "g1"), row("b", 60.0, "g2")]  # one candidate per group: nothing bold
    report.mark_best(lone, ["rte"])
    assert not any(r.cells["rte"].bold for r in lone)


def test_partial_sweep_missing_cell_and_failed(tmp_path: Path) -> None:
    write_record(tmp_path, task="rte", objective="att_kl", seed=0, score=0.7)
    write_record(tmp_path, task="rte", objective="att_kl", seed=1, score=0.72)
    write_record(tmp_path, task="toy", objective="att_kl", seed=0, score=0.9)
    # hid_seq: only a failed rte run -> row present, cells missing with n = 0
    write_record(tmp_path, task="rte", objective="hid_seq", seed=0, status="failed", error="ValueError: bad\nstack")
    table = _table(tmp_path)
    headers, rows = report.table_rows(table, "terminal")
    assert headers == ["Objective", "RTE (acc)", "toy (acc)", "Avg"]
    by_obj = {r[0]: r for r in rows}
    assert by_obj["hid_seq"][1:] == ["— (0)", "— (0)", "—"]
    assert by_obj["att_kl"][1] == "71.0±1.41 (2)"
    assert by_obj["att_kl"][2] == "90.0 (1)"  # one seed: no std with ddof=1
    notes = report.table_footnotes(table, ddof=1, which="best")
    assert any("missing QNLI" in n for n in notes)


def test_latex_booktabs_and_escaping(tmp_path: Path) -> None:
    for seed in range(2):
        for init in ("1", "2"):
            write_record(tmp_path, task="cola", objective="att_kl_val_kl", init=init, seed=seed,
                         score=0.5 + seed / 10)
    write_record(tmp_path, task="cola", objective="att_kl_val_kl", init="3", seed=0, score=0.5)
    tex = report.render_latex(_table(tmp_path, by_init=True), ddof=1, which="best")
    for rule in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}{llrr}"):
        assert rule in tex
    assert r"att\_kl\_val\_kl" in tex
    assert "(1)" in tex and "(2)" not in tex  # n only where it differs from the modal n
    assert "MCC" in tex


# ----------------------------------------------------------------------------- CLI


def _glue_sweep(root: Path) -> None:
    """Two objectives x all 7 GLUE tasks x 3 seeds at init 1, plus init 3 for vanilla_kd, one failure."""
    for t, task in enumerate(stats.GLUE_TASKS):
        for seed in range(3):
            write_record(root, task=task, objective="vanilla_kd", seed=seed, score=0.60 + 0.01 * t + 0.003 * seed)
            write_record(root, task=task, objective="att_kl", seed=seed, score=0.70 + 0.01 * t + 0.001 * seed ** 2)
            write_record(root, task=task, objective="vanilla_kd", init="3", seed=seed, score=0.75 + 0.002 * seed)
    write_record(root, task="rte", objective="hid_seq", seed=0, status="failed", error="CUDA OOM\ntraceback")
    write_record(root, task="rte", objective="hid_seq", seed=1, status="running")


def test_cli_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _glue_sweep(tmp_path)
    half = tmp_path / "qnli" / "att_kl" / "init-1" / "seed-9" / "0000000000" / "result.json"
    half.parent.mkdir(parents=True)
    half.write_text('{"schema_version": 1, "sta', encoding="utf-8")

    assert report.main([str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "skipped" in err and "result.json" in err
    assert "63 completed, 1 failed, 1 running" in out
    assert "rte / hid_seq / init 1 / seed 0: CUDA OOM" in out
    assert "Comparison with the paper's Table 1" in out
    assert "NOT significant" in out

    tables = tmp_path / "tables"
    for name in ("table1.md", "table1.tex", "table1.csv", "table3.md", "table3.tex", "table3.csv",
                 "ttests_table1.csv", "ttests_table3.csv", "paper_table1.csv", "paper_table3.csv",
                 "curves.png", "curves_inits.png", "report.md"):
        assert (tables / name).is_file(), name
    tex = (tables / "table1.tex").read_text()
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert (tables / "curves.png").read_bytes()[:8] == PNG_MAGIC
    assert "**" in (tables / "table1.md").read_text()

    t1 = pd.read_csv(tables / "table1.csv")
    kl_avg = t1[(t1["objective"] == "att_kl") & (t1["task"] == "avg")].iloc[0]
    # att_kl: task t has seeds 0.70+0.01t + {0, 0.001, 0.004} -> mean over tasks 73.0 + 0.1667
    assert kl_avg["mean"] == pytest.approx(73.0 + 100 * 0.005 / 3)
    assert bool(kl_avg["best"])
    hid = t1[(t1["objective"] == "hid_seq") & (t1["task"] == "rte")].iloc[0]
    assert hid["n"] == 0 and pd.isna(hid["mean"])

    comp = pd.read_csv(tables / "paper_table3.csv", dtype={"init_label": str})
    row = comp[(comp["objective"] == "vanilla_kd") & (comp["init_label"] == "1,2,3")
               & (comp["task"] == "qnli")].iloc[0]
    assert row["paper"] == pytest.approx(86.2) and row["ours"] == pytest.approx(75.2)
    assert "avg" in set(comp["task"])

    tests = pd.read_csv(tables / "ttests_table1.csv")
    assert set(zip(tests["a"], tests["b"], strict=True)) == {("vanilla_kd", "att_kl")}
    assert tests.iloc[0]["n"] == 21  # 7 tasks x 3 seeds


def test_cli_toy_only_and_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for seed in range(2):
        write_record(tmp_path, task="toy", objective="vanilla_kd", seed=seed, score=0.6 + seed / 100)
        write_record(tmp_path, task="toy", objective="att_mse", seed=seed, score=0.7 + seed / 50)
    out_dir = tmp_path / "elsewhere"
    rc = report.main([str(tmp_path), "table=1", "metric=paper", "which=final", "ddof=0",
                      "paper=false", f"out={out_dir}"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "toy (acc)" in out and "60.5±0.50 (2)" in out  # ddof=0 over 60, 61
    assert "ddof=0" in out and "which=final" in out
    assert "Comparison with the paper" not in out
    assert (out_dir / "table1.md").is_file() and not (out_dir / "table3.md").exists()
    assert (out_dir / "curves.png").read_bytes()[:8] == PNG_MAGIC


def test_cli_preset_grid(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    write_record(tmp_path, task="toy", seed=0)
    write_record(tmp_path, task="toy", seed=1, status="failed", error="boom")
    write_record(tmp_path, task="toy", seed=2, status="running")
    fake = types.ModuleType("distill_sweep.grid")
    fake.expected_jobs = lambda name: [  # type: ignore[attr-defined]
        {"task": "toy", "objective": "vanilla_kd", "init_spec": "1", "seed": s} for s in range(4)]
    monkeypatch.setitem(sys.modules, "distill_sweep.grid", fake)
    assert report.main([str(tmp_path), "preset=demo", "table=1"]) == 0
    out = capsys.readouterr().out
    assert "4 expected jobs: 1 completed, 1 failed, 2 missing (1 of them running, 1 not started)" in out
    assert "running: toy / vanilla_kd / init 1 / seed 2" in out
    assert "missing: toy / vanilla_kd / init 1 / seed 3" in out


def test_cli_preset_without_grid_module(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    write_record(tmp_path, task="toy", seed=0)
    monkeypatch.setitem(sys.modules, "distill_sweep.grid", None)  # import raises ImportError
    assert report.main([str(tmp_path), "preset=demo", "table=1"]) == 0
    assert "grid comparison skipped" in capsys.readouterr().out


@pytest.mark.parametrize("args", [
    ["table=2"], ["metric=f1"], ["which=last"], ["ddof=-1"], ["paper=maybe"], ["alpha=2"],
    ["colour=red"], ["a", "b"], ["--verbose"],
])
def test_cli_bad_args_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    argv = args if args == ["a", "b"] else [str(tmp_path), *args]
    assert report.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("distill_sweep.report: error:")
    assert captured.out == ""


def test_cli_missing_results_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report.main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]


def test_cli_empty_results_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report.main([str(tmp_path)]) == 0
    assert "nothing to report" in capsys.readouterr().out
    assert not (tmp_path / "tables").exists()


def test_module_entry_point(tmp_path: Path) -> None:
    """The real `python -m distill_sweep.report` (one subprocess: the rest call main() directly)."""
    write_record(tmp_path, task="toy", seed=0)
    ok = subprocess.run([sys.executable, "-m", "distill_sweep.report", str(tmp_path), "table=1"],
                        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "tables" / "table1.tex").is_file()
    bad = subprocess.run([sys.executable, "-m", "distill_sweep.report", str(tmp_path), "table=9"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
