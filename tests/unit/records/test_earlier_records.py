"""Records, checkpoints and shared-store keys written by the code before the typed-settings redesign are
still found, resumed and named the same (tests/fixtures/v2/README.md says how they were written)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import V2_BASE as BASE
from helpers import V2_KEYS as KEYS
from helpers import compose_cfg

from distill_sweep.job.identity import identify
from distill_sweep.teachers.output_plan import group_id


@pytest.mark.parametrize("job", KEYS["jobs"], ids=lambda job: " ".join(job["overrides"]))
def test_config_hashes_and_store_keys_are_unchanged(job: dict, tmp_path: Path) -> None:
    ident = identify(compose_cfg([*BASE, *job["overrides"], f"results_dir={tmp_path}"]))
    assert ident.digest == job["config_hash"]
    assert str(ident.out_dir.relative_to(tmp_path)) == job["out_dir"]
    assert ident.teacher.directory(tmp_path, ident.task).name == job["teacher_dir"]
    assert group_id(ident.teacher) == job["group_id"]
    assert [m.directory(tmp_path, ident.task).name for m in ident.members] == job["members"]
