"""results.Record: writing and reading records, migration of version 1, the completeness rule, ids.

Also home of `write_record`, the record fabricator the report and statistics tests use: it builds
records through the same API the training job writes with.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import V1_STORE, sha8

from distill_sweep.records import files, record
from distill_sweep.records.record import DataInfo, InitInfo, Record, RecordError, StudentInfo, TeacherInfo


def v1_paths() -> list[Path]:
    return sorted(V1_STORE.glob("**/result.json"))


def complete_dict() -> dict[str, Any]:
    return json.loads(v1_paths()[0].read_text())


# ----------------------------------------------------------------------------- ids


def test_part_id_is_the_sha256_prefix_of_the_sorted_json() -> None:
    settings = {"name": "tiny", "config": {"hidden_size": 64, "num_hidden_layers": 6}, "name_or_path": None}
    expected = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]
    assert record.part_id(settings) == expected
    assert len(expected) == 8 and int(expected, 16) >= 0
    reordered = {"name_or_path": None, "config": {"num_hidden_layers": 6, "hidden_size": 64}, "name": "tiny"}
    assert record.part_id(reordered) == expected
    assert record.part_id({**settings, "name": "tiny2"}) != expected


def test_student_id_includes_the_name() -> None:
    assert record.student_id("truncated", {"num_layers": 3}) == sha8({"name": "truncated", "num_layers": 3})
    assert record.student_id("fresh", {"num_layers": 3}) != record.student_id("truncated", {"num_layers": 3})
    assert StudentInfo(name="truncated", settings={"num_layers": 3}).id == sha8({"name": "truncated", "num_layers": 3})


# ----------------------------------------------------------------------------- version 1


@pytest.mark.parametrize("path", v1_paths(), ids=lambda p: p.parts[-5])
def test_v1_records_migrate(path: Path) -> None:
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == 1
    rec = record.load_record(path)
    assert rec.procedure == "task_specific"
    assert (rec.task, rec.objective, rec.seed) == (raw["task"], raw["objective"], raw["seed"])
    assert rec.student.name == "truncated" and rec.student.settings == {"num_layers": 3}
    assert rec.student.id == sha8({"name": "truncated", "num_layers": 3})
    assert rec.student.num_layers == 3 and rec.student.hidden_size == 64
    assert rec.student.num_heads == 4  # the tiny teacher's config: 4 attention heads
    assert rec.student.layer_map == raw["student"]["layer_map"]
    assert rec.teacher.name == "tiny" and rec.teacher.id == sha8(raw["config"]["teacher"])
    assert rec.teacher.num_layers == 6 and rec.teacher.hidden_size == 64
    assert rec.teacher.dev == raw["teacher"]["dev"] and rec.teacher.source == raw["teacher"]["source"]
    assert rec.data == DataInfo(None, None, None, None)
    assert rec.epochs == raw["epochs"] and rec.best == raw["best"] and rec.final == raw["final"]
    assert rec.init == InitInfo(raw["init"]["spec"], raw["init"]["name"], raw["init"]["layers"])
    out = rec.to_dict()
    assert out["schema_version"] == 2 and out["procedure"] == "task_specific"
    assert Record.from_dict(json.loads(json.dumps(out))) == rec
    assert record.is_complete(raw)


def test_v1_without_a_teacher_config_uses_what_the_record_names() -> None:
    raw = complete_dict()
    del raw["config"]
    rec = Record.from_dict(raw)
    assert rec.teacher.id == sha8({"name_or_path": None}) and rec.teacher.name == "unknown"
    assert rec.teacher.hidden_size == 64  # version 1: the student's width was the teacher's
    assert rec.student.num_heads is None


# ----------------------------------------------------------------------------- version 2


def full_record() -> Record:
    teacher_cfg = {"name": "roberta_base", "name_or_path": "FacebookAI/roberta-base"}
    return Record(
        task="rte", objective="att_kl", seed=3, status="failed", procedure="task_specific",
        error="ValueError: x", traceback="Traceback ...", config_hash="ab" * 32,
        init=InitInfo("2", "mixed", [1, 8, 12]),
        student=StudentInfo(name="truncated", num_layers=3, hidden_size=768, num_heads=12,
                            layer_map=[[1, 1], [2, 8], [3, 12]], settings={"num_layers": 3}),
        teacher=TeacherInfo.from_settings(teacher_cfg, num_layers=12, hidden_size=768, source="cache",
                                          path="/c/t", dev={"accuracy": 0.7}, majority_baseline={"accuracy": 0.5}),
        data=DataInfo(max_train_samples=1000, max_dev_samples=None, train_size=1000, dev_size=277),
        primary_metric="accuracy",
        epochs=[{"stage": "intermediate", "epoch": 1, "step": 5, "train_loss": 0.3, "loss_att_kl": 0.3,
                 "dev": {"accuracy": 0.5}}],
        wall_time_s=2.0, samples_per_s=100.0, peak_memory_mb=512.0, peak_memory_kind="cuda_max_allocated",
        device="H100", nonfinite_skipped=1, attempts=2, requeued=1, resumed=1, wandb={"id": "w"},
        config={"teacher": teacher_cfg}, versions={"python": "3.11"}, git_commit="abc",
        started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T01:00:00+00:00",
    )


def test_v2_round_trip_and_keys() -> None:
    rec = full_record()
    d = json.loads(json.dumps(rec.to_dict()))
    assert list(d) == [
        "schema_version", "status", "error", "traceback", "config_hash", "procedure", "task", "objective",
        "seed", "init", "student", "teacher", "data", "primary_metric", "epochs", "best", "final",
        "wall_time_s", "samples_per_s", "peak_memory_mb", "peak_memory_kind", "device", "nonfinite_skipped",
        "padding", "teacher_outputs",
        "attempts", "requeued", "resumed", "wandb", "config", "versions", "git_commit", "started_at",
        "finished_at"]
    assert list(d["student"]) == ["name", "id", "num_layers", "hidden_size", "num_heads", "layer_map", "settings"]
    assert list(d["teacher"]) == ["name", "id", "name_or_path", "num_layers", "hidden_size", "source", "path",
                                  "dev", "majority_baseline"]
    assert list(d["data"]) == ["max_train_samples", "max_dev_samples", "train_size", "dev_size"]
    assert d["schema_version"] == 2
    assert d["teacher"]["id"] == sha8({"name": "roberta_base", "name_or_path": "FacebookAI/roberta-base"})
    assert d["teacher"]["name"] == "roberta_base"
    assert d["student"]["id"] == sha8({"name": "truncated", "num_layers": 3})
    assert Record.from_dict(d) == rec
    assert Record.from_dict(d).to_dict() == d
    d["future_key"] = {"kept": True}  # a key this reader does not know survives reading and writing
    assert Record.from_dict(d).to_dict()["future_key"] == {"kept": True}


def test_ids_in_a_record_are_taken_as_written() -> None:
    d = full_record().to_dict()
    d["student"]["id"], d["teacher"]["id"] = "11111111", "22222222"
    rec = Record.from_dict(d)
    assert (rec.student.id, rec.teacher.id) == ("11111111", "22222222")


def test_write_record_is_atomic_json(tmp_path: Path) -> None:
    path = tmp_path / "a" / "result.json"
    record.write_record(path, full_record())
    assert json.loads(path.read_text()) == full_record().to_dict()
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("seed"), "missing keys ['seed']"),
    (lambda d: d.update(seed="1"), "seed '1' is not an integer"),
    (lambda d: d.update(seed=True), "is not an integer"),
    (lambda d: d.update(schema_version=3), "schema_version 3"),
    (lambda d: d["init"].update(layers="4,8,12"), "init.layers"),
    (lambda d: d["student"].update(num_layers="three"), "student.num_layers"),
    (lambda d: d.update(wall_time_s="slow"), "wall_time_s"),
    # a seed past the config's range (10**30 overflowed the report's int64 arrays), or not a number, in any source
    (lambda d: d.update(seed=10**30), "seed 1000000000000000000000000000000 is not a seed (an integer in [0, 2**32))"),
    (lambda d: d.update(seed=-3), "seed -3 is not a seed"),
    (lambda d: d.update(seeds={"init": 10**30, "own": ["init"]}), "seeds.init 1000000000000000000000000000000 is not"),
    (lambda d: d.update(seeds={"data_order": "two"}), "seeds.data_order 'two' is not a seed"),
    (lambda d: d.update(seeds={"dropout": True}), "seeds.dropout True is not a seed"),
    (lambda d: d.update(seeds=[1, 2]), "seeds [1, 2] is not an object"),
    (lambda d: d.update(seeds={"init": 2, "own": "init"}), "seeds.own 'init' is not a list"),
    (lambda d: d["epochs"][0].update(epoch="first"), "epochs[0].epoch 'first' is not an integer"),
    (lambda d: d["epochs"][0].update(dev=[0.5]), "epochs[0].dev [0.5] is not an object"),
])
def test_from_dict_refuses_with_the_reason(change: Any, message: str) -> None:
    d = full_record().to_dict()
    change(d)
    with pytest.raises(RecordError, match=re.escape(message)):
        Record.from_dict(d)
    with pytest.raises(RecordError, match="not a JSON object"):
        Record.from_dict([1, 2])


def test_load_record_unreadable(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text('{"status": "compl')
    with pytest.raises(RecordError, match="unreadable"):
        record.load_record(tmp_path / "r.json")


# ----------------------------------------------------------------------------- completeness


def _set(path: str, value: Any) -> Any:
    def change(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            d = d[key]
        if value is KeyError:
            del d[last]
        else:
            d[last] = value
    return change


@pytest.mark.parametrize("change, reason", [
    (_set("status", "running"), "status 'running'"),
    (_set("status", "failed"), "status 'failed'"),
    (_set("task", KeyError), "task"),
    (_set("objective", 3), "objective"),
    (_set("seed", "1"), "seed '1'"),
    (_set("seed", 1.0), "seed 1.0"),
    (_set("primary_metric", KeyError), "primary_metric"),
    (_set("best", None), "no best.dev"),
    (_set("best.dev", KeyError), "no best.dev"),
    (_set("best.dev.accuracy", KeyError), "no number for the primary metric 'accuracy'"),
    (_set("best.dev.accuracy", "0.5"), "no number"),
    (_set("best.dev.accuracy", True), "no number"),
    (_set("final", KeyError), "no final.dev"),
    (_set("final.dev", [0.5]), "no final.dev"),
    (_set("epochs", []), "no epochs"),
    (_set("epochs", [1, 2]), "no epochs"),
    # what the report cannot read as a record the sweeper does not count as done: it runs the job again
    (_set("wall_time_s", "slow"), "wall_time_s 'slow' is not a number"),
    (_set("seeds", {"init": 10**30, "own": ["init"]}), "seeds.init 1000000000000000000000000000000 is not a seed"),
])
def test_incomplete_records_and_why(change: Any, reason: str) -> None:
    d = complete_dict()
    assert record.is_complete(d) and record.incomplete_reason(d) is None
    change(d)
    assert not record.is_complete(d)
    assert reason in record.incomplete_reason(d)


def test_a_bare_completed_status_is_not_complete() -> None:
    assert record.incomplete_reason({"status": "completed"}) == "task missing or not a string"
    assert not record.is_complete([])


def test_sweeper_check_uses_the_completeness_rule(tmp_path: Path) -> None:
    """results.completed_record is what the sweeper asks before skipping a job."""
    bare, torn, good = tmp_path / "bare", tmp_path / "torn", tmp_path / "good"
    files.write_json_atomic(bare / record.RECORD, {"status": "completed"})
    torn.mkdir()
    (torn / record.RECORD).write_text('{"status": "completed", "task"')
    whole = complete_dict()
    files.write_json_atomic(good / record.RECORD, whole)
    assert record.completed_record(bare) is None  # re-run, not skipped forever
    assert record.completed_record(torn) is None
    assert record.completed_record(tmp_path / "absent") is None
    assert record.completed_record(good) == whole
    no_primary = copy.deepcopy(whole)
    del no_primary["best"]["dev"]["accuracy"]
    files.write_json_atomic(good / record.RECORD, no_primary)
    assert record.completed_record(good) is None


# ----------------------------------------------------------------------------- best epoch


def test_best_epoch_among_scored_stages() -> None:
    def ep(stage: str, epoch: int, value: float) -> dict[str, Any]:
        return {"stage": stage, "epoch": epoch, "dev": {"mcc": value}}

    epochs = [ep("intermediate", 1, 0.99), ep("prediction", 1, 0.40), ep("prediction", 2, 0.55),
              ep("combined", 1, 0.55), ep("finetune", 1, math.nan)]
    assert record.best_epoch(epochs, "mcc") is epochs[2]  # first of the tied 0.55; intermediate ignored
    assert record.best_epoch([*epochs, ep("finetune", 2, 0.6)], "mcc")["stage"] == "finetune"
    assert record.best_epoch(epochs, "accuracy") is None
    assert record.best_epoch([ep("intermediate", 1, 0.5)], "mcc") is None
    assert record.SCORED_STAGES == ("prediction", "combined", "finetune", "self_distill")


def test_the_dev_hash_round_trips_and_a_malformed_one_is_refused() -> None:
    rec = Record(task="toy", objective="vanilla_kd", seed=1, data=DataInfo(dev_size=3, dev_hash={"validation": "ab"}))
    out = json.loads(json.dumps(rec.to_dict()))
    assert out["data"]["dev_hash"] == {"validation": "ab"} and Record.from_dict(out).data == rec.data
    out["data"]["dev_hash"] = ["ab"]
    with pytest.raises(RecordError, match="data.dev_hash"):
        Record.from_dict(out)
