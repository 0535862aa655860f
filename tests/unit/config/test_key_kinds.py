"""Every config key declares its kind, and the hash and the teacher's cache key follow the declarations: generated over
every key of the typed schema at a second legal value (tests/key_kinds.py), from the config alone (the records of two
values of a result-invariant key: tests/integration/config/test_key_kinds_runs.py)."""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from dataclasses import dataclass, field

import pytest
from helpers import compose_cfg
from key_kinds import (
    SECOND,
    KindCase,
    declaration_problems,
    kind_cases,
    settings_classes,
    unvaried,
)

from distill_sweep.config.parse import IDENTITY, INVARIANT, nondeterministic
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import JobIdentity, identify, identify_plain
from distill_sweep.training.processes import planned

CASES = kind_cases()
def test_every_field_of_every_settings_block_declares_its_kind() -> None:
    problems = [p for cls in settings_classes() for p in declaration_problems(cls)]
    assert not problems, "\n".join(problems)


@dataclass
class Inner:
    rate: float = field(default=1.0, metadata=IDENTITY)


@dataclass
class Part:
    kept: int = field(default=1, metadata=IDENTITY)
    added: int = 2
    noisy: int = field(default=3, metadata=nondeterministic(""))
    block: Inner = field(default_factory=Inner, metadata=INVARIANT)


def test_a_key_added_without_a_declaration_fails_the_suite() -> None:
    """The check above on a settings block with one undeclared key, one nondeterministic key without its reason and an
    invariant block that hashes a key: each named."""
    assert declaration_problems(Part) == [
        "Part.added declares no kind (one of identity, teacher, invariant, nondeterministic: config/parse.py)",
        "Part.noisy is nondeterministic without saying why",
        "Part.block is invariant but its block hashes rate",
    ]


def test_every_key_is_varied_or_named() -> None:
    assert not unvaried(CASES), "give these keys a second value (key_kinds.SECOND) or name them in NOT_VARIED"
    assert set(SECOND) <= {c.path for c in CASES} and len(CASES) > 150


# Keys a job reads only when it runs in several processes: checked as a job planned for 2 (a launcher's tasks_per_node).
SEVERAL = ("fsdp",)


def _pair(case: KindCase) -> tuple[JobIdentity, JobIdentity]:
    base, other = case.configs()
    try:
        with planned(2) if case.path.split(".")[0] in SEVERAL else nullcontext():
            return identify_plain(base), identify_plain(other)
    except ConfigError as err:  # a value the generic rule chose that another setting refuses: name it in SECOND
        pytest.fail(f"{case} is refused ({err}): give the key a legal second value in key_kinds.SECOND")


def _identity(overrides: tuple[str, ...]) -> JobIdentity:
    return identify(compose_cfg(list(overrides)))


def _unread(ident: JobIdentity, path: str) -> bool:
    """Whether the job says it does not read the key (a setting its procedure ignores: a job alone refuses it)."""
    return any(item.startswith(path.split(".")[0]) for item in ident.ignored)


# The fine-tuned teacher's key (job/teacher_keys.py) is an encoder's: a decoder's trained teacher is keyed by its data's
# content when it runs (teachers/decoder.teacher_key), so the decoders' TEACHER keys are checked on the job hash only.
ENCODER_TEACHER_PARTS = ("task", "teacher", "precision")


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_key_at_another_value_keeps_its_kind(case: KindCase) -> None:
    """identity: another job (hash), the same teacher; teacher: another job and, for an encoder's fine-tuned teacher,
    another teacher; invariant and nondeterministic: the same job and teacher. The teacher's key names its
    teacher-output store too, so a student-side key leaves both."""
    base, other = _pair(case)
    if case.kind in ("identity", "teacher"):
        assert other.digest != base.digest or _unread(other, case.path), f"{case.path} is {case.kind} but not hashed"
    else:
        assert other.digest == base.digest, f"{case.path} is {case.kind} but changes the hash"
    if case.kind == "teacher" and case.path.split(".")[0] in ENCODER_TEACHER_PARTS:
        assert other.teacher.key != base.teacher.key, f"{case.path} is a teacher key but not in the teacher's key"
    elif case.kind != "teacher":
        assert other.teacher.key == base.teacher.key, f"{case.path} is {case.kind} but changes the teacher's key"
        assert [m.key for m in other.members] == [m.key for m in base.members]


def test_a_grid_over_the_students_optimizer_shares_one_teacher() -> None:
    """Issue 48's case, named: weight decay (and betas, eps, clipping) of the student leave the teacher; the teacher's
    own (teacher.finetune.*) make another."""
    keys = {ov: _identity(tuple(compose_args(ov))).teacher.key for ov in
            ("optimizer.weight_decay=0", "optimizer.weight_decay=0.01", "optimizer.max_grad_norm=1",
             "optimizer.betas=[0.9,0.999]", "optimizer.eps=1e-8")}
    assert len({str(k) for k in keys.values()}) == 1
    own = _identity(tuple(compose_args("+teacher.finetune.weight_decay=0"))).teacher.key
    assert own != keys["optimizer.weight_decay=0"] and own["optimizer"]["weight_decay"] == 0.0


def compose_args(override: str) -> list[str]:
    return [*CASES[0].overrides()[:-1], override]


def test_the_kinds_are_the_fields_declarations() -> None:
    """(The cases carry the kind their field declares.)"""
    from distill_sweep.config.schema import FinetuneSettings, RunSettings

    kinds = {c.path: c.kind for c in CASES}
    fields = {f.name: f for f in dataclasses.fields(RunSettings)}
    assert kinds["log_every"] == fields["log_every"].metadata["kind"] == "invariant"
    assert kinds["threads"] == fields["threads"].metadata["kind"] == "nondeterministic"
    assert kinds["precision"] == "teacher" and kinds["optimizer.weight_decay"] == "identity"
    assert kinds["teacher.finetune.weight_decay"] == "teacher" and FinetuneSettings().weight_decay == 0.1


def test_the_teachers_own_betas_are_checked_like_the_students() -> None:
    """teacher.finetune.betas, a key of this change: two numbers in [0, 1), else one line naming it."""
    with pytest.raises(ConfigError, match=r"^teacher\.finetune\.betas=\[0\.9, 1\.5\]: expected two numbers in "
                                          r"\[0, 1\)$"):
        _identity(tuple(compose_args("+teacher.finetune.betas=[0.9,1.5]")))
    with pytest.raises(ConfigError, match=r"^teacher\.finetune\.betas=\[0\.9\]: expected two numbers"):
        _identity(tuple(compose_args("+teacher.finetune.betas=[0.9]")))
