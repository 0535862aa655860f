"""python -m distill_sweep.export: the records of a results directory as runs and metrics tables that pandas reads,
the report's numbers recomputed from them, damaged records left out and named, bad input refused in one line."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import write_demo_like, write_record

from distill_sweep.export.cli import main
from distill_sweep.export.tables import table
from distill_sweep.records.flat import flatten
from distill_sweep.records.record import SCORED_STAGES
from distill_sweep.report.cli import main as report

SLOW = pytest.mark.slow  # the demo's report (seconds of in-process work): `make test-fast` leaves these out
TORN = "toy/att_kl/init-9/seed-1/torn/result.json"
HOLLOW = "toy/att_kl/init-9/seed-2/hollow/result.json"


def _export(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The demo grid's shape (and a failed job), a torn record, and one that says completed with no best; exported,
    and reported (Table 3)."""
    root = tmp_path_factory.mktemp("demo")
    write_demo_like(root)
    (root / TORN).parent.mkdir(parents=True)
    (root / TORN).write_text('{"status": "completed", "task": "toy"')  # cut short by a copy
    hollow = json.loads(next(root.glob("toy/att_kl/init-1/seed-1/*/result.json")).read_text())
    (root / HOLLOW).parent.mkdir(parents=True)
    (root / HOLLOW).write_text(json.dumps({**hollow, "best": None}))
    code, out, err = _export(str(root), "--out", str(root / "export"))
    assert code == 0, err
    with contextlib.redirect_stdout(io.StringIO()):
        assert report([str(root), "paper=false", "table=3", "format=text"]) == 0
    records = {p.parent.relative_to(root).as_posix(): json.loads(p.read_text())
               for p in root.glob("**/result.json") if p.parent.name not in ("torn", "hollow")}
    return {"root": root, "out": out, "err": err, "records": records,
            "runs": pd.read_parquet(root / "export" / "runs.parquet"),
            "metrics": pd.read_parquet(root / "export" / "metrics.parquet")}


@SLOW
def test_one_runs_row_per_record_and_the_damaged_left_out_by_name(demo: dict[str, Any]) -> None:
    runs = demo["runs"]
    assert sorted(runs["job"]) == sorted(demo["records"])  # every readable record, one row each
    assert (runs["status"] == "completed").sum() == 28 and (runs["status"] == "failed").sum() == 1
    lines = demo["err"].splitlines()
    assert len(lines) == 2
    assert any(str(demo["root"] / TORN) in line and "unreadable" in line for line in lines)
    assert any(str(demo["root"] / HOLLOW) in line and "incomplete (no best.dev)" in line for line in lines)
    assert "29 runs (28 completed, 1 failed)" in demo["out"] and "2 left out (listed above on stderr)" in demo["out"]


@SLOW
def test_the_reports_table_3_recomputed_from_the_parquet(demo: dict[str, Any]) -> None:
    """Each cell's mean±std (n) of Table 3, from the metrics table alone (a run's best dev accuracy among its scored
    stages' epochs, as the report takes it) and the runs table's report row and init."""
    runs, metrics = demo["runs"], demo["metrics"]
    dev = metrics[(metrics["metric"] == "dev.accuracy") & metrics["stage"].isin(SCORED_STAGES)]
    best = dev.groupby("job")["value"].max().rename("score") * 100
    done = runs[runs["status"] == "completed"].join(best, on="job")
    cells = done.groupby(["system", "init_label", "task"])["score"].agg(["mean", "std", "count"])
    table3 = pd.read_csv(demo["root"] / "tables" / "table3.csv", dtype={"init": str})
    shown = table3[table3["n"].fillna(0) > 0]
    assert len(shown) == len(cells) == 14
    for _, cell in shown.iterrows():
        mine = cells.loc[(cell["row"], cell["init"], cell["task"])]
        assert mine["count"] == cell["n"]
        assert mine["mean"] == pytest.approx(cell["mean"], rel=0, abs=1e-9)
        assert mine["std"] == pytest.approx(cell["std"], rel=0, abs=1e-9)


@SLOW
def test_metrics_are_every_number_of_every_epoch(demo: dict[str, Any]) -> None:
    metrics = demo["metrics"]
    expected = []
    for job, record in demo["records"].items():
        for i, epoch in enumerate(record["epochs"], 1):
            numbers = {k: v for k, v in flatten({k: v for k, v in epoch.items() if k not in ("stage", "epoch", "step")})
                       .items()}
            expected += [(job, record["config_hash"], epoch["stage"], epoch["epoch"], i, epoch["step"], k, float(v))
                         for k, v in numbers.items()]
    got = [tuple(row) for row in metrics[["job", "config_hash", "stage", "epoch", "global_epoch", "step", "metric",
                                          "value"]].itertuples(index=False)]
    assert sorted(got) == sorted(expected) and len(got) > 100


