"""Tests of the whole config surface, generated from the typed schema itself.

Every key of every settings dataclass (the top level, the groups, and each group option's own settings: the
procedures, the student types, the objective terms, augmentation, the corpus) is found by walking the
dataclasses, so a new key is covered without touching this file. For each key, plain functions of its type and
range (`wrong_values`, `boundary_values`; nothing is sampled) give:
- one wrong value of each kind its type admits (text or a list for a number, a fraction for an integer, an
  infinity for a float whose range leaves that side open, text or a number for a flag, an unknown option, a
  single value or a wrong item for a list, a list for text) and the nearest value outside each bound of its
  range: the job is refused before anything is loaded, with one line naming the key (the CLI prints that line
  and exits 2: tests/e2e/test_bad_inputs.py);
- the boundary values the range allows: the job is accepted (`prepare`, which reads model configs only).
A boundary value that the job then fails on after minutes of work is what `seed=-1` was: those found are
named cases in tests/e2e/test_bad_inputs.py (round two).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from config_keys import BOUNDED, KEYS, REFUSED_AT_BOUNDARY, Key, _job, refusal, wrong_values
from helpers import FAST, compose_cfg, plain

from distill_sweep.config.parse import as_dict
from distill_sweep.config.schema import RunSettings
from distill_sweep.errors import ConfigError
from distill_sweep.job.prepare import prepare
from distill_sweep.sweep.compose import JobComposer


def test_the_walk_finds_the_keys_of_every_part() -> None:
    paths = {k.path for k in KEYS}
    # one key of each kind of part, found by the walk (not listed by hand anywhere else)
    for path in ("epochs", "checkpoint.every_steps", "optimizer.lr", "task.recipe.batch_size",
                 "teacher.finetune.seed", "task.augment.p_mask", "corpus.max_seq_length", "procedure.global_batch",
                 "student.num_layers", "objective.terms.hid_cls_contrast.temperature"):
        assert path in paths, path
    assert len(KEYS) > 60


SHARED = {k.path for k in KEYS if [j.path for j in KEYS].count(k.path) > 1}  # e.g. procedure.epochs


def _case(key: Key, value: str) -> Any:
    """One (key, value) case, its id the override (and the part that has the key, where several do)."""
    return pytest.param(key, value, id=f"{key.path}={value}" + (f" ({key.base[0]})" if key.path in SHARED else ""))


WRONG = [_case(k, v) for k in KEYS for v in wrong_values(k)]


# The sweeper's own composer (one Hydra compose per set of group choices, value overrides applied after, as
# Hydra applies them): each part is composed once, not once per case, and the values reach `prepare` as they do
# in every sweep. The single-job path composes through Hydra: its refusals are tests/e2e/test_bad_inputs.py's.
COMPOSER = JobComposer(lambda groups: compose_cfg(list(groups)))


@pytest.mark.slow  # the cases together take over 2 s: `make test-fast` leaves them out
@pytest.mark.parametrize(("key", "value"), WRONG)
def test_a_wrong_value_is_refused_in_one_line_naming_the_key(key: Key, value: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as err:
        prepare(COMPOSER([*_job(key, value), f"results_dir={out / 'r'}", f"cache_dir={out / 'c'}"]))
    line = str(err.value)
    assert "\n" not in line and key.path.split(".")[-1] in line, line
    assert not out.exists()  # nothing written


BASES = sorted({k.base for k in KEYS})


@pytest.mark.parametrize("base", BASES, ids=lambda b: " ".join(b) or "defaults")
def test_each_part_s_own_config_is_accepted(base: tuple[str, ...], tmp_path: Path) -> None:
    # so that a refusal above is the drawn value's, not its part's
    assert prepare(compose_cfg([*FAST, *base, f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"]))


def typed_value(job: Any, path: str) -> Any:
    """The value the prepared job holds at the key `path` (its typed settings, where each part keeps them)."""
    s = job.settings
    roots = {"optimizer": s.optimizer, "task": s.task, "teacher": s.teacher, "logger": s.logger,
             "procedure": job.procedure_settings, "student": job.student, "objective": job.objective,
             "corpus": getattr(job.procedure_settings, "corpus", None)}
    head, _, rest = path.partition(".")
    obj, parts = (roots[head], rest.split(".")) if head in roots else (s.run, path.split("."))  # run blocks too
    for part in parts:
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


def test_every_named_refusal_is_a_boundary_case() -> None:
    cases = {(k.path, v) for k, v in BOUNDED} | {(k.path, v, *k.base[:1]) for k, v in BOUNDED}
    assert set(REFUSED_AT_BOUNDARY) <= cases  # a stale entry would hide nothing; it must still be drawn


@pytest.mark.slow  # the 140 cases together take over 2 s: `make test-fast` leaves them out
@pytest.mark.parametrize(("key", "value"), BOUNDED, ids=lambda x: str(x))
def test_a_boundary_value_is_accepted_unless_a_named_rule_refuses_it(key: Key, value: str, tmp_path: Path) -> None:
    """At the edge of its own range a value is accepted and reaches the job's typed settings; where it conflicts
    with another setting's default (num_labels 1 with three label names, a batch below the micro-batch) it is
    refused by the one line REFUSED_AT_BOUNDARY names."""
    cfg = COMPOSER([*_job(key, value), f"results_dir={tmp_path / 'r'}", f"cache_dir={tmp_path / 'c'}"])
    rule = refusal(key, value)
    if rule is not None:
        with pytest.raises(ConfigError) as err:
            prepare(cfg)
        assert "\n" not in str(err.value) and rule in str(err.value), str(err.value)
        return
    job = prepare(cfg)
    assert float(typed_value(job, key.path)) == float(value)


# Top-level keys the typed schema has and conf/config.yaml leaves out: set with `+key=...` (the sweeper's flags).
PLUS_ONLY = {"dry_run", "dry_run_list", "plan_seeds", "prepare_only", "pack_file", "tune_trial", "tune_study",
             "tune_journal", "tune_chosen"}


def test_conf_config_yaml_and_the_typed_defaults_are_one_set_of_defaults() -> None:
    """Every top-level default is written twice (conf/config.yaml, which Hydra composes, and RunSettings, which
    parses it and generates the config reference): they must say the same (the cache_dir once did not)."""
    composed = plain(compose_cfg([]))
    typed = as_dict(RunSettings())
    assert set(typed) - set(composed) == PLUS_ONLY
    assert {k: composed[k] for k in typed if k in composed} == {k: v for k, v in typed.items() if k in composed}
