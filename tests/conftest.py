"""pytest fixtures; the helpers they share with the tests live in helpers.py."""

from __future__ import annotations

from pathlib import Path

import helpers  # noqa: F401  (sets the offline environment before any test imports transformers)
import pytest
import torch


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache (toy tokenizer, tokenised data, fine-tuned teachers) for the whole session."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors: one intra-op thread is faster, and immune to OpenMP stalls on a shared 2-core box."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# The tests under these folders run jobs, the command line, ranks, sweeps or benches: each is marked `slow`
# (`make test-fast` runs tests/unit and tests/repo; `-m "not slow"` leaves these out anywhere).
SLOW_FOLDERS = (Path(__file__).resolve().parent / "integration", Path(__file__).resolve().parent / "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests under tests/integration/ and tests/e2e/ are marked `slow`; tests marked `cuda` skip, one line each,
    where torch sees no CUDA device (`make gpu-check` runs them)."""
    for item in items:
        if any(folder in Path(str(item.path)).resolve().parents for folder in SLOW_FOLDERS):
            item.add_marker(pytest.mark.slow)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)
