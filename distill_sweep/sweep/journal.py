"""A tuning study's journal file (sweep/tune.py's studies): the sampler that draws its trials, keeping the file
readable after a kill, and the paths it stores.

Each arm's study lives in `<results_dir>/tuning/<arm>.journal`, Optuna's journal storage: one JSON line per change
of the study, appended under a lock file that every process opening it shares. Paths a study or its arm's choice
stores are relative to the results directory, so that a copied or moved results directory reads its own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distill_sweep.config.tune import Range, TuneSettings, study_seed, trial_seed
from distill_sweep.records.disk import atomic_file, set_aside
from distill_sweep.training.trial_pruning import journal_storage


def space_distributions(space: Mapping[str, Range | list[Any]]) -> dict[str, Any]:
    """The Optuna distributions an arm's trials draw its space's keys from (sweep/tune.py's `_suggest` asks each
    with the same), in the order of their names: the order of a QMC point's coordinates."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    out: dict[str, Any] = {}
    for key in sorted(space):
        domain = space[key]
        if isinstance(domain, list):
            out[key] = CategoricalDistribution(domain)
        elif domain.integer:
            out[key] = IntDistribution(int(domain.low), int(domain.high), log=domain.log)
        else:
            out[key] = FloatDistribution(domain.low, domain.high, log=domain.log)
    return out


def trial_sampler(tune: TuneSettings, space: Mapping[str, Range | list[Any]] | None = None, study: int = 0) -> Any:
    """The sampler of study `study` of an arm whose space is `space`.

    tpe and random: each trial drawn by a sampler of its own, seeded from (tune.seed, the study, the trial's
    number), from the study's trials before it. One sampler seeded once would draw trial k from the k-th state of
    its random stream, which a re-run sweep (a new process) starts again from tune.seed: a study resumed after a
    kill repeated its first values. Seeded per trial, a resumed study draws what the uninterrupted one drew.
    TPE's constant liar: a trial asked while others are still running (tune.parallel > 1, two sweeps at once) is
    drawn as if they had scored the worst so far, so parallel trials spread out instead of repeating each other.

    qmc: trial k is point k of one scrambled Sobol sequence (Optuna's QMCSampler), seeded from (tune.seed, the
    study) alone, over the whole space from the first trial (Optuna's own QMCSampler draws the first trial at
    random and counts points in the study, so a point depended on which trials were asked before it). A point
    thus depends on the space, the seed, the study and the trial's number only: two arms with one space get the
    same points (their trials paired), a resumed study continues its sequence, and neither timing nor scores
    change it."""
    import optuna

    if tune.sampler == "qmc":
        return _paired_qmc(space_distributions(space or {}), study_seed(tune.seed, study))

    def make(seed: int) -> Any:
        if tune.sampler == "tpe":
            return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
        return optuna.samplers.RandomSampler(seed=seed)

    class TrialSeeded(optuna.samplers.BaseSampler):
        def __init__(self) -> None:
            self._own: dict[int, Any] = {}  # trial number -> its sampler (a few: the trials of one round)

        def _of(self, trial: Any) -> Any:
            number = int(trial.number)
            if number not in self._own:
                if len(self._own) > 64:
                    self._own.clear()
                self._own[number] = make(trial_seed(tune.seed, study, number))
            return self._own[number]

        def infer_relative_search_space(self, study: Any, trial: Any) -> Any:
            return self._of(trial).infer_relative_search_space(study, trial)

        def sample_relative(self, study: Any, trial: Any, search_space: Any) -> Any:
            return self._of(trial).sample_relative(study, trial, search_space)

        def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
            return self._of(trial).sample_independent(study, trial, param_name, param_distribution)

        def before_trial(self, study: Any, trial: Any) -> None:
            self._of(trial).before_trial(study, trial)

        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            self._of(trial).after_trial(study, trial, state, values)

        def reseed_rng(self) -> None:  # (Optuna's parallel optimize: never used here; the seeds are the trials')
            pass

    return TrialSeeded()


