"""The report's output on a disk that refuses it (read-only, full), and its warnings on stderr."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import mounted_tmpfs, write_record

from distill_sweep.report.cli import main


def _store(root: Path, seeds: int = 2) -> Path:
    for seed in range(seeds):
        write_record(root, task="rte", objective="vanilla_kd", seed=seed, score=0.60 + seed / 100)
        write_record(root, task="rte", objective="att_kl", seed=seed, score=0.70 + seed / 100)
    return root


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    yield from mounted_tmpfs(tmp_path / "ro", "ro,size=1m")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    yield from mounted_tmpfs(tmp_path / "disk", "size=64k")


def test_out_on_a_read_only_disk_is_one_line(tmp_path: Path, read_only_disk: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(_store(tmp_path / "results")), f"out={read_only_disk / 'tables'}"]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"distill_sweep.report: error: cannot write the report to {read_only_disk / 'tables'}: "
                                "Read-only file system [EROFS]; nothing was written there (out=DIR writes it elsewhere)"]
    assert out == ""


def test_out_on_a_full_disk_is_one_line_and_leaves_what_was_there(tmp_path: Path, small_disk: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Room for some of the report's files, not all: none of them is left, the file already there is intact."""
    tables = small_disk / "tables"
    tables.mkdir()
    (tables / "table1.md").write_text("the user's earlier table\n")
    stat = os.statvfs(small_disk)
    (small_disk / "filler").write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - 8 * 1024))  # 8 kB left
    assert main([str(_store(tmp_path / "results")), f"out={tables}"]) == 1
    _, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert line.startswith(f"distill_sweep.report: error: cannot write the report to {tables}: No space left on device "
                           "[ENOSPC]; nothing was written there"), line
    assert [p.name for p in tables.iterdir()] == ["table1.md"]
    assert (tables / "table1.md").read_text() == "the user's earlier table\n"


@pytest.mark.parametrize(("ddof", "warned"), [(1, False), (2, True)])
def test_a_ddof_at_least_the_seeds_is_a_warning_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          ddof: int, warned: bool) -> None:
    store = _store(tmp_path / "results", seeds=2)
    assert main([str(store), f"ddof={ddof}", "paper=false", "format=text"]) == 0
    _, err = capsys.readouterr()
    warning = (f"distill_sweep.report: warning: ddof={ddof}: 2 of 2 cells have at most {ddof} seed(s), so their std "
               "is left out")
    assert (warning in err) is warned, err


def test_a_paper_dir_that_does_not_exist_is_a_warning_on_stderr(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path / "results")
    assert main([str(store), f"paper_dir={tmp_path / 'nowhere'}", "format=text"]) == 0
    _, err = capsys.readouterr()
    assert f"distill_sweep.report: warning: paper_dir '{tmp_path / 'nowhere'}' does not exist" in err
    assert main([str(store), f"paper_dir={tmp_path / 'nowhere'}", "paper=false", "format=text"]) == 0
    assert "paper_dir" not in capsys.readouterr().err


def test_a_tilde_in_the_reports_paths_is_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _store(tmp_path / "results")
    monkeypatch.chdir(tmp_path / "results")
    assert main(["results_dir='~/results'", "out='~/tables'", "format=text", "paper=false"]) == 0
    assert (tmp_path / "tables" / "table1.md").is_file()
    assert not (tmp_path / "results" / "~").exists()
