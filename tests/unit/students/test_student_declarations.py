"""The student types are declared without their code: settings checks import no torch, the code loads on use."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import ROOT

from distill_sweep.config import declared
from distill_sweep.students import STUDENTS, StudentType
from distill_sweep.students.truncated_settings import TruncatedSettings

# In a fresh interpreter: every student option (registered in code, or a preset of conf/student) parsed with its
# declared settings class, a bad value of each type refused, and none of the heavy packages imported on the way.
CHECK = r'''
import sys
from pathlib import Path

import yaml

from distill_sweep.errors import ConfigError
from distill_sweep.config.parse import parse
from distill_sweep.config.space import CODE_OPTIONS, group_options
from distill_sweep.students import STUDENTS, student_type

# what the YAML leaves to the user (required, null in the file)
REQUIRED = {"pretrained": {"name_or_path": "some/model"}, "distilled": {"source": "0123456789abcdef"}}
# one value of each type that its settings must refuse (a range, or its validate); a type whose settings extend
# another type's (the guide's frozen_embeddings: TruncatedSettings) is refused what that one is
BAD = {"truncated": {"num_layers": 0}, "fresh": {"hidden_size": 100, "num_attention_heads": 3}, "sps": {"shared_layers": 99},
       "pretrained": {"name_or_path": None}, "distilled": {"source": "not-a-hash"}, "bilstm": {"dropout": 1.0}}
BAD_BY_SETTINGS = {STUDENTS[name].settings: bad for name, bad in BAD.items()}


def bad_value(kind):
    found = next((BAD_BY_SETTINGS[c] for c in kind.settings.__mro__ if c in BAD_BY_SETTINGS), None)
    assert found is not None, (f"student {kind.name!r}: add a value its settings refuse to BAD in "
                               "tests/unit/students/test_student_declarations.py")
    return found


assert set(BAD) <= set(STUDENTS), sorted(STUDENTS)


def node(name):
    """The option as hydra composes it: its defaults (other options of the group) under its own keys."""
    path = Path("conf/student") / f"{name}.yaml"
    if not path.exists():  # a student type's own option: its settings' defaults
        return dict(CODE_OPTIONS["student"][name])
    data = yaml.safe_load(path.read_text())
    merged = {}
    for entry in data.pop("defaults", ["_self_"]):
        merged.update(data if entry == "_self_" else node(entry))
    return merged


seen = set()
for choice in group_options("student"):
    option = node(choice)
    kind = student_type(option["name"])
    seen.add(kind.name)
    settings = parse(kind.settings, {**option, **REQUIRED.get(kind.name, {})}, "student")
    assert type(settings) is kind.settings, choice
    try:
        parse(kind.settings, {**option, **REQUIRED.get(kind.name, {}), **bad_value(kind)}, "student")
    except ConfigError as e:
        assert "student." in str(e), (choice, e)
    else:
        raise AssertionError(f"{choice}: {bad_value(kind)} was accepted")
assert seen == set(STUDENTS), seen
try:
    student_type("nope")
except ConfigError as e:
    assert "truncated" in str(e), e
else:
    raise AssertionError("student.name=nope was accepted")
print(sorted(m for m in ("torch", "transformers", "datasets") if m in sys.modules))
'''


def test_student_settings_are_checked_without_torch() -> None:
    out = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout  # none of torch, transformers, datasets was imported


@pytest.mark.parametrize("name", sorted(STUDENTS))
def test_every_declared_type_loads_its_code(name: str) -> None:
    kind = STUDENTS[name]
    assert callable(kind.describe) and callable(kind.build)
    for hook, has in (("tokenizer", kind.has_tokenizer), ("locate", kind.has_locate)):
        # the module defines the optional hook exactly when the declaration says so
        assert (declared.find(f"{kind.code}:{hook}") is not None) == has, (name, hook)
        assert callable(getattr(kind, hook)) if has else getattr(kind, hook) is None


def test_a_wrong_code_module_fails_loudly() -> None:
    ghost = StudentType("ghost", TruncatedSettings, "distill_sweep.students.ghost", uses_init=False,
                        needs_teacher_weights=False)
    with pytest.raises(ModuleNotFoundError, match="distill_sweep.students.ghost"):
        ghost.build  # noqa: B018 - the property imports the code
    no_locate = StudentType("x", TruncatedSettings, "distill_sweep.students.truncated", uses_init=True,
                            needs_teacher_weights=True, has_locate=True)
    with pytest.raises(AttributeError, match="locate"):
        no_locate.locate  # noqa: B018
