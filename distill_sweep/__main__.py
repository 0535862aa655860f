"""`python -m distill_sweep [overrides] [-m]`."""

from __future__ import annotations

import contextlib
import functools
import io
import re
import shutil
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError, OmegaConfBaseException

from distill_sweep.cli.composed_run import JOB_NAME, run_composed
from distill_sweep.cli.run_job import main, run_main
from distill_sweep.config.schema import RunSettings
from distill_sweep.config.space import CONF_DIR, VERSION_BASE, check_group_choices
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import JobIdentity, check_paths, identify
from distill_sweep.job.machine import check_threads, passive_openmp
from distill_sweep.records.disk import room_problem
from distill_sweep.training.processes import launch_problem, launch_rank, refused, requested_size

try:  # Hydra's own parser (a private API): its flags, never a copy
    from hydra._internal.utils import get_args_parser
except ImportError:  # a Hydra without it: the command line is parsed as given
    get_args_parser = None


def overrides_first(argv: list[str]) -> list[str]:
    """`argv` with every override moved in front of Hydra's flags, keeping both orders.

    Hydra's argparse takes overrides as ONE run of positionals, so `a=1 -m b=2` (or `a=1 --cfg job b=2`)
    fails with "unrecognized arguments: b=2". argparse's result does not depend on where the run sits, so
    moving all overrides first parses exactly as the user meant. A flag's value (`--cfg job`,
    `-cn name`, `--info config`) stays with its flag; unknown flags are left for Hydra to refuse.
    """
    try:
        actions = get_args_parser()._option_string_actions
    except (TypeError, AttributeError):  # a Hydra without it: parse as given, as before
        return list(argv)
    overrides: list[str] = []
    flags: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":  # argparse's end of options: leave the rest exactly as given
            flags.extend(argv[i:])
            break
        if not arg.startswith("-") or len(arg) == 1:
            overrides.append(arg)
            i += 1
            continue
        flags.append(arg)
        i += 1
        action = actions.get(arg) or _abbreviated(arg, actions)
        if action is None or "=" in arg:  # unknown flag, or `--cfg=job` carrying its own value
            continue
        if action.nargs is None:  # one value, whatever it looks like (argparse takes it too)
            if i < len(argv):
                flags.append(argv[i])
                i += 1
        elif action.nargs == "?":  # `--info [choice]`: only a valid choice is its value
            if i < len(argv) and action.choices is not None and argv[i] in action.choices:
                flags.append(argv[i])
                i += 1
    return overrides + flags


def _abbreviated(arg: str, actions: dict) -> object | None:
    """The action of a unique `--prefix` of a long option (argparse accepts `--multi` for `--multirun`)."""
    if not arg.startswith("--"):
        return None
    matches = {id(a): a for opt, a in actions.items() if opt.startswith("--") and opt.startswith(arg)}
    return next(iter(matches.values())) if len(matches) == 1 else None


# Hydra flags that pick another config or do not run a job: the overrides are then left for Hydra to judge.
# (--config-dir only adds the user's directory to the search path: checked here with it, see check_overrides)
_NOT_A_RUN = ("config_name", "config_path", "help", "hydra_help", "info", "shell_completion", "experimental_rerun")


@dataclass
class Checked:
    """What the check composed and identified, where it is the whole run (one job, no Hydra flag): the job runs
    from it (cli/composed_run.py), so its config is composed and typed once."""

    cfg: DictConfig | None = None  # with its hydra node
    job: JobIdentity | None = None


