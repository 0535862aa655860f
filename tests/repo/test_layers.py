"""The import layers (pyproject.toml's import-linter contracts) hold, and would catch a wrong import.

`make test` runs `lint-imports` on the package itself; these tests show that the same contracts fail on a
copy of the package with one deliberately wrong import (upward, type-only included, in a loop, or the composed
config below orchestration, torch under a job's identity), that every module of the package sits in a layer,
and that no import cycle exists at all (also between a package and its own modules, which the sibling contract
does not look at).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import tomllib
from helpers import ROOT

# beside the interpreter (the venv's), else on PATH (`make test-hydra14`'s interpreter is in a venv of Hydra alone)
LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports") \
    or "lint-imports"
RUNTIME_CONTRACTS = "importlinter-runtime.toml"  # what runs only: type-only imports left out


def _lint_copy(tmp_path: Path, module: str, line: str, *config: str) -> subprocess.CompletedProcess[str]:
    """lint-imports with the project's contracts on a copy of the package where `module` gains `line`."""
    shutil.copytree(ROOT / "distill_sweep", tmp_path / "distill_sweep",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", RUNTIME_CONTRACTS):
        shutil.copy(ROOT / name, tmp_path / name)
    target = tmp_path / "distill_sweep" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", *config], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})


def _layers() -> list[str]:
    """The names of the layers contract, in its order (a layer's siblings split on ':')."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    return [name.strip() for layer in layers for name in layer.split(":")]


def test_the_contracts_hold_on_the_package() -> None:
    proc = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
    assert "3 kept, 0 broken" in proc.stdout
    proc = subprocess.run([str(LINT_IMPORTS), "--no-cache", RUNTIME_CONTRACTS], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout
    assert "1 kept, 0 broken" in proc.stdout


def test_every_module_is_in_a_layer() -> None:
    """import-linter ignores a module that no layer names: a new top-level module or folder must join one."""
    layered = set(_layers())
    top = {p.stem if p.is_file() else p.name for p in (ROOT / "distill_sweep").iterdir()
           if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()}
    assert top - layered == set()
    assert layered - top == set()  # and every name of the contract is there
    assert len([p for p in (ROOT / "distill_sweep").glob("*.py") if p.name != "__init__.py"]) <= 5


def test_the_design_page_draws_the_contracts_layers() -> None:
    """docs/design.md's layer table lists the contract's names, layer by layer, in the contract's order."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    want = [sorted(name.strip() for name in layer.split(":")) for layer in layers]
    rows = [line for line in (ROOT / "docs" / "design.md").read_text().splitlines()
            if re.match(r"\| layer \d+ \|", line)]
    got = [sorted(cell.strip(" `") for cell in row.split("|")[2].split(",")) for row in rows]
    assert got == want


def test_an_upward_import_breaks_the_layer_contract(tmp_path: Path) -> None:
    # the record type (foundations) reaching up to the entry: the shape of the old cycle
    proc = _lint_copy(tmp_path, "records/record.py", "from distill_sweep.cli import run_job  # noqa: E402,F401")
    assert proc.returncode != 0
    assert "distill_sweep.records is not allowed to import distill_sweep.cli" in proc.stdout


def test_a_type_only_upward_import_breaks_the_layer_contract(tmp_path: Path) -> None:
    # a part naming an orchestration type for its annotations (what training.context.Job replaced)
    proc = _lint_copy(tmp_path, "training/context.py", "from typing import TYPE_CHECKING  # noqa: E402\n"
                      "if TYPE_CHECKING:\n    from distill_sweep.job.prepare import Job  # noqa: F401,F811")
    assert proc.returncode != 0
    assert "distill_sweep.training is not allowed to import distill_sweep.job" in proc.stdout


def test_a_cycle_within_a_layer_breaks_the_no_cycles_contract(tmp_path: Path) -> None:
    # the typed schema (config) is imported by the record (records); importing the record back closes a loop
    proc = _lint_copy(tmp_path, "config/schema.py", "import distill_sweep.records.record  # noqa: E402,F401")
    assert proc.returncode != 0
    assert "BROKEN" in proc.stdout


def test_the_config_below_orchestration_breaks_the_one_config_form_contract(tmp_path: Path) -> None:
    # a part that takes the composed config again (what the typed settings replaced)
    proc = _lint_copy(tmp_path, "teachers/finetuned.py", "from omegaconf import DictConfig  # noqa: E402,F401")
    assert proc.returncode != 0
    assert "distill_sweep.teachers is not allowed to import omegaconf" in proc.stdout


def test_torch_under_a_settings_module_breaks_the_identity_contract(tmp_path: Path) -> None:
    # a student's settings module that imports torch would make every command-line check wait for it
    proc = _lint_copy(tmp_path, "students/truncated_settings.py", "import torch  # noqa: E402,F401", RUNTIME_CONTRACTS)
    assert proc.returncode != 0
    assert "distill_sweep.job.identity is not allowed to import torch" in proc.stdout


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
    # type-only imports (`if TYPE_CHECKING:`) included, as in the layers contract
    graph = grimp.build_graph("distill_sweep", exclude_type_checking_imports=False, cache_dir=None)
    imports = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    loops = [sorted(group) for group in strongly_connected(imports) if len(group) > 1]
    assert loops == []


# an assignment into the record's config, or a call that changes it in place
RECORD_CONFIG_EDIT = re.compile(r"""\[["']config["']\](\[[^\]]+\])*\s*=[^=]|\[["']config["']\]\.(update|pop|setdefault|clear)\(""")


def test_the_records_config_is_written_once_by_new_record() -> None:
    """The record's config is the job's config as its identity sees it, written once (cli/run_job.new_record):
    a procedure that edited it would make a record disagree with the config hash it is filed under."""
    edits = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "distill_sweep").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if RECORD_CONFIG_EDIT.search(line)]
    assert edits == []
    assert RECORD_CONFIG_EDIT.search('    record["config"]["task"] = None')  # the pattern sees an edit
    assert not RECORD_CONFIG_EDIT.search('    x = record["config"]["task"] == 1')


def test_no_module_below_orchestration_reads_the_composed_config() -> None:
    """The config as composed (JobConfig.composed, kept by job/config.py) stays in the entry and orchestration
    layers: below them, parts read typed settings only. The layers contract already keeps `distill_sweep.job` out
    of their imports; this keeps the dict itself from being handed down and read. In the job layer only the check
    of the settings a user chose reads it (job/identity.py): the config hash and the teacher keys are the typed
    config's (job/hashed.py, job/teacher_keys.py)."""
    upper = {"__main__", "cli", "plugins", "report", "bench", "status", "sweep", "job"}
    reads = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "distill_sweep").rglob("*.py"))
             if path.relative_to(ROOT / "distill_sweep").parts[0].removesuffix(".py") not in upper
             for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"\.composed\b", line)]
    assert reads == []
    in_job = {path.name for path in sorted((ROOT / "distill_sweep" / "job").glob("*.py"))
              if re.search(r"\.composed\b", path.read_text())}
    assert in_job <= {"config.py", "identity.py"}
