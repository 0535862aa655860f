"""The record a job fills while it runs: the blocks only some jobs have as Record fields (records/blocks.py), the sizes
a record leaves unstated, an earlier attempt's record read back typed."""

from __future__ import annotations

import json
from pathlib import Path

from distill_sweep.records.blocks import PTPInfo, StudentVocab, TuneTrial
from distill_sweep.records.record import Record, StudentInfo, TeacherInfo, earlier_record, write_record

TINY_TEACHER = {"name": "tiny", "config": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}}


def _running() -> Record:
    return Record(task="toy", objective="vanilla_kd", seed=1, status="running", primary_metric="accuracy",
                  student=StudentInfo(num_layers=1, hidden_size=32, num_heads=4),
                  teacher=TeacherInfo.from_settings(TINY_TEACHER, num_layers=2, hidden_size=32),
                  config={"teacher": TINY_TEACHER})


def test_the_blocks_are_written_after_the_common_keys_in_the_order_jobs_add_them() -> None:
    rec = _running()
    rec.early_exit = [{"speed": 0.5, "dev": {"accuracy": 0.75}}]  # set first, written last
    rec.ptp = PTPInfo(thresholds={"correct": 0.9, "wrong": 0.65}, labels={"confidently_correct": 3})
    rec.student_vocab = StudentVocab(size=65, key="k")
    rec.tune_trial = TuneTrial(number=0, holdout=0.1, seed=0, holdout_size=26, study=1, sampler="qmc", sampler_seed=7,
                               order=0)
    d = json.loads(json.dumps(rec.to_dict()))
    assert list(d)[-5:] == ["finished_at", "tune_trial", "student_vocab", "ptp", "early_exit"]
    assert d["tune_trial"] == {"number": 0, "holdout": 0.1, "seed": 0, "holdout_size": 26, "study": 1, "sampler": "qmc",
                               "sampler_seed": 7, "order": 0, "pruned": None}
    assert d["student_vocab"] == {"size": 65, "key": "k"}
    assert d["ptp"] == {"thresholds": {"correct": 0.9, "wrong": 0.65}, "labels": {"confidently_correct": 3}}
    assert "causal_lm" not in d and "fsdp" not in d  # a block the job has not: no key at all
    back = Record.from_dict(d)
    assert back.tune_trial == rec.tune_trial and back.student_vocab == rec.student_vocab and back.ptp == rec.ptp
    assert back.early_exit == rec.early_exit and back.extra == {}
    assert back.to_dict() == d


def test_a_null_block_in_a_file_is_kept_as_it_was() -> None:
    d = {**_running().to_dict(), "tuned": None}
    back = Record.from_dict(d)
    assert back.tuned is None and back.to_dict() == d


def test_a_size_left_unstated_is_the_teachers_inline_architectures_as_when_read() -> None:
    rec = _running()
    rec.student = StudentInfo(name="fresh", num_layers=1, hidden_size=None, num_heads=None)
    rec.teacher = TeacherInfo.from_settings(TINY_TEACHER, num_layers=None, hidden_size=32)
    rec.fill_unstated_sizes()
    assert (rec.student.hidden_size, rec.student.num_heads) == (32, 4)
    assert (rec.teacher.num_layers, rec.teacher.hidden_size) == (2, 32)
    assert Record.from_dict(rec.to_dict()) == rec


def test_a_student_without_attention_heads_is_written_and_read_with_none() -> None:
    # a BiLSTM student states 0 heads: neither the job's record nor its reader takes the tiny teacher's 4
    rec = _running()
    rec.student = StudentInfo(name="bilstm", num_layers=1, hidden_size=300, num_heads=0)
    rec.fill_unstated_sizes()
    assert rec.student.num_heads == 0
    assert Record.from_dict(rec.to_dict()).student.num_heads == 0


def test_an_earlier_attempts_record_is_read_typed_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    assert earlier_record(path) is None  # none yet
    rec = _running()
    rec.attempts, rec.requeued = 2, 1
    write_record(path, rec)
    earlier = earlier_record(path)
    assert earlier is not None and (earlier.attempts, earlier.requeued, earlier.resumed) == (2, 1, 0)
    path.write_text('{"status": "running", "task": "toy"')  # torn
    assert earlier_record(path) is None
    path.write_text('{"status": "running"}')  # no identity: not a record
    assert earlier_record(path) is None
