"""The import layers (pyproject.toml's import-linter contracts) hold, and would catch a wrong import.

`make test` runs `lint-imports` on the package itself; these tests show that the same contracts fail on a
copy of the package with one deliberately wrong import (upward, in a loop, or the composed config below
orchestration, torch under a job's identity), and that no import cycle exists at all (also
between a package and its own modules, which the sibling contract does not look at).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
from helpers import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_copy(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess[str]:
    """lint-imports with the project's contracts on a copy of the package where `module` gains `line`."""
    shutil.copytree(ROOT / "distill_sweep", tmp_path / "distill_sweep",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "distill_sweep" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})


def test_the_contracts_hold_on_the_package() -> None:
    proc = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
    assert "4 kept, 0 broken" in proc.stdout


def test_an_upward_import_breaks_the_layer_contract(tmp_path: Path) -> None:
    # the record type (foundations) reaching up to the entry: the shape of the old cycle
    proc = _lint_copy(tmp_path, "results.py", "from distill_sweep import train  # noqa: E402,F401")
    assert proc.returncode != 0
    assert "distill_sweep.results is not allowed to import distill_sweep.train" in proc.stdout


def test_a_cycle_within_a_layer_breaks_the_no_cycles_contract(tmp_path: Path) -> None:
    # schema imports config_space; the reverse import closes a loop inside the foundations layer
    proc = _lint_copy(tmp_path, "config_space.py", "import distill_sweep.schema  # noqa: E402,F401")
    assert proc.returncode != 0
    assert "No import cycles" in proc.stdout and "BROKEN" in proc.stdout


def test_the_config_below_orchestration_breaks_the_one_config_form_contract(tmp_path: Path) -> None:
    # a part that takes the composed config again (what the typed settings replaced)
    proc = _lint_copy(tmp_path, "teacher.py", "from omegaconf import DictConfig  # noqa: E402,F401")
    assert proc.returncode != 0
    assert "distill_sweep.teacher is not allowed to import omegaconf" in proc.stdout


def test_torch_under_a_settings_module_breaks_the_identity_contract(tmp_path: Path) -> None:
    # a student's settings module that imports torch would make every command-line check wait for it
    proc = _lint_copy(tmp_path, "students/settings.py", "import torch  # noqa: E402,F401")
    assert proc.returncode != 0
    assert "distill_sweep.job is not allowed to import torch" in proc.stdout


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import each other in a loop (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def test_strongly_connected_finds_a_loop() -> None:
    loop = strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert {"a", "b", "c"} in loop and {"d"} in loop


def test_no_module_imports_itself_through_others() -> None:
    # imports under `if TYPE_CHECKING:` name types for annotations only, as in the contracts
    graph = grimp.build_graph("distill_sweep", exclude_type_checking_imports=True, cache_dir=None)
    imports = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    loops = [sorted(group) for group in strongly_connected(imports) if len(group) > 1]
    assert loops == []