def check_overrides(argv: list[str], checked: Checked | None = None) -> str | None:
    """One line for overrides Hydra itself would refuse (their grammar, a sweep without -m, a key that is
    not in the config without `+`, an unknown hydra/ option), found by composing the config once.

    Hydra reports these in several lines (exit 1). The job's identity is checked here too (job.identify: the
    typed settings of every key and group, the procedure's, student's and objective's own settings, and the
    rules between them), so a typo is refused in a second or less, before the training code (torch,
    transformers) is imported: for one job, that job; for a sweep, each value of each swept key (with the
    other keys at their first value; `_SWEEP_CHECKS` compositions at most). A run's files and directories are
    checked here too (job.check_paths: the task's TSVs, results_dir, cache_dir). The sweeper checks every job
    of the grid again and names the job; what needs transformers' configs is checked then too (prepare.py).
    `checked`, if given, receives the composed config and identity of a run that is one job with no Hydra flag.
    """
    args = _hydra_args(argv)
    if args is None or any(getattr(args, name, None) for name in _NOT_A_RUN):
        return None
    try:
        parsed = OverridesParser.create().parse_overrides(list(args.overrides))
    except OverrideParseException as err:
        return _unparsed(err, list(args.overrides))
    single: list[str] = []
    swept: list[tuple[int, str, list[str]]] = []  # (position in `single`, key, every value) per swept key
    for override in parsed:
        if not override.is_sweep_override():
            single.append(override.input_line)
            continue
        key = override.get_key_element()
        if override.is_hydra_override():  # e.g. a preset's sweep axis, hydra.sweeper.params.seed=1,2
            return (f"{override.input_line}: Hydra's own settings cannot be swept; to set a sweep axis, quote "
                    f"the list: {key}='{override.input_line.split('=', 1)[1]}'")
        if not args.multirun:
            return (f"{override.input_line}: a comma list (or range) sweeps over values, which needs -m; for one "
                    f"value that contains commas, quote it: {key}='...'")
        try:
            values = list(override.sweep_string_iterator())
        except Exception:  # noqa: BLE001 - glob() needs Hydra's config loader: the sweeper checks it
            return None
        swept.append((len(single), key, values))
        single.append(f"{key}={values[0]}")
    if args.config_dir is not None and not any(o.startswith("hydra.searchpath=") for o in single):
        # Hydra puts --config-dir on the search path after conf/, where a `hydra.searchpath` override goes too
        single.append(f"hydra.searchpath=[file://{Path(args.config_dir).expanduser().resolve()}]")
    jobs = [single]  # the first job, then one per further value of each swept key
    for at, key, values in swept:
        jobs += [[*single[:at], f"{key}={value}", *single[at + 1:]] for value in values[1:]]
    generating: list[bool] = []
    whole = checked if checked is not None and _one_plain_run(args) else None
    problem = _check_jobs(args, argv, jobs, generating, whole)
    if problem is None and len(jobs) <= _SWEEP_CHECKS:
        problem = _unread_generation(single, generating)
    return problem


def _one_plain_run(args: Any) -> bool:
    """One job and no Hydra flag: the check's composition is the run's (anything else goes through Hydra's main)."""
    flags = ("multirun", "cfg", "resolve", "package", "config_dir", "experimental_rerun", *_NOT_A_RUN)
    return not any(getattr(args, name, None) for name in flags)


def _unread_generation(single: list[str], generating: list[bool]) -> str | None:
    """A procedure.generation key typed on the command line where no job of it generates: one line (a preset's
    generation keys stay quiet: they serve its rows that do generate, and are not hashed where none is)."""
    typed = [o for o in single if o.lstrip("+~").startswith("procedure.generation.")]
    if not typed or any(generating):
        return None
    return (f"{typed[0]} is not read: no job here generates responses (procedure.on_policy > 0 samples the "
            "student's, procedure.seq_kd=true the teacher's); turn one on, or drop the key")


