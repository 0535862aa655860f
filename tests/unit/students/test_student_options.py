"""A student type's defaults have one home, its settings dataclass: `student=<type>` composes them, and conf/student/
holds only presets that start from a type's option and change some of its values."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml
from helpers import ROOT, compose_cfg, plain
from hydra.core.config_store import ConfigStore

from distill_sweep.config.space import CODE_OPTIONS, group_options
from distill_sweep.students import STUDENTS, StudentType, register_student


def _defaults(settings: type) -> dict:
    """Each field's default as the dataclass states it, those filled in when the job is prepared left out."""
    return {f.name: f.default for f in dataclasses.fields(settings) if not f.metadata.get("filled_in")}


@pytest.mark.parametrize("name", sorted(STUDENTS))
def test_a_type_composes_its_settings_defaults(name: str) -> None:
    # before: conf/student/sps.yaml said shared_layers: 3 where SPSSettings said None (two homes that disagreed)
    assert plain(compose_cfg([f"student={name}"]).student) == _defaults(STUDENTS[name].settings)


def test_conf_student_holds_only_presets() -> None:
    """Every YAML there extends a type's option (its defaults list's first entry) and sets a value of its own."""
    paths = sorted((ROOT / "conf" / "student").glob("*.yaml"))
    assert paths
    for path in paths:
        data = yaml.safe_load(path.read_text())
        base = (data.get("defaults") or [None])[0]
        assert base in STUDENTS, f"{path.name}: not a preset of a student type (defaults: {data.get('defaults')})"
        assert "name" not in data and set(data) - {"defaults"}, path.name


@dataclass
class WideSettings:
    name: str = "wide_test"  # the student type
    num_layers: int = 5
    width: int | None = None


@pytest.fixture
def wide() -> Iterator[str]:
    register_student(StudentType("wide_test", WideSettings, "distill_sweep.students.truncated",
                                 uses_init=False, needs_teacher_weights=False))
    try:
        yield "wide_test"
    finally:  # the registration must not outlive the test
        del STUDENTS["wide_test"], CODE_OPTIONS["student"]["wide_test"]
        ConfigStore.instance().repo["student"].pop("wide_test.yaml")


def test_a_declared_type_is_an_option_without_a_yaml(wide: str) -> None:
    assert wide in group_options("student") and not (ROOT / "conf" / "student" / f"{wide}.yaml").exists()
    # its keys are in the composed config: set without `+`, the others at the dataclass's defaults
    student = plain(compose_cfg([f"student={wide}", "student.width=64"]).student)
    assert student == {"name": "wide_test", "num_layers": 5, "width": 64}



def test_each_listed_module_declares_the_type_it_is_named_after() -> None:
    from distill_sweep.students.declarations import MODULES

    named = {m.__name__.rpartition(".")[2].removesuffix("_settings") for m in MODULES}
    assert named == set(STUDENTS)
    for module in MODULES:
        kind = STUDENTS[module.__name__.rpartition(".")[2].removesuffix("_settings")]
        assert kind.settings.__module__ == module.__name__ and kind.code == module.__name__.removesuffix("_settings")
