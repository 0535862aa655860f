"""tests/unit/ runs no job: its tests run in the pytest process (`make test-fast` runs the folder). A test that runs a
job, the command line, ranks or a pack belongs under tests/integration/ (marked `slow` by tests/conftest.py), so a
call of one of those entry points under tests/unit/ fails here, by file and line."""

from __future__ import annotations

import ast

from helpers import ROOT

UNIT = ROOT / "tests" / "unit"
# the entry points that run jobs (in-process or the command line), packs, sweeps and ranks
JOB_RUNNERS = {"run_job", "run_pack", "run_cli", "run_cli_preloaded", "PreloadedPython", "spawn", "start_processes",
               "Popen"}


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def offences(tree: ast.AST) -> list[tuple[int, str]]:
    return sorted((node.lineno, f"calls {_called(node)}") for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and _called(node) in JOB_RUNNERS)


def test_the_check_sees_a_job_a_cli_run_and_ranks() -> None:
    source = ("def test_a(): run_job(cfg)\n"
              "def test_b(): helpers.run_cli_preloaded(['x'], cwd=p)\n"
              "def test_c(): mp.spawn(worker, nprocs=2)\n"
              "def test_d(): run_job._at_baseline_line(r, 'f1')\n")  # a helper of the module, not a job: allowed
    assert offences(ast.parse(source)) == [(1, "calls run_job"), (2, "calls run_cli_preloaded"), (3, "calls spawn")]


def test_no_unit_test_runs_a_job() -> None:
    files = sorted(UNIT.rglob("*.py"))
    assert len(files) > 50  # the folder is there and walked
    found = [f"{path.relative_to(ROOT)}:{line} {what}" for path in files
             for line, what in offences(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, "run jobs under tests/integration/ (test_<name>_runs.py), not tests/unit/:\n" + "\n".join(found)