def _paired_qmc(distributions: dict[str, Any], seed: int) -> Any:
    """Optuna's QMCSampler (scrambled Sobol) whose point for a trial is the trial's number in the sequence, over
    `distributions` from the first trial on (`trial_sampler`)."""
    import warnings

    import optuna

    class PairedQMC(optuna.samplers.QMCSampler):
        def __init__(self) -> None:
            with warnings.catch_warnings():  # (QMCSampler is marked experimental)
                warnings.simplefilter("ignore")
                super().__init__(qmc_type="sobol", scramble=True, seed=seed, warn_independent_sampling=False)
            self._number = 0

        def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
            return dict(distributions)

        def sample_relative(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
            self._number = int(trial.number)
            with warnings.catch_warnings():  # (SciPy: a Sobol sample of one point is not balanced; the study's are)
                warnings.simplefilter("ignore")
                return super().sample_relative(study, trial, search_space)

        def _find_sample_id(self, study: Any, search_space: dict[str, Any]) -> int:
            return self._number

    return PairedQMC()


def _complete_lines(data: bytes) -> tuple[int, int, int]:
    """(bytes, lines) of the journal's longest prefix of whole entries (a JSON object each, ended by a newline),
    and its line count."""
    kept = good = 0
    lines = data.splitlines(keepends=True)
    for line in lines:
        try:
            entry = json.loads(line) if line.endswith(b"\n") else None
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            entry = None
        if not isinstance(entry, dict) or "op_code" not in entry:
            break
        kept, good = kept + len(line), good + 1
    return kept, good, len(lines)


def journal_damage(path: Path) -> str | None:
    """What is wrong with a journal file, read only (the report's): its last line torn, or a line that is no journal
    entry; None when whole or not there (`mend_journal` sets a damaged one aside)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    kept, good, total = _complete_lines(data)
    if kept == len(data):
        return None
    return "its last line is torn (a write cut short)" if good == total - 1 else \
        f"line {good + 1} of {total} is not a journal entry"


def mend_journal(path: Path) -> str | None:
    """Keep a study's journal readable (None: it was whole): Optuna appends each change as one line, so a kill
    during a write leaves a torn last line, which the next append would run into the next entry, making the
    journal unreadable for every run after. The damaged file is set aside (`records.disk.set_aside`) and its
    entries before the first damaged line kept, a consistent state of the study (each entry is one change of it);
    the trials after it are asked and run again. Entries that Optuna cannot replay: the whole journal is set aside
    and the study starts again. Done under the journal's lock (the one Optuna's writers take); says what it did in
    one line on stderr, and returns that line."""
    from optuna.storages.journal import JournalFileOpenLock

    if not path.exists():
        return None
    if not path.is_file():  # a directory (or another non-file) where the journal goes: no study can be read from it
        what = f"it is not a file: set aside as {set_aside(path).name}, the study starts again"
        line = f"distill_sweep: warning: the tuning journal {path} was damaged: {what}"
        print(line, file=sys.stderr, flush=True)
        return line
    lock = JournalFileOpenLock(str(path))
    lock.acquire()
    try:
        data = path.read_bytes()
        kept, good, total = _complete_lines(data)
        what = None
        if kept < len(data):
            where = journal_damage(path)
            aside: list[Path] = []
            with atomic_file(path, binary=True, before_replace=lambda: aside.append(set_aside(path))) as f:
                f.write(data[:kept])
            what = f"{where}: the file is set aside as {aside[0].name}, its {good} whole entries before it kept"
        if not _replays(path):
            moved = set_aside(path)
            what = f"{what + '; ' if what else ''}its entries do not replay as a study: set aside as {moved.name}, " \
                   "the study starts again"
    finally:
        lock.release()
    if what is None:
        return None
    line = f"distill_sweep: warning: the tuning journal {path} was damaged: {what}"
    print(line, file=sys.stderr, flush=True)
    return line


def _replays(path: Path) -> bool:
    """Whether Optuna reads the journal's entries as studies (it replays them all when it opens the file)."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    try:
        JournalStorage(JournalFileBackend(str(path), lock_obj=_NoLock()))
    except Exception:  # noqa: BLE001 - any error of the replay is a journal this run cannot use
        return False
    return True


class _NoLock:
    """A lock object for a backend opened while `mend_journal` holds the journal's own lock (it only reads)."""

    def acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass


def read_storage(path: Path) -> Any:
    """The journal storage of a study file (read by the dry run and the report), as a pruned trial's job opens it
    (training/trial_pruning.py)."""
    return journal_storage(path)


def stored_path(path: Path, results_dir: Path | None) -> str:
    """A path as a study or chosen.json stores it: relative to the results directory where it lies inside it, so
    that a results directory copied or moved elsewhere reads its own files (`stored_at` reads it back)."""
    if results_dir is not None:
        try:
            return str(Path(path).resolve().relative_to(Path(results_dir).resolve()))
        except ValueError:
            pass
    return str(path)


def stored_at(text: str, results_dir: Path) -> Path:
    """A stored path read back: relative ones from the results directory (absolute ones, from journals written
    before paths were stored relative, as they are)."""
    path = Path(text)
    return path if path.is_absolute() else results_dir / path


__all__ = ["journal_damage", "mend_journal", "read_storage", "space_distributions", "stored_at", "stored_path", "trial_sampler"]
