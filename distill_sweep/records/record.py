"""A job's record: the one `result.json` in the job's directory (hashing.job_dir), and its type.

The record sits next to the job's checkpoint. The record is the only interface to the report layer. `Record` is its one
type: a job fills one while it runs (cli/run_job.new_record opens it, the procedures set its fields) and writes
`Record.to_dict()` (write_record), and the sweeper and the report read through `Record.from_dict` and
`is_complete`. The schema (version 2; version 1 records are migrated when read) is documented in
docs/reference/records.md (generated from these classes). Metric values are fractions.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from distill_sweep.config.parse import SEED_RANGE
from distill_sweep.config.schema import ensemble_members
from distill_sweep.config.seeds import SOURCES
from distill_sweep.records.blocks import (
    BLOCKS,
    Cost,
    PTPInfo,
    StudentVocab,
    TuneTrial,
    block_from_json,
    block_to_json,
)
from distill_sweep.records.files import read_record, write_json_atomic
from distill_sweep.records.hashing import digest
from distill_sweep.records.legacy import objective_from_v1

SCHEMA_VERSION = 2
RECORD = "result.json"


def completed_record(directory: Path) -> dict[str, Any] | None:
    """The job's record if it is complete (`is_complete`), else None (read once: the sweeper also needs
    its contents)."""
    record = read_record(Path(directory) / RECORD)
    return record if record is not None and is_complete(record) else None


# ----------------------------------------------------------------------------- the record type

STATUSES = ("running", "completed", "failed")
# The stages whose epochs train the classifier that is scored: `best` is chosen among their epochs. The
# others (intermediate, ptp, pretrain) leave the task head untrained or train another head.
SCORED_STAGES = ("prediction", "combined", "finetune", "self_distill")


class RecordError(ValueError):
    """A result.json that cannot be read as a record (the message says why)."""


def part_id(settings: Mapping[str, Any]) -> str:
    """8 hex chars naming a teacher or student by its settings (sha256 of their sorted JSON)."""
    return digest(settings)[:8]


def student_id(name: str, settings: Mapping[str, Any]) -> str:
    """The student's id: `part_id` of its settings together with its name."""
    return part_id({**dict(settings), "name": name})


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def incomplete_reason(d: Any) -> str | None:
    """Why a record is not a complete result (None if it is): the ONE rule the sweeper (skip a job) and
    the report (show a cell) share. Complete = status "completed" and every field a table needs present
    and well-typed."""
    if not isinstance(d, dict):
        return "not a JSON object"
    if d.get("status") != "completed":
        return f"status {d.get('status')!r}"
    for key in ("task", "objective", "primary_metric"):
        if not isinstance(d.get(key), str) or not d[key]:
            return f"{key} missing or not a string"
    if not isinstance(d.get("seed"), int) or isinstance(d.get("seed"), bool):
        return f"seed {d.get('seed')!r} is not an integer"
    best = d.get("best")
    dev = best.get("dev") if isinstance(best, dict) else None
    if not isinstance(dev, dict):
        return "no best.dev"
    if not _number(dev.get(d["primary_metric"])):
        return f"best.dev has no number for the primary metric {d['primary_metric']!r}"
    final = d.get("final")
    if not isinstance(final, dict) or not isinstance(final.get("dev"), dict):
        return "no final.dev"
    epochs = d.get("epochs")
    if not isinstance(epochs, list) or not epochs or not all(isinstance(e, dict) for e in epochs):
        return "no epochs"
    try:  # and readable as a record: what the report cannot read, the sweeper runs again (one rule for both)
        Record.from_dict(d)
    except RecordError as exc:
        return str(exc)
    return None


def is_complete(d: Any) -> bool:
    """True when `d` (a record as read from result.json) is a complete result (see `incomplete_reason`)."""
    return incomplete_reason(d) is None


def best_epoch(epochs: list[dict[str, Any]], metric: str) -> dict[str, Any] | None:
    """The epoch with the highest dev `metric` among SCORED_STAGES epochs (the first on ties), or None."""
    best, best_value = None, -math.inf
    for epoch in epochs:
        value = (epoch.get("dev") or {}).get(metric)
        if epoch.get("stage") in SCORED_STAGES and _number(value) and math.isfinite(value) and value > best_value:
            best, best_value = epoch, value
    return best


