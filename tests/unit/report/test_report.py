"""distill_sweep.report: table layout, bolding, partial sweeps, the CLI end to end on fabricated records."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
from helpers import write_record
from scipy import stats as sps

from distill_sweep.analysis import frames, stats
from distill_sweep.analysis.paper import GLUE_TASKS
from distill_sweep.report import render, tables
from distill_sweep.report.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _table(root: Path, *, by_init: bool = False, metric: str = "header") -> tables.Table:
    records = frames.load_store(root).records
    sc, _ = frames.scores(records, metric)
    agg = stats.aggregate(sc)
    return tables.build_table("t", "T", records, agg, stats.row_averages(agg), by_init, metric, scores=sc)


# ----------------------------------------------------------------------------- formatting


def test_best_in_column_bolding(tmp_path: Path) -> None:
    """Bold where the best beats the runner-up by a paired t-test after Holm (3 seeds, a steady 10-point lead);
    RTE's lead is clear, toy's 0.1-point lead over noisy seeds is not; the plain-text mark is a dagger, not
    "*" (which means significant after Holm in the HTML)."""
    for seed, noise in enumerate([0.0, 0.01, -0.01]):
        write_record(tmp_path, task="rte", objective="vanilla_kd", seed=seed, score=0.60 + noise)
        write_record(tmp_path, task="rte", objective="att_kl", seed=seed, score=0.70 + noise + 0.001 * seed)
        write_record(tmp_path, task="toy", objective="vanilla_kd", seed=seed, score=0.90 + [0.0, 0.05, -0.04][seed])
        write_record(tmp_path, task="toy", objective="att_kl", seed=seed, score=0.90 + [0.03, -0.05, 0.0][seed])
    table = _table(tmp_path)
    assert [r.labels[0] for r in table.rows] == ["vanilla_kd", "att_kl"]  # paper order
    kd, kl = table.rows
    assert kl.cells["rte"].bold and not kd.cells["rte"].bold
    assert not kd.cells["toy"].bold and not kl.cells["toy"].bold
    assert render.fmt_cell(kl.cells["rte"], "markdown").startswith("**70.1±")
    assert render.fmt_cell(kl.cells["rte"], "terminal").endswith("† (3)")
    assert "*" not in render.fmt_cell(kl.cells["rte"], "terminal")
    notes = render.table_footnotes(table, 1, "best")
    assert any("significantly better than the runner-up" in n and "Holm" in n for n in notes)


def test_bolding_single_candidates_and_no_scores() -> None:
    def row(name: str, mean: float, group: str = "") -> tables.Row:
        return tables.Row((name,), group, {"rte": tables.Cell(mean, 1.0, 4)}, system=name)

    scores = pd.DataFrame([(n, "rte", s, v + s) for n, v in (("a", 50.0), ("b", 60.0)) for s in range(4)],
                          columns=["system", "task", "seed", "value"])
    lone = [row("a", 50.0, "g1"), row("b", 60.0, "g2")]  # one candidate per group: nothing bold
    tables.mark_best(lone, ["rte"], tables.score_lookup(scores, lambda r: (r.system,), ("system",), ("rte",)))
    assert not any(r.cells["rte"].bold for r in lone)
    rows = [row("a", 80.04), row("b", 80.01), row("c", 79.0)]  # no scores to test with: nothing bold
    assert "no best marked" in tables.mark_best(rows, ["rte"])
    assert not any(r.cells["rte"].bold for r in rows)


def test_partial_sweep_missing_cell_and_failed(tmp_path: Path) -> None:
    write_record(tmp_path, task="rte", objective="att_kl", seed=0, score=0.7)
    write_record(tmp_path, task="rte", objective="att_kl", seed=1, score=0.72)
    write_record(tmp_path, task="toy", objective="att_kl", seed=0, score=0.9)
    # hid_seq: only a failed rte run -> row present, cells missing with n = 0
    write_record(tmp_path, task="rte", objective="hid_seq", seed=0, status="failed", error="ValueError: bad\nstack")
    table = _table(tmp_path)
    headers, rows = render.table_rows(table, "terminal")
    assert headers == ["Objective", "RTE (acc)", "toy (acc)", "Avg"]
    by_obj = {r[0]: r for r in rows}
    assert by_obj["hid_seq"][1:] == ["— (0)", "— (0)", "—"]
    assert by_obj["att_kl"][1] == "71.0±1.41 (2)"
    assert by_obj["att_kl"][2] == "90.0 (1)"  # one seed: no std with ddof=1
    notes = render.table_footnotes(table, ddof=1, selection="best")
    assert any("missing QNLI" in n for n in notes)


def test_latex_booktabs_and_escaping(tmp_path: Path) -> None:
    for seed in range(2):
        for init in ("1", "2"):
            write_record(tmp_path, task="cola", objective="att_kl_val_kl", init=init, seed=seed,
                         score=0.5 + seed / 10)
    write_record(tmp_path, task="cola", objective="att_kl_val_kl", init="3", seed=0, score=0.5)
    tex = render.render_latex(_table(tmp_path, by_init=True), ddof=1, selection="best")
    for rule in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}{llrr}"):
        assert rule in tex
    assert r"att\_kl\_val\_kl" in tex
    assert "(1)" in tex and "(2)" not in tex  # n only where it differs from the modal n
    assert "MCC" in tex


# ----------------------------------------------------------------------------- CLI


def _glue_sweep(root: Path) -> None:
    """Two objectives x all 7 GLUE tasks x 3 seeds at init 1, plus init 3 for vanilla_kd, one failure."""
    for t, task in enumerate(GLUE_TASKS):
        for seed in range(3):
            write_record(root, task=task, objective="vanilla_kd", seed=seed, score=0.60 + 0.01 * t + 0.003 * seed)
            write_record(root, task=task, objective="att_kl", seed=seed, score=0.70 + 0.01 * t + 0.001 * seed ** 2)
            write_record(root, task=task, objective="vanilla_kd", init="3", seed=seed, score=0.75 + 0.002 * seed)
    write_record(root, task="rte", objective="hid_seq", seed=0, status="failed", error="CUDA OOM\ntraceback")
    write_record(root, task="rte", objective="hid_seq", seed=1, status="running")


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_cli_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _glue_sweep(tmp_path)
    half = tmp_path / "qnli" / "att_kl" / "init-1" / "seed-9" / "0000000000" / "result.json"
    half.parent.mkdir(parents=True)
    half.write_text('{"schema_version": 1, "sta', encoding="utf-8")

    assert main([str(tmp_path)]) == 0
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
    rc = main([str(tmp_path), "table=1", "metric=paper", "which=final", "ddof=0",
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
    fake = types.ModuleType("distill_sweep.sweep.compose")
    fake.expected_jobs = lambda name: [  # type: ignore[attr-defined]
        {"task": "toy", "objective": "vanilla_kd", "init_spec": "1", "seed": s} for s in range(4)]
    monkeypatch.setitem(sys.modules, "distill_sweep.sweep.compose", fake)
    assert main([str(tmp_path), "preset=demo", "table=1"]) == 0
    out = capsys.readouterr().out
    assert "4 expected jobs: 1 completed, 1 failed, 2 missing (1 of them running, 1 not started)" in out
    assert "running: toy / vanilla_kd / init 1 / seed 2" in out
    assert "missing: toy / vanilla_kd / init 1 / seed 3" in out


def test_cli_preset_without_grid_module(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    write_record(tmp_path, task="toy", seed=0)
    monkeypatch.setitem(sys.modules, "distill_sweep.sweep.compose", None)  # import raises ImportError
    assert main([str(tmp_path), "preset=demo", "table=1"]) == 0
    assert "grid comparison skipped" in capsys.readouterr().out


@pytest.mark.parametrize("args, says", [
    (["table=9"], "table must be one of 1|2|3|4"), (["metric=f1"], "metric must be"),
    (["which=last"], "which must be"), (["ddof=-1"], "ddof must be a non-negative integer"),
    (["ddof=1.5"], "ddof must be an integer, got '1.5'"), (["paper=maybe"], "paper must be true or false"),
    (["alpha=2"], "alpha must be a number in (0, 1)"), (["alpha=abc"], "alpha must be a number"),
    (["colour=red"], "unknown argument 'colour'"), (["hydra.run.dir=x"], "unknown argument"),
    (["a", "b"], "at most one results_dir"), (["--verbose"], "unknown option '--verbose'"),
    (["table=1,3"], "not a sweep"), (["out=/a=b"], "cannot parse 'out=/a=b'"),
    (["results_dir=null"], "results_dir must be a string"), (["table=${x}"], "interpolations"),
    (["ci=normal"], "ci must be one of t|bootstrap|bca, got 'normal'"),
])
def test_cli_bad_args_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                             says: str) -> None:
    argv = args if args == ["a", "b"] else [str(tmp_path), *args]
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("distill_sweep.report: error:")
    assert says in lines[0]
    assert captured.out == ""


def test_a_number_is_converted_to_the_options_declared_type_before_omegaconf_sees_it() -> None:
    # OmegaConf 2.4 warns (FutureWarning) where 2.3 converted silently: the report converts first
    from distill_sweep.report.cli import _as_declared

    assert _as_declared("table", 9) == "9" and _as_declared("preset", 3) == "3"  # str, str | None
    alpha = _as_declared("alpha", 2)
    assert alpha == 2.0 and type(alpha) is float
    assert type(_as_declared("ddof", 1)) is int and _as_declared("paper", True) is True
    assert _as_declared("alpha", "abc") == "abc"  # not a number: OmegaConf refuses it, in one line


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_cli_hydra_override_grammar(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Overrides parse as in the main command: `+key=`, quoted values, `~key` (back to the default)."""
    write_record(tmp_path, task="toy", seed=0)
    fake = types.ModuleType("distill_sweep.sweep.compose")
    fake.expected_jobs = lambda name: [{"task": "toy", "objective": "vanilla_kd", "init_spec": "1", "seed": 0}]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "distill_sweep.sweep.compose", fake)
    out_dir = tmp_path / "with space"
    rc = main([f"results_dir={tmp_path}", "+preset=paper_table3", "paper=false", "alpha=0.01", "table=1",
               f"out='{out_dir}'"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "alpha=0.01" in out and "Grid status versus preset 'paper_table3'" in out
    assert "Comparison with the paper" not in out
    assert (out_dir / "table1.md").is_file()
    assert main([str(tmp_path), "table=1", f"out={tmp_path / 'x'}", "~out", "ddof=0"]) == 0
    assert (tmp_path / "tables" / "table1.md").is_file() and not (tmp_path / "x").exists()


def test_cli_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m distill_sweep.report") and "which=best|primary|final|max" in out


def test_cli_missing_results_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]


def test_cli_empty_results_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 0
    assert "nothing to report" in capsys.readouterr().out
    assert not (tmp_path / "tables").exists()


# ----------------------------------------------------------------------------- rows, tests, paper, epochs


def test_two_teachers_are_two_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both bottom students copy layers 1,2,3: only the teacher tells the rows apart."""
    for seed in range(2):
        write_record(tmp_path, task="rte", objective="hid_seq", init="3", seed=seed, score=0.60 + 0.02 * seed,
                     teacher="tiny", teacher_layers=6)
        write_record(tmp_path, task="rte", objective="hid_seq", init="3", seed=seed, score=0.70)
    assert main([str(tmp_path), "table=3", "paper=false"]) == 0
    out = capsys.readouterr().out
    assert "duplicate" not in out
    t3 = pd.read_csv(tmp_path / "tables" / "table3.csv", dtype={"init": str})
    rte = t3[t3["task"] == "rte"].set_index("teacher")
    assert set(rte["init"]) == {"1,2,3"}
    assert len(rte) == 2 and set(rte["objective"]) == {"hid_seq"}
    (tiny,) = [t for t in rte.index if t.startswith("tiny#")]
    (roberta,) = [t for t in rte.index if t.startswith("roberta_base#")]
    assert rte.loc[tiny, "mean"] == pytest.approx(61.0) and rte.loc[roberta, "mean"] == pytest.approx(70.0)
    assert rte.loc[tiny, "row"] == f"hid_seq [teacher {tiny}]"
    assert f"hid_seq [teacher {tiny}]" in out and f"teacher {tiny}: 6 layers" in out
    # teachers built from a config (no name_or_path): said so, not "name_or_path nan"
    assert f"teacher {tiny}: 6 layers, hidden 32, built from its config" in out and "nan" not in out.split("== ")[0]


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_no_kd_row_in_tables_and_tests(tmp_path: Path) -> None:
    kd = {"1": [0.70, 0.72, 0.75], "3": [0.80, 0.81, 0.85]}
    ft = {"1": [0.60, 0.65, 0.66], "3": [0.70, 0.70, 0.74]}
    for init in ("1", "3"):
        for seed in range(3):
            write_record(tmp_path, task="rte", objective="vanilla_kd", init=init, seed=seed, score=kd[init][seed])
            write_record(tmp_path, task="rte", procedure="finetune", init=init, seed=seed, score=ft[init][seed])
    assert main([str(tmp_path), "paper=false"]) == 0
    tables_dir = tmp_path / "tables"
    t1 = pd.read_csv(tables_dir / "table1.csv", dtype={"init": str})
    assert list(t1[t1["task"] == "rte"]["row"]) == ["no KD (fine-tuning)", "vanilla_kd"]
    t3 = pd.read_csv(tables_dir / "table3.csv", dtype={"init": str})
    no_kd = t3[(t3["row"] == "no KD (fine-tuning)") & (t3["task"] == "rte")].set_index("init")
    assert no_kd.loc["1,2,3", "mean"] == pytest.approx(100 * sum(ft["3"]) / 3)
    assert set(no_kd["procedure"]) == {"finetune"} and set(no_kd["objective"]) == {"none"}
    tests1 = pd.read_csv(tables_dir / "ttests_table1.csv")
    (pair,) = tests1.to_dict("records")
    assert (pair["a"], pair["b"]) == ("no KD (fine-tuning)", "vanilla_kd")
    res = sps.ttest_rel([100 * x for x in ft["1"]], [100 * x for x in kd["1"]])
    assert pair["t"] == pytest.approx(res.statistic) and pair["p"] == pytest.approx(res.pvalue)
    tests3 = pd.read_csv(tables_dir / "ttests_table3.csv")
    assert list(tests3["system"]) == ["no KD (fine-tuning)", "vanilla_kd"]
    res3 = sps.ttest_rel([100 * x for x in ft["1"]], [100 * x for x in ft["3"]])
    assert tests3.iloc[0]["p"] == pytest.approx(res3.pvalue)


def test_holm_line_counts_what_was_tested(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """4 objectives, 6 pairs: att_kl and att_mse share 3 seeds; hid_seq and hid_cls have one seed, so every
    pair with them has 1 matched pair and cannot be tested."""
    for seed, (a, b) in enumerate([(0.70, 0.60), (0.72, 0.61), (0.75, 0.66)]):
        write_record(tmp_path, task="rte", objective="att_kl", seed=seed, score=a)
        write_record(tmp_path, task="rte", objective="att_mse", seed=seed, score=b)
    write_record(tmp_path, task="rte", objective="hid_seq", seed=0, score=0.5)
    write_record(tmp_path, task="rte", objective="hid_cls", seed=0, score=0.4)
    assert main([str(tmp_path), "table=1", "paper=false"]) == 0
    out = capsys.readouterr().out
    assert "Holm correction over the 1 testable pair of 6; not testable: " in out
    assert "hid_cls vs hid_seq (only 1 matched pair(s))" in out
    assert "over the 6 tests" not in out
    assert "NOT significant at alpha=0.05 (raw p, as in the paper), of the 1 testable: " in out
    p = sps.ttest_rel([70.0, 72.0, 75.0], [60.0, 61.0, 66.0]).pvalue
    tests = pd.read_csv(tmp_path / "tables" / "ttests_table1.csv")
    tested = tests[tests["testable"]]
    assert len(tested) == 1 and tested.iloc[0]["p_holm"] == pytest.approx(p)  # m = 1: Holm changes nothing


def test_no_testable_pair_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_record(tmp_path, task="rte", objective="att_kl", seed=0, score=0.7)
    write_record(tmp_path, task="rte", objective="att_mse", seed=0, score=0.6)
    assert main([str(tmp_path), "table=1", "paper=false"]) == 0
    out = capsys.readouterr().out
    assert "over the 0 testable pairs of 1" in out
    assert "no pair could be tested" in out and "NOT significant" not in out


def test_two_pairs_get_a_caution(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for seed, (a, b) in enumerate([(0.80, 0.78), (0.82, 0.81)]):
        write_record(tmp_path, task="rte", objective="att_kl", seed=seed, score=a)
        write_record(tmp_path, task="rte", objective="att_mse", seed=seed, score=b)
    assert main([str(tmp_path), "table=1", "paper=false"]) == 0
    out = capsys.readouterr().out
    assert "caution: 1 test(s) rest on fewer than 3 pairs (under 2 degrees of freedom)" in out
    assert "att_mse vs att_kl (2 pairs)" in out  # the paper's order of objectives
    row = pd.read_csv(tmp_path / "tables" / "ttests_table1.csv").iloc[0]
    assert row["p"] == pytest.approx(sps.ttest_rel([78.0, 81.0], [80.0, 82.0]).pvalue)
    assert "caution" in row["note"] and bool(row["few_pairs"])


def test_paper_comparison_is_like_with_like(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 6-layer teacher's bottom student (layers 1,2,3) is not set against the paper's RoBERTa-base 1,2,3."""
    for seed in range(2):
        write_record(tmp_path, task="qnli", objective="hid_seq", init="3", seed=seed, score=0.80,
                     teacher="tiny", teacher_layers=6)
    assert main([str(tmp_path), "table=3"]) == 0
    out = capsys.readouterr().out
    assert "no cell in common with the paper" in out
    assert "- hid_seq [1,2,3]: teacher has 6 layers, the paper's 12" in out
    assert not (tmp_path / "tables" / "paper_table3.csv").exists()
    assert " vs " not in out.split("Comparison with the paper")[1]  # no delta printed anywhere


def test_metric_paper_selects_the_epoch_by_the_shown_metric(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """CoLA: the MCC-best epoch has accuracy 68.9 (below the 69.1 majority baseline); the accuracy-best
    epoch has 71.2, and metric=paper shows accuracy."""
    epochs = [
        {"stage": "intermediate", "epoch": 1, "step": 1, "train_loss": 1.0, "dev": {"accuracy": 0.75, "mcc": 0.3}},
        {"stage": "prediction", "epoch": 1, "step": 2, "train_loss": 1.0, "dev": {"accuracy": 0.689, "mcc": 0.12}},
        {"stage": "prediction", "epoch": 2, "step": 3, "train_loss": 1.0, "dev": {"accuracy": 0.712, "mcc": 0.08}},
    ]
    write_record(tmp_path, task="cola", objective="hid_seq", score={"accuracy": 0.689, "mcc": 0.12},
                 final={"accuracy": 0.712, "mcc": 0.08}, epochs=epochs)
    assert main([str(tmp_path), "table=1", "metric=paper", "paper=false"]) == 0
    out = capsys.readouterr().out
    assert "epoch selection: each metric at the run's best epoch by that same metric" in out
    t1 = pd.read_csv(tmp_path / "tables" / "table1.csv")
    assert t1[t1["task"] == "cola"].iloc[0]["mean"] == pytest.approx(71.2)
    assert main([str(tmp_path), "table=1", "metric=header", "paper=false"]) == 0
    capsys.readouterr()
    t1 = pd.read_csv(tmp_path / "tables" / "table1.csv")
    assert t1[t1["task"] == "cola"].iloc[0]["mean"] == pytest.approx(12.0)  # MCC at the MCC-best epoch
    assert main([str(tmp_path), "table=1", "metric=paper", "which=primary", "paper=false"]) == 0
    assert "by its primary metric" in capsys.readouterr().out
    t1 = pd.read_csv(tmp_path / "tables" / "table1.csv")
    assert t1[t1["task"] == "cola"].iloc[0]["mean"] == pytest.approx(68.9)


def test_incomplete_completed_record_is_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_record(tmp_path, task="toy", seed=0)
    bare = tmp_path / "toy" / "vanilla_kd" / "init-1" / "seed-1" / "0123456789" / "result.json"
    bare.parent.mkdir(parents=True)
    bare.write_text(json.dumps({"status": "completed"}))
    assert main([str(tmp_path), "table=1", "paper=false"]) == 0
    captured = capsys.readouterr()
    assert "Records left out (1)" in captured.out
    assert "status completed but incomplete (task missing or not a string)" in captured.out
    assert "skipped" in captured.err and str(bare) in captured.err


def test_two_seed_toy_grid_prints_no_verdict_the_tests_do_not_support(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Two seeds, att_kl above vanilla_kd on both (eps_min = 0, the old rule's 'almost stochastically better'),
    by 2.75 points at p = 0.17: no ASO verdict (none is possible at 2 seeds, and the text says why), no best
    marked, d with its n=2 caution."""
    for seed, (kd, kl) in enumerate(((0.700, 0.720), (0.710, 0.745))):
        write_record(tmp_path, task="rte", objective="vanilla_kd", seed=seed, score=kd)
        write_record(tmp_path, task="rte", objective="att_kl", seed=seed, score=kl)
    assert main([str(tmp_path), "table=1", "paper=false", "format=text"]) == 0
    out = capsys.readouterr().out
    assert "almost stochastically better (ASO, calibrated threshold, beside a pair the t-test calls): none" in out
    assert "no ASO verdict for 1 pair(s) with too few matched pairs" in out and "at least 4 matched pairs" in out
    assert not pd.read_csv(tmp_path / "tables" / "table1.csv")["best"].any()  # nothing marked best
    assert "70.5±0.71 (2)" in out and "73.2±1.77 (2)" in out  # unmarked (once: att_kl's with "*")
    assert "(n=2)" in out
    tests = pd.read_csv(tmp_path / "tables" / "ttests_table1.csv")
    assert min(tests["aso_ab"].min(), tests["aso_ba"].min()) == 0.0  # every att_kl run above every vanilla_kd run
    assert tests["aso_better"].isna().all()  # empty verdicts: blank cells in the CSV
