"""A guide's code blocks pass `ruff` as written: each Python block, pasted at the end of the module its first line
names (or as a new module), leaves that module clean. tests/e2e/test_readme_commands.py runs the same blocks."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
# every extension guide with a Python block (add-task's example is YAML alone)
PAGES = sorted(p.name for p in (ROOT / "docs" / "guide").glob("add-*.md") if "```python" in p.read_text())
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


def test_the_guides_with_code_are_checked() -> None:
    assert {"add-objective.md", "add-procedure.md", "add-student.md", "add-paper-table.md"} <= set(PAGES)


def pasted(page: str) -> list[tuple[str, str]]:
    """(module path, the module's text with the block pasted at its end) for each Python block of the page."""
    out = []
    for kind, block in BLOCK.findall((ROOT / "docs" / "guide" / page).read_text()):
        if kind == "python" and block.startswith("# distill_sweep/"):
            path = block.split()[1]
            module = ROOT / path
            out.append((path, f"{module.read_text()}\n\n{block}" if module.exists() else block))
    return out


@pytest.mark.parametrize("page", PAGES)
def test_every_block_pasted_where_it_says_passes_ruff(page: str) -> None:
    assert RUFF is not None, "ruff is installed with the dev extras"
    blocks = pasted(page)
    assert blocks, f"{page}: no Python block naming its module"
    for path, text in blocks:
        proc = subprocess.run([RUFF, "check", "--no-cache", "--stdin-filename", path, "-"], input=text, cwd=ROOT,
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{page}, {path}:\n{proc.stdout[-2000:]}"


def test_the_check_catches_a_block_that_ruff_refuses() -> None:
    proc = subprocess.run([RUFF, "check", "--no-cache", "--stdin-filename", "distill_sweep/objectives/hidden.py", "-"],
                          input=(ROOT / "distill_sweep/objectives/hidden.py").read_text() + "\nimport os\n",
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1 and "E402" in proc.stdout