def _seed_problem(value: Any, where: str) -> str | None:
    """Why `value` is not a seed (None if it is): an integer in the config's range, the one every job's seeds are
    checked against, so anything else in a record is damage (and 10**30 would overflow the report's arrays)."""
    low, high = SEED_RANGE["ge"], SEED_RANGE["lt"]
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value < high:
        return f"{where} {value!r} is not a seed (an integer in [{low}, 2**{high.bit_length() - 1}))"
    return None


def _read_seeds(block: Any) -> dict[str, Any] | None:
    """The record's `seeds` block, checked: null (records from before it), or each source null or a seed, and
    `own` a list of the sources set on their own."""
    if block is None:
        return None
    if not isinstance(block, dict):
        raise RecordError(f"seeds {block!r} is not an object of seeds")
    for source in SOURCES:
        if block.get(source) is not None and (why := _seed_problem(block[source], f"seeds.{source}")):
            raise RecordError(why)
    own = block.get("own", [])
    if not isinstance(own, list) or not set(map(str, own)) <= set(SOURCES):
        raise RecordError(f"seeds.own {own!r} is not a list of seed sources ({', '.join(SOURCES)})")
    return dict(block)


def _read_epochs(epochs: Any) -> list[dict[str, Any]]:
    """The record's epochs (entries that are not objects dropped, as ever), each one's number an integer and its
    dev metrics an object where given: the curves and the best-epoch choice read them."""
    if not isinstance(epochs, list):
        return []
    out = [dict(e) for e in epochs if isinstance(e, dict)]
    for i, epoch in enumerate(out):
        number = epoch.get("epoch")
        if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
            raise RecordError(f"epochs[{i}].epoch {number!r} is not an integer")
        if epoch.get("dev") is not None and not isinstance(epoch["dev"], dict):
            raise RecordError(f"epochs[{i}].dev {epoch['dev']!r} is not an object of metrics")
    return out


def _opt_int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RecordError(f"{where} {value!r} is not an integer")
    try:
        return int(value)
    except ValueError:
        raise RecordError(f"{where} {value!r} is not an integer") from None


def _opt_float(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if not _number(value):
        raise RecordError(f"{where} {value!r} is not a number")
    return float(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


@dataclass
class InitInfo:
    """Which teacher layers initialised the student."""

    spec: str = ""  # as given: "1", "mixed", "[1,5,9]"
    name: str = ""  # skip | mixed | bottom | random | custom
    layers: list[int] = field(default_factory=list)  # 1-based teacher layers copied


@dataclass
class StudentInfo:
    """The student: `name` is the kind ("truncated" | "fresh" | "pretrained"), `settings` its config."""

    name: str = "truncated"  # the student type
    id: str = ""  # student_id(name, settings) when left empty
    num_layers: int | None = None  # its depth (positions, for a parameter-shared student)
    hidden_size: int | None = None  # its width
    num_heads: int | None = None  # its attention heads
    layer_map: list[list[int]] = field(default_factory=list)  # [student layer, teacher layer] pairs
    settings: dict[str, Any] = field(default_factory=dict)  # its settings, as checked

    def __post_init__(self) -> None:
        if not self.id:
            self.id = student_id(self.name, self.settings)


@dataclass
class TeacherInfo:
    """The teacher: `name` is its config name ("tiny", "roberta_base"), `id` part_id(config.teacher)."""

    name: str = ""  # its config name (tiny, roberta_base)
    id: str = ""  # part_id of the teacher's config block
    name_or_path: str | None = None  # hub id or directory of its backbone
    num_layers: int | None = None  # its depth
    hidden_size: int | None = None  # its width
    source: str | None = None  # given | cache | trained
    path: str | None = None  # where the fine-tuned teacher is
    dev: dict[str, Any] | None = None  # its dev metrics
    majority_baseline: dict[str, Any] | None = None  # the majority-class baseline's dev metrics
    # An ensemble teacher's members (None for one teacher, and then left out of result.json): each its name,
    # id (part_id of its block), fine-tuning seed and name_or_path, and once loaded its source, path and dev.
    members: list[dict[str, Any]] | None = None
    # True when the teacher did not clearly beat its baseline and guards.allow_weak_teacher let the job go on
    # (left out of result.json otherwise)
    weak_allowed: bool = False

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], **fields: Any) -> TeacherInfo:
        """Name and id from the teacher's config block (config.teacher), the members of an ensemble; other
        fields as given."""
        members = [{"name": str(m.get("name") or ""), "id": part_id(m), "seed": (m.get("finetune") or {}).get("seed"),
                    "name_or_path": _opt_str(m.get("name_or_path"))} for m in ensemble_members(settings)]
        return cls(name=str(settings.get("name") or ""), id=part_id(settings),
                   name_or_path=_opt_str(settings.get("name_or_path")), members=members or None, **fields)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.members is None:  # one teacher: the record keeps the keys it had before ensembles
            del out["members"]
        if not self.weak_allowed:
            del out["weak_allowed"]
        return out


