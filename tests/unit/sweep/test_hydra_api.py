"""What distill_sweep relies on from Hydra's internals, pinned in one place.

The skip-completed sweeper (sweep/sweeper.py) subclasses Hydra's internal BasicSweeper, sweep/compose.py splits
a grid with it, and the command line reads Hydra's own argparse parser (__main__.py). None of these is Hydra's
public API: a Hydra release (1.4 is in development) that moves or changes one fails here, by name, rather than
somewhere in a sweep.
"""

from __future__ import annotations

import inspect

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from distill_sweep.config.space import hydra_version_base
from distill_sweep.sweep.loads import SHARED


def _parameters(function: object) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "self"]  # type: ignore[arg-type]


def test_basic_sweeper_keeps_what_the_skip_completed_sweeper_uses() -> None:
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    sweeper = BasicSweeper(max_batch_size=None, params=None)  # SkipCompletedSweeperImpl.__init__ passes both
    # set by BasicSweeper.setup (hydra_context, task_function, config) and read by sweep()/_launch_all
    for attribute in ("config", "launcher", "hydra_context", "overrides", "batch_index", "max_batch_size"):
        assert hasattr(sweeper, attribute), attribute
    assert _parameters(BasicSweeper.setup) == ["hydra_context", "task_function", "config"]
    assert _parameters(BasicSweeper._parse_config) == []  # the config's sweep params as override strings

    parsed = OverridesParser.create().parse_overrides(["a=1,2", "b=x,y"])
    batches = BasicSweeper.split_arguments(parsed, None)  # a static method: [batch][job][override]
    assert sorted(batches[0]) == sorted([["a=1", "b=x"], ["a=1", "b=y"], ["a=2", "b=x"], ["a=2", "b=y"]])
    jobs = [["a=1"], ["a=2"], ["a=3"]]
    assert list(BasicSweeper.split_overrides_to_chunks(jobs, 2)) == [[["a=1"], ["a=2"]], [["a=3"]]]

    # the batch loop of _launch_all: overrides and batch_index set, then is_done / get_job_batch
    sweeper.overrides = list(BasicSweeper.split_overrides_to_chunks(jobs, 2))
    sweeper.batch_index = 0
    seen = []
    while not sweeper.is_done():
        seen.append(sweeper.get_job_batch())
    assert seen == [[["a=1"], ["a=2"]], [["a=3"]]]


def test_launcher_context_and_job_return_keep_what_the_sweeper_reads() -> None:
    from hydra.core.config_loader import ConfigLoader
    from hydra.core.utils import JobReturn, JobStatus
    from hydra.plugins.launcher import Launcher
    from hydra.types import HydraContext

    assert _parameters(Launcher.launch) == ["job_overrides", "initial_job_idx"]
    assert "config_loader" in inspect.signature(HydraContext).parameters
    assert _parameters(ConfigLoader.load_sweep_config) == ["master_config", "sweep_overrides"]
    assert "config_loader" in inspect.signature(OverridesParser.create).parameters
    done = JobReturn(status=JobStatus.COMPLETED, _return_value="x")
    assert done.status.name == "COMPLETED" and done.return_value == "x"


def test_what_the_in_process_launcher_takes_from_hydra_keeps_its_shape() -> None:
    """sweep/launch.py's launcher is Hydra's basic launcher given a context whose loader serves the sweeper's
    configs; sweep/compose.launch_config applies a job's values with Hydra's own function."""
    import dataclasses

    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher
    from hydra.types import HydraContext

    assert _parameters(BasicLauncher.setup) == ["hydra_context", "task_function", "config"]
    assert {"config_loader", "callbacks"} <= {f.name for f in dataclasses.fields(HydraContext)}  # (replaced: the loader)
    assert _parameters(ConfigLoaderImpl._apply_overrides_to_config) == ["overrides", "cfg"]
    # the basic launcher composes each job through its context's loader (the call the in-process one answers)
    assert "self.hydra_context.config_loader.load_sweep_config(" in inspect.getsource(BasicLauncher.launch)


