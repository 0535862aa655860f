"""job/config.py: a job's config is typed in one pass, and the config as composed is kept read-only beside it."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import FAST, compose_cfg

import distill_sweep.config.parse as parse_module
from distill_sweep.data.augment_settings import AugmentSettings
from distill_sweep.errors import ConfigError
from distill_sweep.job.config import parse_job
from distill_sweep.job.identity import identify

ENSEMBLE = [*FAST, "teacher=tiny_ensemble", "task.augment={name: tang}"]


def test_identify_parses_every_block_of_the_config_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every module that parses settings calls config.parse.parse: counted by where it parses, no block twice
    (an ensemble's members were parsed by the teacher's checks and again for the cache keys)."""
    seen: Counter[str] = Counter()
    real = parse_module.parse

    def counting(cls: type, node: Any, where: str) -> Any:
        seen[where] += 1
        return real(cls, node, where)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("distill_sweep") and getattr(module, "parse", None) is real:
            monkeypatch.setattr(module, "parse", counting)
    ident = identify(compose_cfg(ENSEMBLE))
    assert len(ident.members) >= 2 and "teacher.ensemble[1]" in seen
    assert {where for where, n in seen.items() if n > 1} == set()


def test_the_typed_job_holds_every_group_and_the_composed_config_read_only() -> None:
    job = parse_job(compose_cfg(ENSEMBLE))
    assert isinstance(job.settings.task.augment, AugmentSettings) and job.settings.task.augment.name == "tang"
    assert [m.finetune.seed for m in job.members] == [m["finetune"]["seed"] for m in
                                                      _members(job.composed["teacher"])]
    assert job.configured_task is job.settings.task  # the task procedure reads the task
    with pytest.raises(TypeError):
        job.composed["seed"] = 3  # type: ignore[index]


def test_a_procedure_that_reads_a_corpus_keeps_the_configured_task_for_its_teacher() -> None:
    job = parse_job(compose_cfg([*FAST, "procedure=task_agnostic", "corpus=toy", "teacher=tiny_mlm"]))
    assert job.settings.task.name == "pretrain_toy" and job.configured_task.name == "toy"


def _members(block: dict[str, Any]) -> list[dict[str, Any]]:
    from distill_sweep.config.schema import ensemble_members

    return ensemble_members(block)


def test_a_preset_without_its_package_line_is_refused(tmp_path: Path) -> None:
    """A user's preset (--config-dir) without `# @package _global_` is composed under `experiment.`: its `seed: 5`
    ran at seed 1, silently. The package line given, the same file sets the seed."""
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text("seed: 5\n")
    own = [*FAST, "experiment=mine", f"hydra.searchpath=[file://{tmp_path}]"]
    with pytest.raises(ConfigError, match=r"composed as experiment\.seed, where nothing reads them: .*@package _global_"):
        identify(compose_cfg(own))
    (tmp_path / "experiment" / "mine.yaml").write_text("# @package _global_\nseed: 5\n")
    assert identify(compose_cfg(own)).seed == 5
