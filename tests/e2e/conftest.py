"""End-to-end tests (the command line, sweeps, SLURM, the README's commands): each runs real jobs, so every test
here is marked `slow` (`make test-fast` leaves them out)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.slow)