def _check_jobs(args: Any, argv: list[str], jobs: list[list[str]], generating: list[bool],
                checked: Checked | None) -> str | None:
    """Compose and identify the first jobs of the command line (one per swept value): the first problem, else None.
    Whether each generates responses is appended to `generating` (the procedure.generation rule); `checked`
    receives the one job's config and identity."""
    with initialize_config_dir(config_dir=CONF_DIR, job_name=JOB_NAME, **VERSION_BASE):
        for n, overrides in enumerate(jobs[:_SWEEP_CHECKS]):
            try:
                # (Hydra's main adds the run mode to the overrides: the one job's `.hydra/` files then say the same)
                run_mode = ["hydra.mode=RUN"] if checked is not None else []
                cfg = compose("config", overrides=[*overrides, *run_mode], return_hydra_config=True)
            except InterpolationResolutionError as err:
                return _unresolved(err)
            except (HydraException, OmegaConfBaseException) as err:
                return _one_line(err)
            except yaml.YAMLError as err:  # a config file of the user's own (--config-dir) that is not YAML
                return _yaml_line(err)
            if n == 0:  # where Hydra writes its own files first (a full disk stops it there with a traceback)
                key = "hydra.sweep.dir" if args.multirun else "hydra.run.dir"
                problem = room_problem(str(OmegaConf.select(cfg, key)))
                if problem:
                    return f"{key}={OmegaConf.select(cfg, key)}: {problem}; nothing was written"
            try:  # the job's identity: every part's settings and the rules between them, before torch is loaded
                job = identify(cfg)
                generates = getattr(job.procedure_settings, "generates", None)
                generating.append(bool(generates()) if callable(generates) else False)
                if not args.multirun:  # a sweep's cross product runs a job with an ignored setting once
                    job.check_used()
                if not (args.cfg or _plans(argv)):  # its files and directories, for a run (a plan reads none)
                    check_paths(job)
                    _check_cpus(cfg, job.settings.run)
                if checked is not None:
                    checked.cfg, checked.job = cfg, job
            except ConfigError as err:
                return str(err) + _env_text_hint(str(err), overrides)
            except InterpolationResolutionError as err:  # e.g. ${oc.env:X} with X unset, resolved by identify
                return _unresolved(err)
    return None


def _check_cpus(cfg: DictConfig, run: RunSettings) -> None:
    """`threads` within the CPUs of where the job runs: this host, or a SLURM job's cpus_per_task (the job
    checks its node's CPUs again when it starts: prepare.check_machine)."""
    if str(OmegaConf.select(cfg, "hydra.launcher._target_", default="")).endswith("SlurmLauncher"):
        cpus = OmegaConf.select(cfg, "hydra.launcher.cpus_per_task", default=None)
        if run.threads is not None and isinstance(cpus, int) and run.threads > cpus:
            raise ConfigError(f"threads={run.threads}: more than the {cpus} CPU(s) each SLURM job is given "
                              f"(hydra.launcher.cpus_per_task={cpus}); use threads={cpus} or fewer, or raise "
                              "cpus_per_task")
        return
    check_threads(run)


_UNSET_VARIABLE = re.compile(r"Environment variable '([^']+)' not found")


def _unresolved(err: InterpolationResolutionError) -> str:
    """An interpolation that cannot be resolved, in one line that says what to do."""
    where = f"{err.full_key}: " if err.full_key else ""
    unset = _UNSET_VARIABLE.search(str(err))
    if unset:
        name = unset.group(1)
        return (f"{where}the environment variable {name} is not set: set it (export {name}=...), or give the "
                f"interpolation a default: ${{oc.env:{name},<default>}}")
    return where + _one_line(err)


def _unparsed(err: OverrideParseException, overrides: list[str]) -> str:
    """An override Hydra's grammar refuses, in one line that says how to quote it."""
    line = f"{err.override}: {_one_line(err)}"
    key, sep, value = err.override.partition("=")
    if not sep and err.override in overrides and overrides.index(err.override) > 0:
        # a path with a space, unquoted: the shell made its second half an argument of its own
        before = overrides[overrides.index(err.override) - 1]
        bkey, _, bvalue = before.partition("=")
        return (f"{line}; if it is the rest of a value with a space, quote the whole override: "
                f"\"{bkey}='{bvalue} {err.override}'\"")
    if sep and key != key.strip():  # `epochs =1`: quoting would not help, the key itself has the space
        return f"{err.override}: a space around '=' is not allowed; write {key.strip()}={value.strip()}"
    odd_digits = [c for c in value if c.isdigit() and not c.isascii()]
    if odd_digits:  # a full-width (or other script's) digit: Hydra's grammar reads ASCII digits only
        ascii_value = "".join(str(unicodedata.digit(c)) if c in odd_digits else c for c in value)
        return (f"{err.override}: {odd_digits[0]!r} is not an ASCII digit (a full-width or another script's "
                f"digit); write {key}={ascii_value}")
    if sep and ("LexerNoViableAlt" in line or "token recognition error" in line):
        return (f"{err.override}: Hydra reads some characters (~, spaces, brackets, quotes) only in a quoted "
                f"value; quote it: \"{key}='{value}'\"")
    return line


# Compositions a sweep's command line is checked with here (each takes a few tens of milliseconds); a longer
# sweep's remaining values are checked by the sweeper, with every job.
_SWEEP_CHECKS = 64


