"""Two values of a result-invariant key give the same record: every key declared `INVARIANT` (or `nondeterministic`,
within a float tolerance) at a second legal value (tests/key_kinds.py), on the tiny job of each family (an encoder's
task-specific distillation, a decoder's causal_lm), against the job at the first value. The config-only checks of
every key (hash, teacher key): tests/unit/config/test_key_kinds.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from helpers import CAUSAL_FAST, FAST, compose_cfg
from key_kinds import TIMING, KindCase, kind_cases

from distill_sweep.errors import ConfigError

CASES = [c for c in kind_cases() if c.kind in ("invariant", "nondeterministic")]
FAMILIES = {"encoder": [*FAST, "max_steps_per_epoch=6"], "decoder": [*CAUSAL_FAST, "objective=fkl", "procedure.data=instructions"]}
# Keys whose value is a place: the case's value is made a place under the test's own directory.
PLACES = ("results_dir", "cache_dir", "logger.dir", "pack_file", "tune_chosen")


def numbers(record: Any, path: str = "") -> dict[str, float]:
    """Every number of a record by its path, less its timing and its copy of the config (which holds the key)."""
    if isinstance(record, dict):
        return {k: v for key, value in record.items() if key not in (*TIMING, "config")
                for k, v in numbers(value, f"{path}.{key}").items()}
    if isinstance(record, list):
        return {k: v for i, value in enumerate(record) for k, v in numbers(value, f"{path}[{i}]").items()}
    if isinstance(record, (int, float)) and not isinstance(record, bool):
        return {path: float(record)}
    return {}


def _run(overrides: list[str], results: Path, cache: Path) -> dict[str, Any]:
    from distill_sweep.cli.run_job import run_job

    return run_job(compose_cfg([*overrides, f"results_dir={results}", f"cache_dir={cache}"]), alone=True)


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> Any:
    """Each family's job at every key's first value (with the case's base: the settings that make a job read it)."""
    root, done = tmp_path_factory.mktemp("baselines"), {}

    def baseline(family: str, base: tuple[str, ...]) -> dict[str, Any]:
        if (family, base) not in done:
            done[family, base] = _run([*FAMILIES[family], *base], root / f"{family}-{len(done)}", shared_cache)
        return done[family, base]
    return baseline


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_result_invariant_key_leaves_every_number_of_the_record(
        case: KindCase, family: str, baselines: Any, tmp_path: Path, shared_cache: Path) -> None:
    """Completed at both values: equal in every number but timing (bit for bit for an invariant key, within 1e-5 for
    a nondeterministic one). A value a job alone does not take (a sweep's key, a setting that needs several processes)
    may be refused in one line, before any work; never run to other numbers."""
    value = str(tmp_path / case.path.replace(".", "_")) if case.path in PLACES else case.value
    cache = Path(value) if case.path == "cache_dir" else shared_cache
    overrides = [*FAMILIES[family], *case.base, f"++{case.path}={value}"]
    try:
        record = _run(overrides, tmp_path / "results" if case.path != "results_dir" else Path(value), cache)
    except ConfigError as err:
        assert "\n" not in str(err)
        pytest.skip(f"refused for a job alone: {err}")
    if case.path == "prepare_only":  # the sweeper's build job: the teacher and its store made, no student, no record
        assert not list((tmp_path / "results").rglob("result.json"))
        return
    base = baselines(family, case.base)
    assert record["status"] == base["status"] == "completed", record.get("error")
    assert record["config_hash"] == base["config_hash"]
    mine, theirs = numbers(record), numbers(base)
    assert mine.keys() == theirs.keys()
    if case.kind == "invariant":
        differ = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
    else:
        differ = {k: (mine[k], theirs[k]) for k in mine if not math.isclose(mine[k], theirs[k], rel_tol=1e-5,
                                                                            abs_tol=1e-6)}
    assert not differ, f"{case.path}={case.value} ({case.kind}) changes {differ}"
