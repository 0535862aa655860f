"""Packs: the jobs of a sweep that can share batches, trained in lockstep in one process (`pack=auto`).

`pack_key` is the one rule that decides which jobs may share a process. Two jobs share a key when they draw the
same batches in the same order from the same frozen teacher: the same task data, teacher, data-order seed, batching, batch
size, epochs per stage and step cap, precision, device and threads, and the same teacher-output mode. The order
of a stage's batches is a function of (seed, stage kind, epoch) only (`training.stages.epoch_seed`), so such
jobs see the same batch at the same step of the same stage, and one teacher forward serves all of them. The key is
read from the typed job (its settings, procedure settings and corpus, as parsed), never from the config as composed:
configs that parse to the same settings share it (an integer written for a float field is that float).

Decoder jobs (`procedure=causal_lm`) pack by the same rule over their own data, not the `task` they do not read
(the `corpus` group or `procedure.instructions`, `procedure.batch_size`, epochs and step budget, the teacher's
training recipe, the teacher-output mode): a pack of fkl / rkl / gjsd members runs the teacher once per batch; members reading a
sparse top-k store (`procedure.teacher_top_k`) run no teacher and share the batches and the process. An
on-policy member (`procedure.on_policy` > 0) packs too: at its on-policy steps its batch is its own student's
samples, which no other member has, so the teacher runs for it alone there; at its other steps it shares the
data's batch and its forward. The shared forward is keyed by a batch's content (training/pack.py), so a member
is never served another batch's features. A decoder pack's members hold one teacher between them
(procedures/decoder_pack.py).

A pack's members need not have the same stages (vanilla_kd has a prediction stage only, hid_seq an intermediate
stage first): a member is computed exactly as alone whatever its neighbours do, and packs are cut so that members
with the same stages sit together, where they share the most forwards. This module imports no torch: the
sweeper reads it at every start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from distill_sweep.config.parse import as_dict
from distill_sweep.records import hashing
from distill_sweep.records.disk import atomic_file

# Procedures whose jobs a pack trains: one student per job, stages driven by the stage driver, the frozen teacher
# read through a TeacherView (procedures/task_specific.py). Others run one process per job.
PACKING_PROCEDURES = ("task_specific", "causal_lm")
# a decoder job's procedure settings that are its member's own (its optimiser, its loss, its student's init and
# its on-policy sampling; `generation` not with seq_kd, whose responses it makes); every other one changes the
# data, the batches or the teacher
MEMBER_SETTINGS = {"causal_lm": ("name", "lr", "warmup_ratio", "ce_weight", "calibration", "on_policy", "generation")}
PACKS_DIR = "packs"  # under the sweep directory: one file per pack, its members' configs


def pack_key(job: Any, processes_per_job: int = 1) -> str | None:
    """The key of the jobs `job` can share batches with (a digest), or None: it runs in a process of its own.

    None for `pack=off`, a procedure that does not pack, a job of several processes (data parallel), a build
    job and an ensemble teacher's job."""
    run = job.settings.run
    if run.pack == "off" or job.procedure.name not in PACKING_PROCEDURES or processes_per_job > 1:
        return None
    if run.prepare_only or run.pack_file is not None or job.members:  # a build job; a pack's own; an ensemble
        return None
    task, procedure = job.settings.task, job.procedure_settings
    shared = {
        # the data: source, sizes, subsets, augmentation, length (a procedure that reads no task: its own below)
        "task": as_dict(task) if procedure.reads_task else None,
        "teacher": job.teacher.key,  # its weights: the teacher cache's key
        "seed": job.seeds.data_order,  # the batches' order (init and dropout are each member's own)
        "batching": run.batching,
        "batch_size": job.settings.optimizer.batch_size or task.recipe.batch_size,
        "epochs": run.epochs or task.recipe.epochs,
        "max_steps_per_epoch": run.max_steps_per_epoch,
        "precision": run.precision,
        "device": run.device,
        "threads": run.threads,
        "teacher_outputs": run.teacher_outputs,
        "num_workers": run.num_workers,
        "cache_dir": run.cache_dir,
        "pack_size": run.pack_size,
    }
    own = MEMBER_SETTINGS.get(job.procedure.name)
    if own is not None:  # a procedure with its own data: its settings, less each member's own
        if getattr(procedure, "seq_kd", False):  # the training responses are the teacher's, made per these settings
            own = tuple(k for k in own if k != "generation")
        shared["procedure"] = {k: v for k, v in as_dict(procedure).items() if k not in own}
        shared["corpus"] = as_dict(procedure.corpus) if procedure.reads_corpus() else None  # (typed by own_task)
    return hashing.digest(shared)