def _env_text_hint(line: str, overrides: list[str]) -> str:
    """Where a number was expected and got the text of an environment variable (`seed=${oc.env:SLURM_ARRAY_TASK_ID}`
    gives '3': oc.env always returns a string), how to read it as a number."""
    if "expected an integer" not in line and "expected a number" not in line:
        return ""
    for override in overrides:
        key, _, value = override.partition("=")
        match = re.fullmatch(r"\$\{oc\.env:([^{}]+)\}", value.strip().strip("'\""))
        if match and line.startswith(f"{key.lstrip('+')}="):
            return (f"; an environment variable is text: decode it as a number with "
                    f"\"{key}='${{oc.decode:${{oc.env:{match.group(1)}}}}}'\"")
    return ""


def _yaml_line(err: yaml.YAMLError) -> str:
    """A YAML syntax error in a config file, in one line: where, and what the parser expected."""
    mark = getattr(err, "problem_mark", None)
    where = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "a config file"
    what = "; ".join(str(x) for x in (getattr(err, "context", None), getattr(err, "problem", None)) if x)
    return f"{where}: not valid YAML ({what or type(err).__name__})"


def _one_line(err: BaseException) -> str:
    """Hydra's multi-line message (and its OmegaConf cause) as one line, without the pointers to docs."""
    lines: list[str] = []
    for text in (str(err), str(err.__cause__ or "")):
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("Config search path"):
                break
            if not line or line.startswith(("See https://", "Set the environment", "full_key:", "object_type=")):
                continue
            if line not in lines:
                lines.append(line)
    return "; ".join(lines).replace(":; ", ": ").replace(".; ", ". ") or type(err).__name__


def _hydra_args(argv: list[str]) -> Any:
    """Hydra's own reading of the command line (an argparse Namespace), or None where argparse refuses it
    (Hydra then says so itself, once)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return get_args_parser().parse_known_args(argv)[0]
    except (TypeError, AttributeError, SystemExit):
        return None


def _plans(argv: list[str]) -> bool:
    """A dry run (or a seed plan): the sweeper plans the grid and runs nothing."""
    return any(a.lstrip("+").lower() in ("dry_run=true", "plan_seeds=true") for a in argv)


def check_environment(argv: list[str]) -> str | None:
    """One line for an environment that cannot run what was asked (checked before Hydra starts)."""

    args = _hydra_args(argv)
    # only a launch needs sbatch: not a dry run, nor printing the config (--cfg) or help
    launches = args is None or not (args.cfg or any(getattr(args, name, None) for name in _NOT_A_RUN))
    if "hydra/launcher=slurm" in argv and launches and not _plans(argv) and shutil.which("sbatch") is None:
        return ("hydra/launcher=slurm: no SLURM on this host (sbatch is not on PATH); run from a SLURM login "
                "node, or use hydra/launcher=local or hydra/launcher=local_parallel")
    size = requested_size()
    if args is not None and args.multirun and size > 1:
        return (f"-m under torchrun: each of the {size} processes would run the whole sweep; torchrun starts the "
                "processes of one job (leave out -m), and a sweep of jobs of several processes each starts them "
                "through its launcher (hydra/launcher=slurm hydra.launcher.tasks_per_node=N)")
    return None


def _cli() -> None:

    passive_openmp()  # before anything imports torch: OpenMP reads it once
    sys.argv[1:] = overrides_first(sys.argv[1:])
    argv = sys.argv[1:]
    checked = Checked()
    problem = (launch_problem() or check_group_choices(argv) or check_overrides(argv, checked)
               or check_environment(argv))
    if problem:
        if launch_rank() == 0:  # several ranks: said once (each rank finds the same problem)
            print(f"distill_sweep: error: {problem}", file=sys.stderr)
        refused(2)
    try:
        if checked.cfg is not None:  # one job: run from the config the check composed (composed once)
            run_composed(checked.cfg, functools.partial(run_main, ident=checked.job))
        else:
            main()
    except KeyboardInterrupt:  # Ctrl-C: one line, not the traceback of wherever the job was
        print("\ndistill_sweep: interrupted (Ctrl-C); a job that had started keeps its record ('running') and its "
              "last checkpoint: the same command resumes it from there", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    _cli()
