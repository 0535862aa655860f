"""distill_sweep.analysis.frames: a results directory read through Record into frames; systems; epoch selection."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from helpers import V1_STORE, sha8, write_record

from distill_sweep.analysis import frames

# ----------------------------------------------------------------------------- loading


def test_load_records_columns_and_partial_files(tmp_path: Path) -> None:
    write_record(tmp_path, seed=0, score=0.8)
    write_record(tmp_path, seed=1, status="failed", error="RuntimeError: boom\nmore")
    half = tmp_path / "toy" / "vanilla_kd" / "init-1" / "seed-7" / "abc" / "result.json"
    half.parent.mkdir(parents=True)
    half.write_text('{"status": "compl', encoding="utf-8")  # a half-written file
    nokeys = tmp_path / "x" / "result.json"
    nokeys.parent.mkdir()
    nokeys.write_text('{"status": "running"}', encoding="utf-8")

    with pytest.warns(UserWarning, match="skipped"):
        df = frames.load_records(tmp_path)
    assert len(df) == 2
    assert set(df["status"]) == {"completed", "failed"}
    row = df[df["status"] == "completed"].iloc[0]
    assert row["init_layers"] == "4,8,12" and row["init_spec"] == "1" and row["init_name"] == "skip"
    assert row["dev.accuracy"] == pytest.approx(0.8)
    assert row["primary"] == pytest.approx(0.8)
    assert row["system"] == "vanilla_kd" and row["procedure"] == "task_specific"
    st = frames.load_store(tmp_path)
    assert len(st.skipped) == 2
    assert any("unreadable" in s for s in st.skipped) and any("missing keys" in s for s in st.skipped)
    assert len(st.curves) == 2  # vanilla_kd: 2 prediction epochs of the completed run only


def test_load_records_empty_dir(tmp_path: Path) -> None:
    df = frames.load_records(tmp_path)
    assert df.empty and "status" in df.columns and "system" in df.columns


def test_incomplete_completed_record_is_left_out_with_the_reason(tmp_path: Path) -> None:
    """The report's side of the one completeness rule (the sweeper's is in test_records)."""
    write_record(tmp_path, seed=0)
    bare = tmp_path / "toy" / "vanilla_kd" / "init-1" / "seed-1" / "0123456789" / "result.json"
    bare.parent.mkdir(parents=True)
    bare.write_text(json.dumps({"status": "completed", "task": "toy", "objective": "vanilla_kd", "seed": 1}))
    st = frames.load_store(tmp_path)
    assert list(st.records["seed"]) == [0]
    (why,) = st.skipped
    assert str(bare) in why and "status completed but incomplete" in why and "primary_metric" in why


def test_v1_store_reads_through_the_record_type() -> None:
    st = frames.load_store(V1_STORE)
    assert st.skipped == []
    recs = st.records.set_index("objective")
    assert set(recs.index) == {"hid_seq", "vanilla_kd"}
    assert set(recs["teacher_name"]) == {"tiny"} and set(recs["teacher_layers"]) == {6}
    assert set(recs["student_id"]) == {sha8({"name": "truncated", "num_layers": 3})}
    assert recs.loc["hid_seq", "init_label"] == "2,4,6" and recs.loc["vanilla_kd", "init_label"] == "1,2,3"
    assert recs.loc["hid_seq", "system"] == "hid_seq"  # one teacher, one student: plain labels
    assert recs.loc["hid_seq", "primary"] == pytest.approx(0.328125)
    assert len(st.curves) == 3  # hid_seq 2 epochs + vanilla_kd 1


# ----------------------------------------------------------------------------- epoch selection


def test_which_selects_per_shown_metric(tmp_path: Path) -> None:
    """CoLA-like run: MCC best at prediction epoch 1, accuracy best at epoch 2 (and higher still in the
    untrained-head intermediate epoch, which never counts)."""
    epochs = [
        {"stage": "intermediate", "epoch": 1, "step": 1, "train_loss": 1.0, "dev": {"accuracy": 0.99, "mcc": 0.9}},
        {"stage": "prediction", "epoch": 1, "step": 2, "train_loss": 1.0, "dev": {"accuracy": 0.689, "mcc": 0.12}},
        {"stage": "prediction", "epoch": 2, "step": 3, "train_loss": 1.0, "dev": {"accuracy": 0.712, "mcc": 0.08}},
        {"stage": "prediction", "epoch": 3, "step": 4, "train_loss": 1.0, "dev": {"accuracy": 0.70, "mcc": 0.05}},
    ]
    write_record(tmp_path, task="cola", objective="hid_seq", score={"accuracy": 0.689, "mcc": 0.12},
                 final={"accuracy": 0.70, "mcc": 0.05}, epochs=epochs)
    best = frames.load_records(tmp_path, "best").iloc[0]
    assert best["dev.accuracy"] == pytest.approx(0.712) and best["dev.mcc"] == pytest.approx(0.12)
    assert best["primary"] == pytest.approx(0.12)
    mx = frames.load_records(tmp_path, "max").iloc[0]
    assert mx["dev.accuracy"] == pytest.approx(0.712) and mx["dev.mcc"] == pytest.approx(0.12)
    primary = frames.load_records(tmp_path, "primary").iloc[0]  # the run's own best epoch (by MCC)
    assert primary["dev.accuracy"] == pytest.approx(0.689) and primary["dev.mcc"] == pytest.approx(0.12)
    final = frames.load_records(tmp_path, "final").iloc[0]
    assert final["dev.accuracy"] == pytest.approx(0.70)
    paper, _ = frames.scores(frames.load_records(tmp_path, "best"), "paper")
    assert list(paper["value"]) == pytest.approx([71.2])  # accuracy at the accuracy-best epoch
    with pytest.raises(ValueError):
        frames.load_records(tmp_path, "last")


def test_which_best_uses_combined_and_finetune_epochs(tmp_path: Path) -> None:
    epochs = [
        {"stage": "intermediate", "epoch": 1, "step": 1, "train_loss": 1.0, "dev": {"accuracy": 0.95}},
        {"stage": "combined", "epoch": 1, "step": 2, "train_loss": 1.0, "dev": {"accuracy": 0.60}},
        {"stage": "combined", "epoch": 2, "step": 3, "train_loss": 1.0, "dev": {"accuracy": 0.66}},
    ]
    write_record(tmp_path, objective="att_kl", score=0.60, final=0.66, epochs=epochs)
    assert frames.load_records(tmp_path, "best").iloc[0]["dev.accuracy"] == pytest.approx(0.66)
    write_record(tmp_path, procedure="finetune", seed=1, score=0.7, final=0.75)
    ft = frames.load_records(tmp_path, "best").set_index("procedure").loc["finetune"]
    assert ft["dev.accuracy"] == pytest.approx(0.75) and ft["objective"] == "none"


# ----------------------------------------------------------------------------- scores and systems


def test_scores_use_selected_metric_and_skip_failed(tmp_path: Path) -> None:
    write_record(tmp_path, task="mrpc", score={"accuracy": 0.70, "f1": 0.81})
    write_record(tmp_path, task="mrpc", seed=1, status="failed", error="x")
    records = frames.load_records(tmp_path)
    header, _ = frames.scores(records, "header")
    paper, _ = frames.scores(records, "paper")
    assert list(header["value"]) == pytest.approx([81.0])
    assert list(paper["value"]) == pytest.approx([70.0])
    assert set(header["metric"]) == {"f1"} and set(paper["metric"]) == {"accuracy"}


def test_scores_missing_metric_and_duplicates(tmp_path: Path) -> None:
    write_record(tmp_path, task="mrpc", score={"f1": 0.7})  # no accuracy recorded
    dup = write_record(tmp_path, task="rte", score=0.9, finished_at="2026-11-23T01:00:00")
    # the same job again under another config hash, finished earlier
    rec = json.loads(dup.read_text())
    rec["config_hash"] = "ffffffffffffffff"
    other = dup.parent.parent / "ffffffffff" / "result.json"
    other.parent.mkdir()
    low = {"stage": "prediction", "epoch": 1, "dev": {"accuracy": 0.5}}
    other.write_text(json.dumps({**rec, "best": low, "epochs": [low], "finished_at": "2026-11-21T00:00:00"}))
    sc, notes = frames.scores(frames.load_records(tmp_path), "paper")
    assert any("lack dev metric 'accuracy'" in n for n in notes)
    assert any("duplicate" in n for n in notes)
    rte = sc[sc["task"] == "rte"]
    assert list(rte["value"]) == pytest.approx([90.0])  # the newer of the two rte runs


def test_two_teachers_are_two_systems(tmp_path: Path) -> None:
    for seed in range(2):  # both bottom students copy layers 1,2,3: only the teacher differs
        write_record(tmp_path, task="rte", objective="hid_seq", init="3", seed=seed, score=0.60, teacher="tiny",
                     teacher_layers=6)
        write_record(tmp_path, task="rte", objective="hid_seq", init="3", seed=seed, score=0.70)
    records = frames.load_records(tmp_path)
    tiny = sha8({"name": "tiny", "num_hidden_layers": 6})
    roberta = sha8({"name": "roberta_base", "num_hidden_layers": 12})
    assert set(records["system"]) == {f"hid_seq [teacher tiny#{tiny}]", f"hid_seq [teacher roberta_base#{roberta}]"}
    sc, notes = frames.scores(records)
    assert notes == []  # nothing merged, nothing dropped
    means = sc.groupby("system")["value"].mean()
    assert means[f"hid_seq [teacher tiny#{tiny}]"] == pytest.approx(60.0)
    assert means[f"hid_seq [teacher roberta_base#{roberta}]"] == pytest.approx(70.0)
    assert frames.system_order(records) == [f"hid_seq [teacher roberta_base#{roberta}]",
                                           f"hid_seq [teacher tiny#{tiny}]"]
    legend = frames.parts_legend(records)
    # built from a config (no name_or_path): said so, not "name_or_path None" (or "nan" once in a frame)
    assert f"teacher tiny#{tiny}: 6 layers, hidden 32, built from its config" in legend


def test_two_students_and_the_no_kd_row(tmp_path: Path) -> None:
    write_record(tmp_path, task="rte", objective="vanilla_kd", init="1")
    write_record(tmp_path, task="rte", objective="vanilla_kd", init="1", student_layers=6)
    write_record(tmp_path, task="rte", procedure="finetune", init="1")
    records = frames.load_records(tmp_path)
    s3, s6 = sha8({"name": "truncated", "num_layers": 3}), sha8({"name": "truncated", "num_layers": 6})
    assert frames.system_order(records) == [
        f"no KD (fine-tuning) [student truncated#{s3}]", f"vanilla_kd [student truncated#{s3}]",
        f"vanilla_kd [student truncated#{s6}]"]


def test_select_init(tmp_path: Path) -> None:
    write_record(tmp_path, init="1")
    write_record(tmp_path, init="3")
    records = frames.load_records(tmp_path)
    sel, note = frames.select_init(records, "skip")
    assert list(sel["init_label"]) == ["4,8,12"] and note == ""
    sel, _ = frames.select_init(records, "1,2,3")
    assert list(sel["init_name"]) == ["bottom"]
    only_bottom = records[records["init_name"] == "bottom"]
    sel, note = frames.select_init(only_bottom, "skip")
    assert list(sel["init_label"]) == ["1,2,3"] and "most common" in note


def test_status_counts_and_norm_spec(tmp_path: Path) -> None:
    write_record(tmp_path, seed=0)
    write_record(tmp_path, seed=1, status="running")
    assert frames.status_counts(frames.load_records(tmp_path)) == {"running": 1, "completed": 1, "failed": 0}
    assert frames.norm_spec([1, 5, 9]) == "[1,5,9]" and frames.norm_spec("[1, 5, 9]") == "[1,5,9]"
    assert frames.norm_spec(1) == "1" and frames.norm_spec(" Skip") == "skip"
    assert math.isnan(frames.load_records(tmp_path).set_index("seed").loc[1, "primary"])


def test_legend_names_the_settings_that_tell_students_of_one_type_apart() -> None:
    records = pd.DataFrame([
        {"teacher_id": "t", "student_id": "a", "student_name": "sps", "student_layers": 6, "student_hidden": 64,
         "student_settings": {"name": "sps", "num_layers": 3, "swap_qk": False}},
        {"teacher_id": "t", "student_id": "b", "student_name": "sps", "student_layers": 6, "student_hidden": 64,
         "student_settings": {"name": "sps", "num_layers": 3, "swap_qk": True}},
    ])
    assert frames.parts_legend(records) == ["student sps#a: 6 layers, hidden 64, swap_qk=False",
                                           "student sps#b: 6 layers, hidden 64, swap_qk=True"]