@SLOW
def test_every_config_key_seed_source_and_summary_is_a_column(demo: dict[str, Any]) -> None:
    runs = demo["runs"].set_index("job")
    for job, record in demo["records"].items():
        row = runs.loc[job]
        for key, value in flatten(record["config"]).items():
            assert row[f"config.{key}"] == value, key
        for source in ("init", "data_order", "dropout", "sampling"):  # records from before the seeds block: the seed
            assert row[f"seeds.{source}"] == record["seed"]
        if record["status"] == "completed":
            assert row["best.dev.accuracy"] == record["best"]["dev"]["accuracy"]
            assert row["wall_time_s"] == record["wall_time_s"]
    assert json.loads(runs.iloc[0]["init.layers"]) == demo["records"][runs.index[0]]["init"]["layers"]


@SLOW
def test_csv_to_a_named_file_and_its_metrics_beside_it(demo: dict[str, Any], tmp_path: Path) -> None:
    code, out, _ = _export(str(demo["root"]), "--out", str(tmp_path / "study.csv"))
    assert code == 0
    runs, metrics = pd.read_csv(tmp_path / "study.csv"), pd.read_csv(tmp_path / "study_metrics.csv")
    assert len(runs) == len(demo["runs"]) and len(metrics) == len(demo["metrics"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["study.csv", "study_metrics.csv"]  # no temp file left
    assert f"{tmp_path / 'study.csv'}: 29 runs" in out


@SLOW
@pytest.mark.parametrize("case", ["not a directory", "no record", "format against the file", "out is a file"])
def test_bad_input_is_one_line_and_writes_nothing(demo: dict[str, Any], tmp_path: Path, case: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "file").write_text("x")
    argv = {"not a directory": [str(tmp_path / "nowhere")],
            "no record": [str(empty)],
            "format against the file": [str(demo["root"]), "--format", "csv", "--out", str(tmp_path / "a.parquet")],
            "out is a file": [str(demo["root"]), "--out", str(tmp_path / "file")]}[case]
    before = sorted(tmp_path.rglob("*"))
    code, out, err = _export(*argv)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("distill_sweep.export: error: ")
    assert sorted(tmp_path.rglob("*")) == before


def test_a_column_holds_one_type() -> None:
    columns = table([{"a": 1, "b": 1, "c": [4, 8]}, {"a": "x", "b": 2.5, "c": None}, {"a": None, "d": True}]).to_pydict()
    assert columns["a"] == ["1", "x", None]  # an integer beside a text: its JSON text
    assert columns["b"] == [1.0, 2.5, None] and isinstance(columns["b"][0], float)  # integers beside floats: floats
    assert columns["c"] == ["[4, 8]", None, None]  # a list: its JSON text
    assert columns["d"] == [None, None, True]


def test_tuning_fields_and_the_pack_are_columns(tmp_path: Path) -> None:
    path = write_record(tmp_path, objective="vanilla_kd", seed=3, score=0.7)
    record = json.loads(path.read_text())
    record.update(pack="pack-0123", tune_trial={"number": 4, "holdout": 0.1, "seed": 0, "holdout_size": 25},
                  seeds={"init": 3, "data_order": 7, "dropout": 3, "sampling": 3, "own": ["data_order"]})
    path.write_text(json.dumps(record))
    assert _export(str(tmp_path), "--out", str(tmp_path / "x"))[0] == 0
    (row,) = pd.read_parquet(tmp_path / "x" / "runs.parquet").to_dict("records")
    assert row["pack"] == "pack-0123" and row["tune_trial.number"] == 4 and row["tune_trial.holdout"] == 0.1
    assert row["seeds.data_order"] == 7 and row["seeds.init"] == 3 and row["seeds.own"] == '["data_order"]'
    assert row["system"] is None  # a tuning trial: the report leaves it out


def test_records_damaged_in_their_numbers_are_left_out_by_name_not_a_traceback(tmp_path: Path) -> None:
    good = write_record(tmp_path, objective="att_kl", seed=0, score=0.7)
    damaged = {}
    for seed, change in ((1, {"seeds": {"init": 10**30, "own": ["init"]}}), (2, "epoch"), (3, "step")):
        path = write_record(tmp_path, objective="att_kl", seed=seed, score=0.7)
        d = json.loads(path.read_text())
        if isinstance(change, dict):
            d.update(change)
        else:
            d["epochs"][0][change] = "first"
        path.write_text(json.dumps(d))
        damaged[seed] = path
    code, out, err = _export(str(tmp_path), "--out", str(tmp_path / "x"))
    assert code == 0 and "Traceback" not in err
    runs = pd.read_parquet(tmp_path / "x" / "runs.parquet")
    for seed in (2, 3):  # an epoch's coordinates that are no integers: the record is left out, named
        (line,) = [line for line in err.splitlines() if f"{damaged[seed]}: " in line]
        assert "epochs[0]" in line and "'first' is not an integer" in line
    assert str(good.parent.relative_to(tmp_path)) in set(runs["job"])
    assert not {str(damaged[s].parent.relative_to(tmp_path)) for s in (2, 3)} & set(runs["job"])
    # a seed past int64 (left out by the record's reader where it checks seeds; else its column is text)
    assert str(damaged[1]) in err or runs["seeds.init"].dtype != "int64"
