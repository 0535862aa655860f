"""The fine-tune grid after a distillation: the sweeper's second phase (`finetune_grid`).

The paper's task-agnostic half (Tables 2 and 4) distils a student on a corpus, then fine-tunes it on each task
over a small grid (lr x batch size) and reports the best dev score per task. A preset that sets
`finetune_grid` gets both from one sweep: for every distillation job, one fine-tune job per point of the grid,
with `student=distilled student.source=<the distillation's config hash>` (students/distilled.py), launched
once the distillations have completed.

A fine-tune job is composed from the base config, not from the distillation's preset (whose procedure,
student and corpus settings are not the fine-tune's), with:
- the distillation job's teacher (its tokenizer reads the task), checked to be the same config;
- the command line's other overrides (results_dir, cache_dir, threads, pilot caps such as
  task.max_train_samples or max_steps_per_epoch), except those of the distillation's own parts
  (DISTILLATION_ONLY);
- the grid point (task, optimizer.lr, optimizer.batch_size, seed, epochs), then `finetune_grid.overrides`;
- the sweep's own `hydra.sweeper.params` (`sweeper_kept`): Hydra 1.4 refuses a job of a sweep whose sweeper
  settings differ from the primary config's, and the preset that set them is not among the fine-tune's parts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from distill_sweep.config.schema import FinetuneGridSettings
from distill_sweep.errors import ConfigError

# The distillation's own parts: their overrides are not passed to the fine-tune jobs (value overrides of
# `teacher.` and `task.` are: the teacher is shared, and task caps are meant for the fine-tuning).
DISTILLATION_ONLY = ("experiment", "procedure", "corpus", "student", "objective", "init", "map", "seed", "seeds",
                     "epochs", "finetune_grid", "teacher", "task")
SHARED_VALUES = ("teacher", "task")
SAVES_STUDENT = ("task_agnostic",)  # procedures whose saved student a fine-tune grid can follow


@dataclass
class ChainedJob:
    source: Any  # the distillation's JobIdentity
    overrides: list[str]
    ident: Any  # the fine-tune job's JobIdentity


def _root(key: str) -> str:
    return key.split("/")[0].split(".")[0]


def passed_on(distill_overrides: Sequence[str]) -> list[str]:
    """The distillation job's overrides a fine-tune job takes (see the module docstring)."""
    kept = []
    for o in OverridesParser.create().parse_overrides(list(distill_overrides)):
        key = o.key_or_group
        root = _root(key)
        if root in DISTILLATION_ONLY and not (root in SHARED_VALUES and "." in key):
            continue
        kept.append(o.input_line)
    return kept


def merged(overrides: Sequence[str]) -> list[str]:
    """`overrides` with one entry per key, the last one winning (Hydra refuses a group chosen twice)."""
    by_key: dict[str, str] = {}
    for o in OverridesParser.create().parse_overrides(list(overrides)):
        key = o.key_or_group
        by_key.pop(key, None)  # re-inserted last: the order of the remaining keys is kept
        by_key[key] = o.input_line
    return list(by_key.values())


def _quoted(text: str) -> str:
    """`text` in Hydra's single quotes: a backslash is literal unless it comes before a quote or the end."""
    text = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", text)
    return "'" + re.sub(r"(\\+)$", lambda m: m.group(1) * 2, text) + "'"


def sweeper_kept(params: Mapping[str, str] | None) -> list[str]:
    """The override that gives a fine-tune job the sweep's `hydra.sweeper.params` (none when the sweep has none).
    Sweeping it is not what it does: Hydra reads only the primary config's sweeper; a job only has to agree."""
    if not params:
        return []
    override = "hydra.sweeper.params={" + ",".join(f"{k}:{_quoted(str(v))}" for k, v in params.items()) + "}"
    if OverridesParser.create().parse_overrides([override])[0].value() != dict(params):
        raise ConfigError(f"finetune_grid: the sweep's hydra.sweeper.params cannot be passed on to the fine-tune "
                          f"jobs as an override (a key Hydra's grammar cannot hold?): {dict(params)}")
    return [override]


def finetune_overrides(distill_overrides: Sequence[str], teacher_choice: str, source_hash: str,
                       grid: FinetuneGridSettings, kept: Sequence[str] = ()) -> list[list[str]]:
    """One override list per fine-tune job of one distilled student; `kept` (sweeper_kept) goes last."""
    base = [*passed_on(distill_overrides), f"teacher={teacher_choice}", "procedure=finetune", "student=distilled",
            f"student.source={source_hash}"]
    return [[*merged([*base, *point, *grid.overrides]), *kept] for point in grid.points()]


def plan(jobs: Sequence[tuple[Any, Sequence[str]]], compose: Callable[[Sequence[str]], DictConfig],
         teacher_choice: Callable[[Sequence[str]], str], identify: Callable[[DictConfig], Any],
         kept: Sequence[str] = ()) -> list[ChainedJob]:
    """The fine-tune jobs that follow the distillation `jobs` (identity, overrides) whose config sets
    `finetune_grid`; each identified (config only: the students do not exist yet). `kept`: the sweep's sweeper
    settings (sweeper_kept). Raises ConfigError."""
    chained: list[ChainedJob] = []
    for source, overrides in jobs:
        grid = source.settings.run.finetune_grid
        if grid is None:
            continue
        if source.procedure.name not in SAVES_STUDENT:
            raise ConfigError(f"finetune_grid follows a distillation that saves its student (procedure="
                              f"{' or '.join(SAVES_STUDENT)}), not procedure={source.procedure.name}")
        for ft_overrides in finetune_overrides(overrides, teacher_choice(overrides), source.digest, grid, kept):
            try:
                cfg = compose(ft_overrides)
                ident = identify(cfg)
            except (ConfigError, HydraException, OmegaConfBaseException) as err:
                first = str(err).splitlines()[0] if str(err) else type(err).__name__
                shown = ft_overrides[:len(ft_overrides) - len(kept)]
                raise ConfigError(f"fine-tune job [{' '.join(shown)}]: {first}") from None
            if ident.settings.teacher != source.settings.teacher:
                raise ConfigError(f"finetune_grid: the fine-tune jobs of [{' '.join(overrides)}] would get another "
                                  "teacher config (and tokenizer) than the distillation's: set the teacher on the "
                                  "command line (teacher=..., teacher.<key>=...) rather than in the preset")
            chained.append(ChainedJob(source, ft_overrides, ident))
    return chained