def test_hydras_argument_parser_keeps_its_option_table() -> None:
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    actions = parser._option_string_actions  # __main__.overrides_first reads each flag's nargs
    for flag in ("-m", "--multirun", "--cfg", "-cn", "--info", "--help"):
        assert flag in actions, flag
    args = parser.parse_known_args(["a=1", "-m", "--cfg", "job"])[0]
    assert args.overrides == ["a=1"] and args.multirun and args.cfg == "job"


def test_version_base_is_passed_only_to_the_hydra_that_takes_it() -> None:
    """Hydra 1.3 needs version_base="1.3" (else 1.1's defaults); 1.4 warns on every run when it is given."""
    assert hydra_version_base("1.3.8") == {"version_base": "1.3"}
    assert hydra_version_base("1.2.0") == {"version_base": "1.3"}
    for newer in ("1.4.0rc3", "1.4.0.dev10", "1.4.0", "1.5.1", "2.0.0"):
        assert hydra_version_base(newer) == {}, newer


@pytest.mark.skipif(not SHARED, reason="sweep/loads.py replaces Hydra 1.3's loader parts only (another Hydra: as is)")
def test_the_loader_parts_a_sweeps_composes_replace_keep_their_shape() -> None:
    """sweep/loads.py replaces these for the duration of a sweep's composes (their results are compared with
    Hydra's own in test_fast_planning.py); a Hydra that renames or reshapes one fails here by name."""
    import dataclasses

    from hydra._internal import defaults_list
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.config_repository import CachingConfigRepository, ConfigRepository, IConfigRepository
    from hydra.core.default_element import ResultDefault
    from hydra.plugins.config_source import ConfigResult

    assert _parameters(ConfigLoaderImpl._compose_config_from_defaults_list) == ["defaults", "repo"]
    assert _parameters(ConfigLoaderImpl._load_single_config) == ["default", "repo"]
    assert _parameters(defaults_list._create_interpolation_map) == ["overrides", "defaults_list", "self_added"]
    assert [f.name for f in dataclasses.fields(ConfigResult)] == ["provider", "path", "config", "header",
                                                                   "defaults_list", "is_schema_source"]
    assert {"config_path", "package", "parent", "is_self", "primary"} <= {f.name for f in dataclasses.fields(ResultDefault)}
    assert sorted(IConfigRepository.__abstractmethods__) == [
        "config_exists", "get_group_options", "get_schema_source", "get_sources", "group_exists",
        "initialize_sources", "load_config"]
    from hydra._internal.utils import create_config_search_path

    loader = ConfigLoaderImpl(create_config_search_path(None))
    assert type(loader.repository) is ConfigRepository  # copied shallow by SharedLoads: sources re-made anew
    assert "self.sources = []" in inspect.getsource(ConfigRepository.initialize_sources)
    assert _parameters(CachingConfigRepository.__init__) == ["delegate"]


def test_what_a_checked_job_is_run_with_keeps_its_shape() -> None:
    """cli/composed_run.py runs a job from the command line's composition with Hydra's own pieces: what
    `Hydra.run` does after composing (callbacks, `run_job` into hydra.run.dir, the report of a failure)."""
    from hydra._internal.callbacks import Callbacks
    from hydra._internal.utils import run_and_report
    from hydra.core.utils import configure_log, run_job

    assert _parameters(run_job)[:5] == ["task_function", "config", "job_dir_key", "job_subdir_key", "hydra_context"]
    assert "configure_logging" in _parameters(run_job)
    assert _parameters(configure_log)[:2] == ["log_config", "verbose_config"]
    assert _parameters(run_and_report) == ["func"]
    for hook in ("on_run_start", "on_run_end", "on_job_start", "on_job_end"):
        assert callable(getattr(Callbacks(), hook)), hook
