"""Every file and module the package's docstrings and comments name exists: a move or a rename that leaves a
docstring pointing at the old place fails here, naming the line.

What counts as a name: `something.py` (bare, `folder/name.py` or a glob such as `tests/unit/*/test_*.py`) and
dotted `distill_sweep.<module>[.<name>]` or `<folder>/<module>.<name>`. A bare file name exists when some file of the project has it; a path
is taken from the repository root, the package or tests/; a dotted name's module must exist and what follows it
must be defined at its top level (or be a submodule).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "distill_sweep"
FILE = re.compile(r"(?<![\w/.])((?:[\w.*-]+/)*[\w*-]+\.py)\b")
DOTTED = re.compile(r"\bdistill_sweep(?:\.\w+)+")
FOLDERS = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
# `job/identity.identify`: a module of the package by its path, and a name in it
IN_MODULE = re.compile(r"(?<![\w/.])((?:" + "|".join(FOLDERS) + r")/\w+\.\w+)\b")
# other projects' files the docstrings name on purpose (the code each part follows)
ELSEWHERE = {"data_augmentation.py"}  # TinyBERT's augmentation script (data/augment.py)


def _texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring and comment of a module."""
    source = path.read_text()
    scopes: list[ast.AST] = [ast.parse(source)]
    while scopes:  # statements only: docstrings never sit inside expressions
        node = scopes.pop()
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if (text := ast.get_docstring(node, clean=False)) is not None:
                yield (node.body[0].lineno, text)
        scopes += [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)]
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


@cache
def _project_names() -> frozenset[str]:
    return frozenset(p.name for where in (PACKAGE, ROOT / "tests", ROOT / "docs", ROOT / "conf")
                     for p in where.rglob("*.py"))


def _file_exists(ref: str) -> bool:
    if ref in ELSEWHERE:
        return True
    if "/" not in ref and "*" not in ref:
        return ref in _project_names()
    return any(next(base.glob(ref), None) is not None for base in (ROOT, PACKAGE, ROOT / "tests"))


@cache
def _top_level_names(module: Path) -> frozenset[str]:
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return frozenset(names)


def _dotted_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):  # the longest prefix that is a module, then one name defined in it
        base = ROOT.joinpath(*parts[:n])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if module.is_file():
            return n == len(parts) or parts[n] in _top_level_names(module)
    return False


def stale_names(package: Path = PACKAGE) -> list[str]:
    stale = []
    for path in sorted(package.rglob("*.py")):
        for line, text in _texts(path):
            missing = [m for m in FILE.findall(text) if not _file_exists(m)]
            missing += [m for m in DOTTED.findall(text) if not _dotted_exists(m)]
            missing += [m for m in IN_MODULE.findall(text)
                        if not m.endswith(".py") and not _dotted_exists("distill_sweep." + m.replace("/", "."))]
            stale += [f"{path.relative_to(package.parent)}:{line}: {name}" for name in missing]
    return stale


def test_docstrings_and_comments_name_files_and_modules_that_exist() -> None:
    assert not stale_names(), "docstrings or comments name what does not exist:\n" + "\n".join(stale_names())


def test_the_check_finds_a_stale_name(tmp_path: Path) -> None:
    """The check itself: each kind of name, pointing nowhere, is reported with its line."""
    probe = tmp_path / "probe"  # its names are looked up in the project, as the package's own are
    probe.mkdir()
    (probe / "probe.py").write_text('"""Read by grid.py and distill_sweep.job.nowhere."""\n\n'
                                    "X = 1  # see training/nowhere.py and distill_sweep.records.files.nothing\n"
                                    "Y = 2  # real: data/glue.py, distill_sweep.records.files.write_json_atomic\n"
                                    "Z = 3  # records/files.write_json_atomic is real, records/files.nothing is not\n")
    assert stale_names(probe) == [
        "probe/probe.py:1: grid.py",
        "probe/probe.py:1: distill_sweep.job.nowhere",
        "probe/probe.py:3: training/nowhere.py",
        "probe/probe.py:3: distill_sweep.records.files.nothing",
        "probe/probe.py:5: records/files.nothing",
    ]
