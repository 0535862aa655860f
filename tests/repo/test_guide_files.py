"""An extension guide's worked example adds its part in at most three files (each part in one place): the files
its blocks name on their first line (`# distill_sweep/...`, `# conf/...`), the files the example runs with
(tests/e2e/test_readme_commands.py)."""

from __future__ import annotations

import re

import pytest
from helpers import ROOT

BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
# the guides whose part has its settings and defaults in one place
ONE_PLACE = ["add-student.md", "add-procedure.md", "add-objective.md"]


@pytest.mark.parametrize("page", ONE_PLACE)
def test_the_worked_example_touches_at_most_three_files(page: str) -> None:
    text = (ROOT / "docs" / "guide" / page).read_text()
    files = {block.split()[1] for kind, block in BLOCK.findall(text)
             if kind in ("python", "yaml") and block.startswith(("# distill_sweep/", "# conf/"))}
    assert files and len(files) <= 3, sorted(files)
