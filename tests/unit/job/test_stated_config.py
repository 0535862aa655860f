"""The layer and length rules on the numbers a teacher's config states, checked by job.identify before torch.

A config.json is read as JSON (stated_config.py): what it states is checked at once; what it leaves to its config
class's defaults (config.json is often saved as a diff against them) is left to prepare.py, where transformers
fills the defaults in. Both answers come from the same rules (inits.resolve_init, mapping.resolve_map,
model_info.check_positions).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import compose_cfg

from distill_sweep.config.schema import TeacherSettings
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.job.stated_config import stated_teacher_config


def _teacher_dir(tmp_path: Path, **stated: object) -> Path:
    folder = tmp_path / "teacher"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "roberta", **stated}))
    return folder


def _job(folder: Path, *overrides: str) -> list[str]:
    return ["task=toy", "teacher=minilm_l6", f"teacher.name_or_path={folder}", "teacher.tokenizer=toy", *overrides]


@pytest.mark.parametrize(("overrides", "line"), [
    (["init=[1,2]"], "init=[1, 2] names 2 teacher layers but the student has 3 (student.num_layers)"),
    (["student.num_layers=5"], "student.num_layers=5 is deeper than the teacher (4 layers)"),
    (["map=[[1,5]]", "objective=hid_seq"], "map: teacher layer 5 is out of range 1..4"),
    # RoBERTa's position ids start after the padding index: 40 positions, 38 usable
    (["task.max_seq_length=39"], "task.max_seq_length=39 is longer than the teacher's 38 positions"),
])
def test_a_rule_on_stated_numbers_is_refused_by_the_identity(tmp_path: Path, overrides: list[str], line: str) -> None:
    folder = _teacher_dir(tmp_path, num_hidden_layers=4, max_position_embeddings=40)
    with pytest.raises(ConfigError) as err:
        identify(compose_cfg(_job(folder, *overrides)))
    assert str(err.value).startswith(line)


def test_a_number_the_config_leaves_to_its_defaults_is_checked_when_prepared(tmp_path: Path) -> None:
    # no depth stated: the identity cannot tell; transformers' RobertaConfig default is 12 layers
    folder = _teacher_dir(tmp_path, max_position_embeddings=40)
    identify(compose_cfg(_job(folder, "student.num_layers=13")))  # not refused: 12 is not stated
    with pytest.raises(ConfigError, match="student.num_layers=13 is deeper than the teacher \\(12 layers\\)"):
        prepare(compose_cfg(_job(folder, "student.num_layers=13")))
    assert prepare(compose_cfg(_job(folder, "student.num_layers=12"))).init.layers == list(range(1, 13))


def test_what_is_read_as_stated(tmp_path: Path) -> None:
    folder = _teacher_dir(tmp_path, num_hidden_layers=4)
    local = TeacherSettings(name="t", name_or_path=str(folder))
    assert stated_teacher_config(local) == {"model_type": "roberta", "num_hidden_layers": 4}
    # a fine-tuned teacher's own config.json comes first, as in models.teacher_config
    tuned = tmp_path / "tuned"
    tuned.mkdir()
    (tuned / "config.json").write_text(json.dumps({"model_type": "bert", "num_hidden_layers": 2}))
    assert stated_teacher_config(TeacherSettings(name="t", name_or_path=str(folder), finetuned_path=str(tuned))) \
        == {"model_type": "bert", "num_hidden_layers": 2}
    # a hub id (no such folder) and an unreadable file are left to transformers
    assert stated_teacher_config(TeacherSettings(name="t", name_or_path="org/no-such-model")) is None
    (folder / "config.json").write_text("{not json")
    assert stated_teacher_config(local) is None
