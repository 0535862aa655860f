"""Rules of the top-level settings that are not a field's own range."""

from __future__ import annotations

import pytest

from distill_sweep.config.schema import RunSettings
from distill_sweep.errors import ConfigError


@pytest.mark.parametrize("key", ["results_dir", "cache_dir"])
def test_an_empty_directory_is_refused(key: str) -> None:
    with pytest.raises(ConfigError, match=f"^{key} is empty"):
        RunSettings(**{key: "  "}).validate("")


def test_an_empty_cache_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """conf/config.yaml reads $DISTILL_SWEEP_CACHE when it is set, even to "": the line says where "" came from."""
    monkeypatch.setenv("DISTILL_SWEEP_CACHE", "")
    with pytest.raises(ConfigError, match="DISTILL_SWEEP_CACHE is set but empty"):
        RunSettings(cache_dir="").validate("")
    monkeypatch.delenv("DISTILL_SWEEP_CACHE")
    RunSettings(cache_dir="/tmp/x").validate("")  # a directory: no refusal