def _stages(job: Any) -> tuple[str, ...]:
    return tuple(job.objective.stages) if job.objective is not None else ()


def plan_packs(jobs: Sequence[Any], processes_per_job: int = 1) -> list[list[int]]:
    """The jobs (identities) grouped into packs: lists of indices into `jobs`, each at most its `pack_size`
    long, in the order of their first jobs; a job with no key is a pack of one. Within a key, jobs with the
    same stages are put together before the packs are cut."""
    by_key: dict[str, list[int]] = {}
    units: list[list[int]] = []
    for i, job in enumerate(jobs):
        key = pack_key(job, processes_per_job)
        if key is None:
            units.append([i])
        elif key not in by_key:
            by_key[key] = [i]
            units.append(by_key[key])  # (filled below; cut into packs at the end)
        else:
            by_key[key].append(i)
    packs: list[list[int]] = []
    for unit in units:
        if len(unit) == 1:
            packs.append(unit)
            continue
        first_of_stages: dict[tuple[str, ...], int] = {}
        for i in unit:
            first_of_stages.setdefault(_stages(jobs[i]), i)
        ordered = sorted(unit, key=lambda i: (first_of_stages[_stages(jobs[i])], i))
        size = jobs[unit[0]].settings.run.pack_size
        packs += [ordered[start:start + size] for start in range(0, len(ordered), size)]
    return packs


def write_pack_file(directory: Path, members: Sequence[Any]) -> Path:
    """The file a pack's process reads: its members' configs as composed (plain, resolved), in order. Named by
    the members' config hashes, written atomically."""
    path = directory / f"pack-{hashing.digest([job.digest for job in members])[:16]}.json"
    with atomic_file(path) as f:
        json.dump({"members": [dict(job.composed) for job in members]}, f, default=str)
    return path


def read_pack_file(path: str | Path) -> list[dict[str, Any]]:
    """The members' configs a pack file lists."""
    return list(json.loads(Path(path).read_text())["members"])


def differing_settings(members: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per member of a pack (their composed configs): every setting whose value differs between the members, as
    `key=value` (objective, init and seed left out: a member's label shows them already), so that a member that
    fails is named unambiguously (`[vanilla_kd init-1 seed 1 optimizer.lr=0.001]`). An objective's own settings
    are shown where they tell apart members of the same objective (fkl's temperature is not shown beside rkl)."""
    flat = [dict(_leaves(m)) for m in members]
    shown = ("objective.name", "init", "seed")

    def differs(key: str) -> bool:
        if key.startswith("objective."):  # the objective's own settings: only among members of one objective
            named: dict[Any, set[str]] = {}
            for f in flat:
                named.setdefault(repr(f.get("objective.name")), set()).add(repr(f.get(key)))
            return any(len(values) > 1 for values in named.values())
        return len({repr(f.get(key)) for f in flat}) > 1

    differing = sorted(k for k in set().union(*flat) if k not in shown and differs(k))
    return [" ".join(f"{k}={f.get(k)}" for k in differing) for f in flat]


def _leaves(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(node, Mapping):
        return [leaf for k, v in node.items() for leaf in _leaves(v, f"{prefix}{k}.")]
    return [(prefix.rstrip("."), node)]


class PackFailed(Exception):  # noqa: N818 - the pack did not fail, some of its members did
    """One or more members of a pack failed (each wrote its record `failed`); the others ran to their end.
    `returns`: each member's return (its best metric, locks.LEFT_TO_HOLDER, or its exception)."""

    def __init__(self, returns: list[Any]) -> None:
        self.returns = returns
        self.errors = [r for r in returns if isinstance(r, BaseException)]
        super().__init__(f"{len(self.errors)} of the {len(returns)} jobs of a pack failed; the first: "
                         f"{type(self.errors[0]).__name__}: {self.errors[0]}")

    def __reduce__(self) -> tuple[Any, tuple[list[Any]]]:  # submitit pickles it back to the sweeper
        return (PackFailed, (self.returns,))
