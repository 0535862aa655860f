"""`python -m distill_sweep [overrides] [-m]`."""

from __future__ import annotations

import sys


def overrides_first(argv: list[str]) -> list[str]:
    """`argv` with every override moved in front of Hydra's flags, keeping both orders.

    Hydra's argparse takes overrides as ONE run of positionals, so `a=1 -m b=2` (or `a=1 --cfg job b=2`)
    fails with "unrecognized arguments: b=2". argparse's result does not depend on where the run sits, so
    moving all overrides first parses exactly as the user meant. A flag's value (`--cfg job`,
    `-cn name`, `--info config`) stays with its flag; unknown flags are left for Hydra to refuse.
    """
    try:
        from hydra._internal.utils import get_args_parser  # Hydra's own parser: its flags, never a copy

        actions = get_args_parser()._option_string_actions
    except (ImportError, AttributeError):  # a Hydra without it: parse as given, as before
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


def check_environment(argv: list[str]) -> str | None:
    """One line for an environment that cannot run what was asked (checked before Hydra starts)."""
    import shutil

    if "hydra/launcher=slurm" in argv and "+dry_run=true" not in argv and shutil.which("sbatch") is None:
        return ("hydra/launcher=slurm: no SLURM on this host (sbatch is not on PATH); run from a SLURM login "
                "node, or use hydra/launcher=local or hydra/launcher=local_parallel")
    return None


def _cli() -> None:
    from distill_sweep.train import check_group_choices, main

    sys.argv[1:] = overrides_first(sys.argv[1:])
    problem = check_group_choices(sys.argv[1:]) or check_environment(sys.argv[1:])
    if problem:
        print(f"distill_sweep: error: {problem}", file=sys.stderr)
        sys.exit(2)
    main()


if __name__ == "__main__":
    _cli()
