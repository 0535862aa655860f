"""Each extension guide's example pasted as written keeps the suite's registry checks green (issue 49, item 6.1:
following docs/guide/add-objective.md exactly made `make test-fast` fail, 5 tests: a unit test named every objective
and the objective model tests ran the example's term on a student of another width). test_readme_commands runs
each guide's command with its example; this runs, with every example in place in a copy of the repository, the unit
tests that read the registries and config groups the examples add to, in a pytest of their own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDES = sorted((ROOT / "docs" / "guide").glob("add-*.md"))
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
# the unit tests that read each registry or config group (the lists of what exists): what an example adds to
CHECKS = {
    "objectives": ["tests/unit/objectives/test_objectives.py::test_registry_and_yaml_files",
                   "tests/unit/objectives/test_objectives_models.py",
                   "tests/unit/objectives/test_objective_declarations.py",
                   "tests/unit/objectives/test_term_modules.py"],
    "students": ["tests/unit/students/test_student_options.py", "tests/unit/students/test_student_declarations.py"],
    "procedures": ["tests/unit/procedures/test_procedure_options.py"],
    "task": ["tests/unit/data/test_data.py"],
    "report": ["tests/unit/report/test_report_layouts.py"],
}
LEFT_OUT = (".git", ".venv*", "__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache", "*.egg-info", "site", "multirun",
            "outputs", "wandb", "demo-results", ".design")
# and the one that reads every settings field of every part (each key declares its kind: an example's new key too)
EVERY_KEY = "tests/unit/config/test_key_kinds.py::test_every_field_of_every_settings_block_declares_its_kind"


def example_files(page: Path) -> dict[str, str]:
    """The page's Python and YAML blocks by the file their first line names (`# distill_sweep/...`, `# conf/...`)."""
    files: dict[str, str] = {}
    for kind, block in BLOCK.findall(page.read_text()):
        first = block.splitlines()[0] if block.strip() else ""
        if kind in ("python", "yaml") and re.fullmatch(r"# (distill_sweep|conf)/\S+\.(py|yaml)", first.strip()):
            files[first[2:].strip()] = files.get(first[2:].strip(), "") + block
    return files


def checks_for(files: dict[str, str]) -> list[str]:
    """The registry checks of the packages and groups the example writes to."""
    areas = {Path(f).parts[1] for f in files}
    found = sorted({test for area in areas for test in CHECKS.get(area, [])})
    if (ROOT / EVERY_KEY.split("::")[0]).is_file():
        found.append(EVERY_KEY)
    return found


def test_every_guide_has_an_example_with_registry_checks():
    assert len(GUIDES) >= 5
    for page in GUIDES:
        files = example_files(page)
        assert files, f"{page.name}: no block naming its file"
        assert {Path(f).parts[1] for f in files} & set(CHECKS), (page.name, sorted(files))
    for tests in CHECKS.values():
        for test in tests:
            assert (ROOT / test.split("::")[0]).is_file(), test


def test_the_registry_checks_pass_with_every_guides_example_in_place(tmp_path: Path):
    """All the guides' examples at once, in one copy (they add different names, as a newcomer following two
    guides would), and the registry checks of everything they add to in one pytest."""
    copy = tmp_path / "repo"  # the checkout, less what is built or run (the paper's numbers of results/ kept)
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(*LEFT_OUT))
    shutil.rmtree(copy / "results", ignore_errors=True)
    shutil.copytree(ROOT / "results" / "paper", copy / "results" / "paper")
    files: dict[str, str] = {}
    for page in GUIDES:
        for name, block in example_files(page).items():
            files[name] = files.get(name, "") + block
    for name, block in files.items():  # a new module, or a block appended to an existing one (declarations.py)
        target = copy / name
        target.write_text((target.read_text() + "\n\n" if target.exists() else "") + block)
    env = {**os.environ, "PYTHONPATH": str(copy), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                           *checks_for(files)], cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"the guides' examples in place ({', '.join(sorted(files))}):\n{done.stdout[-6000:]}\n"
                    f"{done.stderr[-2000:]}", pytrace=False)
    assert " passed" in done.stdout.strip().splitlines()[-1]