@dataclass
class DataInfo:
    """How much data the job used (None = not recorded / no cap)."""

    max_train_samples: int | None = None  # the pilot cap on training examples (null: none)
    max_dev_samples: int | None = None  # the same for dev examples
    train_size: int | None = None  # training examples used
    dev_size: int | None = None  # dev examples evaluated
    # each dev split's content hash (its token ids, labels and row order; a decoder's dev sequences): the report
    # pools and compares only runs scored on the same dev content (null: written before records kept it)
    dev_hash: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.dev_hash is None:  # records of jobs that do not know it keep the keys they had
            del out["dev_hash"]
        return out


@dataclass
class Record:
    """One job's result.json, and the record a job fills while it runs. Write `to_dict()`; read with
    `Record.from_dict`."""

    task: str  # the task's name
    objective: str  # "none" for procedure "finetune"
    seed: int  # the job's seed
    # the seed of each source of variance {init, data_order, dropout, sampling} and `own`: those set in the config's
    # `seeds` block (the rest are `seed`); null in records from before the block (each source: `seed`)
    seeds: dict[str, Any] | None = None
    status: str = "running"  # one of STATUSES
    # "task_specific" (distillation) | "finetune" (no distillation: cross-entropy only, objective "none") | ...
    procedure: str = "task_specific"
    error: str | None = None  # the error, when failed
    traceback: str | None = None  # failed records only
    # sha256 of the checked config less the keys that do not change what a job computes (job/hashed.py)
    config_hash: str = ""
    init: InitInfo = field(default_factory=InitInfo)  # which teacher layers initialised the student
    student: StudentInfo = field(default_factory=StudentInfo)  # the student
    teacher: TeacherInfo = field(default_factory=TeacherInfo)  # the teacher
    data: DataInfo = field(default_factory=DataInfo)  # how much data the job used
    primary_metric: str | None = None  # accuracy, f1 (MRPC), mcc (CoLA) or pearson (STS-B)
    # one dict per epoch: stage, epoch, step, train_loss, loss_<term>..., dev {metric: fraction}
    epochs: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, Any] | None = None  # {stage, epoch, dev}: best_epoch(epochs, primary_metric)
    final: dict[str, Any] | None = None  # {dev}: the last epoch's
    wall_time_s: float | None = None  # the job's wall time
    samples_per_s: float | None = None  # training throughput of the stage steps
    peak_memory_mb: float | None = None  # peak memory: CUDA's, or the process' max RSS on CPU
    peak_memory_kind: str | None = None  # which of the two
    device: str | None = None  # the device it ran on
    nonfinite_skipped: int = 0  # steps skipped for a NaN/inf loss or gradient (skip_nonfinite)
    padding: dict[str, float] = field(default_factory=dict)  # stage -> padded / real training tokens
    # where the teacher's outputs came from: {mode: store|live, reason, key, built, depth}
    teacher_outputs: dict[str, Any] | None = None
    attempts: int = 1  # processes that started the job (1 + re-runs and requeues)
    requeued: int = 0  # times SLURM requeued it
    resumed: int = 0  # times it resumed from a checkpoint
    wandb: dict[str, Any] | None = None  # the wandb run
    config: dict[str, Any] = field(default_factory=dict)  # the resolved config
    versions: dict[str, Any] = field(default_factory=dict)  # versions of Python and the main packages
    git_commit: str | None = None  # the commit of the code (-dirty with local changes)
    started_at: str | None = None  # UTC, ISO 8601
    finished_at: str | None = None  # UTC, ISO 8601
    schema_version: int = SCHEMA_VERSION  # 2 (version 1 records are migrated when read)
    # the blocks only some jobs have (records/blocks.py; null: the job has none, and result.json leaves it out)
    tune_trial: TuneTrial | None = None  # a tuning trial's job: its number, holdout, seed and holdout_size
    pack: str | None = None  # a job trained in a pack (sweep/packs.py): the pack's id, its pack file's name
    cost: Cost | None = None  # what its training cost, measured: CPU-seconds (a pack's: a share), GPU-seconds, FLOPs
    tuned: dict[str, Any] | None = None  # a grid job run at its arm's tuned values: the study's choice, as its file
    augment: dict[str, Any] | None = None  # with task.augment: the augmented split (name, key, path, rows, ...)
    student_vocab: StudentVocab | None = None  # a student with a tokenizer of its own: its vocabulary
    ptp: PTPInfo | None = None  # procedure=ptp: the thresholds and the label counts
    fsdp: dict[str, Any] | None = None  # a job sharded over several processes: how (training/fsdp.py)
    corpus: dict[str, Any] | None = None  # procedure=task_agnostic: the corpus and its cache
    task_agnostic: dict[str, Any] | None = None  # procedure=task_agnostic: batch, accumulation, steps, KD form
    student_dir: str | None = None  # where the distilled student is saved: task_agnostic, a sharded causal_lm
    causal_lm: dict[str, Any] | None = None  # procedure=causal_lm: its data, teacher, steps and settings
    lm_eval: dict[str, Any] | None = None  # procedure=causal_lm with lm_eval tasks: the student's and teacher's scores
    early_exit: list[dict[str, Any]] | None = None  # procedure=fastbert: per speed, dev metrics, exit layer, speed-up
    # keys this reader does not know, kept so that reading and writing back loses nothing
    extra: dict[str, Any] = field(default_factory=dict)

    def fill_unstated_sizes(self) -> None:
        """Sizes the student and teacher entries leave unstated (null) from the teacher's inline architecture, as
        `from_dict` reads them: a job's record says what its reader will read."""
        _fill_sizes(self.student, self.teacher, self.config)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object written to result.json (key order as in docs/reference/records.md)."""
        out: dict[str, Any] = {"schema_version": self.schema_version, "status": self.status, "error": self.error}
        if self.traceback is not None:
            out["traceback"] = self.traceback
        out.update({
            "config_hash": self.config_hash, "procedure": self.procedure, "task": self.task,
            "objective": self.objective, "seed": self.seed})
        if self.seeds is not None:  # (records from before the block have none: written back as they were)
            out["seeds"] = copy.deepcopy(self.seeds)
        out.update({
            "init": asdict(self.init),
            "student": asdict(self.student), "teacher": self.teacher.to_dict(), "data": self.data.to_dict(),
            "primary_metric": self.primary_metric, "epochs": copy.deepcopy(self.epochs),
            "best": copy.deepcopy(self.best), "final": copy.deepcopy(self.final),
        })
        for name in _PLAIN_FIELDS:
            out[name] = copy.deepcopy(getattr(self, name))
        for name in BLOCKS:
            if getattr(self, name) is not None:
                out[name] = copy.deepcopy(block_to_json(getattr(self, name)))
        out.update(copy.deepcopy(self.extra))
        return out

    @classmethod
    def from_dict(cls, d: Any) -> Record:
        """A record from a result.json object of schema version 1 or 2; raises RecordError when it has no
        usable identity (status, task, objective, integer seed) or a field of the wrong type.

        Version 1 records are migrated: procedure "task_specific"; the student "truncated" with settings
        {"num_layers": n}; the teacher named and identified from config.teacher; data all None; the
        config's objective in today's form (`objective_from_v1`).
        """
        if not isinstance(d, dict):
            raise RecordError("not a JSON object")
        version = d.get("schema_version", 1)
        if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
            raise RecordError(f"schema_version {version!r} is not one this reader knows (1..{SCHEMA_VERSION})")
        missing = [k for k in ("status", "task", "objective", "seed") if k not in d]
        if missing:
            raise RecordError(f"missing keys {missing} (partial record?)")
        seed = d["seed"]
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise RecordError(f"seed {seed!r} is not an integer")
        if why := _seed_problem(seed, "seed"):
            raise RecordError(why)
        for name in ("tune_trial", "tuned", "cost"):  # what the report selects records by: a damaged one is not guessed at
            if d.get(name) is not None and not isinstance(d[name], dict):
                raise RecordError(f"{name} {d[name]!r} is not an object (its block)")
        config = _mapping(d.get("config"))
        if version == 1 and isinstance(config.get("objective"), dict):
            config = {**config, "objective": objective_from_v1(config["objective"])}
        teacher_cfg = config.get("teacher") if isinstance(config.get("teacher"), dict) else None
        init = _read_init(d.get("init"))
        student = _read_student(_mapping(d.get("student")))
        teacher = _read_teacher(_mapping(d.get("teacher")), teacher_cfg)
        _fill_sizes(student, teacher, config)
        if version == 1 and teacher.hidden_size is None:
            teacher.hidden_size = student.hidden_size  # version 1 students always had the teacher's width
        data = _mapping(d.get("data"))
        known = {"schema_version", "status", "error", "traceback", "config_hash", "procedure", "task",
                 "objective", "seed", "seeds", "init", "student", "teacher", "data", "primary_metric", "epochs",
                 "best", "final", *_PLAIN_FIELDS, *(name for name in BLOCKS if d.get(name) is not None)}
        epochs = d.get("epochs")
        return cls(
            task=str(d["task"]), objective=str(d["objective"]), seed=seed, status=str(d["status"]),
            seeds=_read_seeds(d.get("seeds")),
            procedure=str(d.get("procedure") or "task_specific"), error=_opt_str(d.get("error")),
            traceback=_opt_str(d.get("traceback")), config_hash=str(d.get("config_hash") or ""),
            init=init, student=student, teacher=teacher,
            data=_read_data(data),
            primary_metric=_opt_str(d.get("primary_metric")),
            epochs=_read_epochs(epochs),
            best=dict(d["best"]) if isinstance(d.get("best"), dict) else None,
            final=dict(d["final"]) if isinstance(d.get("final"), dict) else None,
            wall_time_s=_opt_float(d.get("wall_time_s"), "wall_time_s"),
            samples_per_s=_opt_float(d.get("samples_per_s"), "samples_per_s"),
            peak_memory_mb=_opt_float(d.get("peak_memory_mb"), "peak_memory_mb"),
            peak_memory_kind=_opt_str(d.get("peak_memory_kind")), device=_opt_str(d.get("device")),
            nonfinite_skipped=_opt_int(d.get("nonfinite_skipped"), "nonfinite_skipped") or 0,
            padding=_mapping(d.get("padding")),
            teacher_outputs=dict(d["teacher_outputs"]) if isinstance(d.get("teacher_outputs"), dict) else None,
            attempts=_opt_int(d.get("attempts"), "attempts") or 1,
            requeued=_opt_int(d.get("requeued"), "requeued") or 0,
            resumed=_opt_int(d.get("resumed"), "resumed") or 0,
            wandb=dict(d["wandb"]) if isinstance(d.get("wandb"), dict) else None,
            config=config, versions=_mapping(d.get("versions")), git_commit=_opt_str(d.get("git_commit")),
            started_at=_opt_str(d.get("started_at")), finished_at=_opt_str(d.get("finished_at")),
            **{name: block_from_json(name, d[name]) for name in BLOCKS if d.get(name) is not None},
            extra={k: v for k, v in d.items() if k not in known},
        )


# Record fields written as they are (after the blocks that need conversion).
_PLAIN_FIELDS = ("wall_time_s", "samples_per_s", "peak_memory_mb", "peak_memory_kind", "device",
                 "nonfinite_skipped", "padding", "teacher_outputs", "attempts", "requeued", "resumed", "wandb", "config", "versions",
                 "git_commit", "started_at", "finished_at")


def _read_data(data: dict[str, Any]) -> DataInfo:
    sizes = {k: _opt_int(data.get(k), f"data.{k}") for k in DataInfo.__dataclass_fields__ if k != "dev_hash"}
    dev_hash = data.get("dev_hash")
    if dev_hash is not None and not (isinstance(dev_hash, dict)
                                     and all(isinstance(v, str) for v in dev_hash.values())):
        raise RecordError(f"data.dev_hash {dev_hash!r} is not an object of content hashes")
    return DataInfo(**sizes, dev_hash={str(k): v for k, v in dev_hash.items()} if dev_hash is not None else None)


def _read_init(init: Any) -> InitInfo:
    if not isinstance(init, dict):  # a bare spec
        return InitInfo(spec="" if init is None else str(init))
    layers = init.get("layers") or []
    if not isinstance(layers, list):
        raise RecordError(f"init.layers {layers!r} is not a list")
    return InitInfo(spec=str(init.get("spec", "")), name=str(init.get("name") or ""),
                    layers=[_opt_int(x, "init.layers") for x in layers])  # type: ignore[misc]


def _fill_sizes(student: StudentInfo, teacher: TeacherInfo, config: dict[str, Any]) -> None:
    """A size the record leaves unstated (null: version 1 records) is the one of the teacher's inline architecture,
    where the config has one (e.g. the tiny teacher): the one rule for a record read and a record a job fills. A
    stated 0 stays (a BiLSTM student has no attention heads)."""
    teacher_cfg = config.get("teacher") if isinstance(config.get("teacher"), dict) else None
    arch = _mapping((teacher_cfg or {}).get("config"))

    def size(value: int | None, key: str, where: str) -> int | None:
        return _opt_int(arch.get(key) if value is None else value, where)

    student.hidden_size = size(student.hidden_size, "hidden_size", "student.hidden_size")
    student.num_heads = size(student.num_heads, "num_attention_heads", "student.num_heads")
    teacher.num_layers = size(teacher.num_layers, "num_hidden_layers", "teacher.num_layers")
    teacher.hidden_size = size(teacher.hidden_size, "hidden_size", "teacher.hidden_size")


def _read_student(s: dict[str, Any]) -> StudentInfo:
    num_layers = _opt_int(s.get("num_layers"), "student.num_layers")
    name = str(s.get("name") or "truncated")  # version 1 students were all truncated teachers
    settings = dict(s["settings"]) if isinstance(s.get("settings"), dict) else {"num_layers": num_layers}
    layer_map = s.get("layer_map") or []
    if not isinstance(layer_map, list) or not all(isinstance(p, list) for p in layer_map):
        raise RecordError(f"student.layer_map {layer_map!r} is not a list of pairs")
    return StudentInfo(
        name=name, id=str(s.get("id") or ""), num_layers=num_layers,
        hidden_size=_opt_int(s.get("hidden_size"), "student.hidden_size"),
        num_heads=_opt_int(s.get("num_heads"), "student.num_heads"),
        layer_map=[[_opt_int(x, "student.layer_map") for x in p] for p in layer_map],  # type: ignore[misc]
        settings=settings,
    )


def _read_teacher(t: dict[str, Any], teacher_cfg: dict[str, Any] | None) -> TeacherInfo:
    # Without a config block (hand-made records) the teacher is known by what the record names.
    settings = teacher_cfg if teacher_cfg is not None else {"name_or_path": t.get("name_or_path")}
    return TeacherInfo(
        name=str(t.get("name") or settings.get("name") or t.get("name_or_path") or "unknown"),
        id=str(t.get("id") or part_id(settings)), name_or_path=_opt_str(t.get("name_or_path")),
        num_layers=_opt_int(t.get("num_layers"), "teacher.num_layers"),
        hidden_size=_opt_int(t.get("hidden_size"), "teacher.hidden_size"),
        source=_opt_str(t.get("source")), path=_opt_str(t.get("path")),
        dev=dict(t["dev"]) if isinstance(t.get("dev"), dict) else None,
        majority_baseline=dict(t["majority_baseline"]) if isinstance(t.get("majority_baseline"), dict) else None,
        members=[dict(m) for m in t["members"] if isinstance(m, dict)] if isinstance(t.get("members"), list) else None,
        weak_allowed=t.get("weak_allowed") is True,
    )


def load_json(path: Path) -> Any:
    """The JSON at `path` as stored (what `is_complete` judges); raises RecordError if unreadable."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"unreadable ({type(exc).__name__}: {exc})") from None


def load_record(path: Path) -> Record:
    """The record at `path`; raises RecordError saying why it cannot be read."""
    return Record.from_dict(load_json(path))


def earlier_record(path: Path) -> Record | None:
    """The record an earlier attempt of a job left at `path` (killed, requeued or failed), or None where there is
    none that reads as a record (absent, torn, not a record)."""
    data = read_record(path)
    if data is None:
        return None
    try:
        return Record.from_dict(data)
    except RecordError:
        return None


def write_record(path: Path, record: Record) -> None:
    """Write `record` to `path` atomically."""
    write_json_atomic(path, record.to_dict())
