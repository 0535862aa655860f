"""The typed schema of a job's config: top-level keys and the settings of each config group.

The parts with a registry (procedure, student, objective terms) declare their own settings next to their
code; this module holds the rest. `check_config` parses them all: a wrong key, type or range is one
`ConfigError` line, raised for every job of a sweep before anything launches.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

from distill_sweep.config.parse import (
    IDENTITY,
    INVARIANT,
    LEARNING_RATE,
    SEED_RANGE,
    TEACHER,
    UNHASHED_AT_DEFAULT,
    as_dict,
    check_value,
    nondeterministic,
    parse,
    unhashed_at,
)
from distill_sweep.config.seeds import SeedSettings
from distill_sweep.config.space import GROUPS, check_group_choices, group_options
from distill_sweep.config.tune import TuneSettings
from distill_sweep.errors import ConfigError

# Top-level keys that are neither a group nor a run setting.
OTHER_KEYS = ("hydra",)


@dataclass
class CheckpointSettings:
    every_steps: int = field(default=0, metadata=INVARIANT | {"ge": 0})  # also every N optimiser steps (0: epoch ends)
    keep: bool = field(default=False, metadata=INVARIANT)  # keep checkpoint.pt after the job completes


@dataclass
class FsdpSettings:
    # the frozen teacher of a sharded job (several processes, training/fsdp.py): a whole copy on every rank
    # (replicate) or sharded over the ranks for inference only (shard: each block all-gathered for its forward)
    teacher: Literal["replicate", "shard"] = field(default="replicate", metadata=nondeterministic(
        "a sharded teacher's blocks are gathered for each forward: equal within float tolerance"))


@dataclass
class GuardSettings:
    # the teacher's dev metric must beat the majority-class baseline by this much
    teacher_margin: float = field(default=0.02, metadata=INVARIANT | {"ge": 0.0})
    # go on with a teacher that does not (plumbing runs); its record says weak_allowed
    allow_weak_teacher: bool = field(default=False, metadata=INVARIANT)


@dataclass
class FinetuneGridSettings:
    """`finetune_grid`: each distilled student fine-tuned on every task x lr x batch size x seed."""

    tasks: list[str] = field(default_factory=list, metadata=INVARIANT)  # task config names (conf/task)
    lrs: list[float] = field(default_factory=list, metadata=INVARIANT)  # learning rates of the grid
    batch_sizes: list[int] = field(default_factory=list, metadata=INVARIANT)  # batch sizes of the grid
    seeds: list[int] = field(default_factory=lambda: [1], metadata=INVARIANT)  # fine-tuning seeds
    epochs: int | None = field(default=None, metadata=INVARIANT | {"ge": 1})  # null: each task's recipe
    overrides: list[str] = field(default_factory=list, metadata=INVARIANT)  # more overrides for every fine-tune job

    def validate(self, where: str) -> None:
        for key in ("tasks", "lrs", "batch_sizes", "seeds"):
            if not getattr(self, key):
                raise ConfigError(f"{where}.{key} is empty: the fine-tune grid needs at least one value")
        for i, seed in enumerate(self.seeds):
            check_value(int, seed, f"{where}.seeds[{i}]", SEED_RANGE)
        known = group_options("task")
        unknown = [t for t in self.tasks if t not in known]
        if unknown:
            raise ConfigError(f"{where}.tasks: unknown task {unknown[0]!r} (choose from: {', '.join(known)})")
        if any(lr <= 0 for lr in self.lrs):
            raise ConfigError(f"{where}.lrs={self.lrs}: learning rates must be > 0")
        if any(b < 1 for b in self.batch_sizes):
            raise ConfigError(f"{where}.batch_sizes={self.batch_sizes}: batch sizes must be >= 1")
        try:
            OverridesParser.create().parse_overrides(list(self.overrides))
        except HydraException as err:
            why = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ConfigError(f"{where}.overrides={self.overrides}: not Hydra overrides ({why})") from None
        unknown = check_group_choices(list(self.overrides))
        if unknown:
            raise ConfigError(f"{where}.overrides: {unknown}")

    def points(self) -> list[list[str]]:
        """One override list per grid point, in the order the report lists them."""
        epochs = [f"epochs={self.epochs}"] if self.epochs is not None else []
        return [[f"task={t}", f"optimizer.lr={lr}", f"optimizer.batch_size={b}", f"seed={s}", *epochs]
                for t in self.tasks for lr in self.lrs for b in self.batch_sizes for s in self.seeds]


@dataclass
class RunSettings:
    """Top-level keys of conf/config.yaml. Each declares its kind (config/parse.py): those that say where or how a job
    runs, not what it computes, are `INVARIANT` (or `nondeterministic`, equal within a float tolerance)."""

    # which teacher layers initialise the student: 1, 2, 3 (the paper's skip, mixed, bottom), a rule (skip,
    # mixed, bottom/first, random) or a list of 1-based layers
    init: Any = field(default=1, metadata=IDENTITY)
    # which teacher layer each student layer learns from: init (the layers it was copied from), skip, last,
    # uniform, top, a list of teacher layers or of [student, teacher] pairs
    map: Any = field(default="init", metadata=IDENTITY)
    # the job's training seed, the master of every source of variance left null in `seeds` (data order, new
    # weights, dropout, sampling)
    seed: int = field(default=1, metadata=IDENTITY | SEED_RANGE)
    # a seed per source of variance (init, data_order, dropout, sampling), each null = `seed`: set one to fix
    # that source while `seed` sweeps the others (config/seeds.py)
    seeds: SeedSettings = field(default_factory=SeedSettings, metadata=IDENTITY)
    # auto (CUDA when there is one, else CPU), cpu, cuda or cuda:N
    device: str = field(default="auto", metadata=nondeterministic(
        "CPU and GPU kernels round differently: the same job within float tolerance"))
    # fp32, or bf16 autocast for the forwards (the losses stay float32)
    precision: Literal["fp32", "bf16"] = field(default="fp32", metadata=TEACHER)
    # epochs of every stage (null: the task recipe's)
    epochs: int | None = field(default=None, metadata=IDENTITY | {"ge": 1})
    # caps every epoch at this many steps (demos, smoke runs; null: whole epochs)
    max_steps_per_epoch: int | None = field(default=None, metadata=IDENTITY | {"ge": 1})
    eval_batch_size: int = field(default=64, metadata={"ge": 1, **INVARIANT})  # batch size of dev evaluation
    num_workers: int = field(default=0, metadata={"ge": 0, **INVARIANT})  # DataLoader worker processes
    # torch threads of the job (null: the CPUs this process may use: its affinity mask or SLURM allocation)
    threads: int | None = field(default=None, metadata={"ge": 1} | nondeterministic(
        "the thread count changes the order of float sums (1e-8 apart on the tiny jobs): equal within float tolerance"))
    # steps between progress lines where there is no terminal (SLURM logs)
    log_every: int = field(default=50, metadata={"ge": 1, **INVARIANT})
    # skip (and count) a step whose loss or gradient is NaN/inf instead of failing the job
    skip_nonfinite: bool = field(default=False, metadata=IDENTITY)
    # training batches: of similar lengths (less padding), or drawn uniformly (the first versions' order: left out of
    # the hash, so the jobs from before the key keep theirs)
    batching: Literal["length", "random"] = field(default="length", metadata=IDENTITY | unhashed_at("random"))
    # the frozen teacher's logits: from the teacher-output store where that is exact (auto), always from it
    # (store: a job where it would be wrong is refused), or from the teacher at every step (live); the same numbers
    # (to float tolerance, tested), so not hashed: the record says which
    teacher_outputs: Literal["auto", "store", "live"] = field(default="auto", metadata=nondeterministic(
        "the stored logits or the teacher's forward at each step: equal within float tolerance (tested)"))
    # when the job checkpoints, and whether the checkpoint is kept
    checkpoint: CheckpointSettings = field(default_factory=CheckpointSettings, metadata=INVARIANT)
    # several processes: how a sharded job (FSDP2) holds its teacher (the same numbers: the teacher's forward,
    # gathered or not)
    fsdp: FsdpSettings = field(default_factory=FsdpSettings, metadata=nondeterministic(
        "how several processes hold the teacher: its forward, gathered or not"))
    # checks of the teacher before it is distilled
    guards: GuardSettings = field(default_factory=GuardSettings, metadata=INVARIANT)
    # the result store: records, checkpoints, tables (relative: to the launch directory)
    results_dir: str = field(default="results", metadata=INVARIANT)
    # fine-tuned teachers, teacher-output stores, corpora, augmented splits, vocabularies ($DISTILL_SWEEP_CACHE,
    # else ~/.cache/distill_sweep: conf/config.yaml's value, resolved)
    cache_dir: str = field(default_factory=lambda: os.environ.get("DISTILL_SWEEP_CACHE",
                                                                  str(Path.home() / ".cache" / "distill_sweep")),
                           metadata={"shown_default": "$DISTILL_SWEEP_CACHE, else ~/.cache/distill_sweep",
                                     **INVARIANT})
    dry_run: bool = field(default=False, metadata=INVARIANT)  # `-m +dry_run=true`: the sweeper prints the plan and runs nothing (sweep/sweeper.py)
    # `-m +dry_run=true +dry_run_list=true`: the dry run lists every job it would run, not the first 20
    dry_run_list: bool = field(default=False, metadata=INVARIANT)
    # `-m +plan_seeds=true`: the dry run, plus the seeds each comparison needs from a pilot (analysis/seed_plan.py)
    plan_seeds: bool = field(default=False, metadata=INVARIANT)
    # set by the sweeper on its build jobs: fine-tune the job's teacher and build its teacher-output store,
    # then stop (no record), so the grid's jobs find both ready instead of queueing on one lock
    prepare_only: bool = field(default=False, metadata=INVARIANT)
    # the fine-tune grid that follows a distillation in the same sweep (distill_sweep/sweep/chain.py): the jobs a
    # sweep runs after this one, not this job
    finetune_grid: FinetuneGridSettings | None = field(default=None, metadata=INVARIANT)
    # a sweep's jobs that share batches (sweep/packs.py's rule) trained in lockstep in one process, one teacher
    # forward per batch for all of them (auto), or one process per job (off); a pack's members compute what they
    # would alone (bit-identical, tested)
    pack: Literal["auto", "off"] = field(default="auto", metadata=INVARIANT)
    # at most this many jobs in one pack (they share one process's memory: each holds its student and optimizer)
    pack_size: int = field(default=10, metadata={"ge": 1, **INVARIANT})
    # set by the sweeper on a pack's process: the file that lists its members' configs (sweep/packs.py)
    pack_file: str | None = field(default=None, metadata=INVARIANT)
    # a tuning budget per arm of a sweep, its search space and holdout (config/tune.py; trials 0: off)
    tune: TuneSettings = field(default_factory=TuneSettings, metadata=IDENTITY)
    # set by the sweeper on a tuning trial's job: its trial number; it trains without tune.holdout's share of the
    # training split and is scored on that share, never on a dev split (sweep/tune.py)
    tune_trial: int | None = field(default=None, metadata=IDENTITY | {"ge": 0, **UNHASHED_AT_DEFAULT})
    # set by the sweeper on a trial of an arm's study k > 0 (tune.studies): its study, whose sampler seed the trial
    # was drawn from (study 0's trials leave it unset: the single study's jobs)
    tune_study: int | None = field(default=None, metadata=IDENTITY | {"ge": 1, **UNHASHED_AT_DEFAULT})
    # set by the sweeper on a trial with tune.pruner: its study's journal (relative to results_dir), which the
    # trial reports its holdout evaluations to and asks whether to stop (training/trial_pruning.py)
    tune_journal: str | None = field(default=None, metadata=INVARIANT)
    # set by the sweeper on a tuned grid job: the file of its arm's chosen values and study (sweep/tune.py), which
    # its record copies as `tuned` (where the values came from: the values themselves are in the config)
    tune_chosen: str | None = field(default=None, metadata=INVARIANT)

    def validate(self, where: str) -> None:
        dev = self.device
        if dev not in ("auto", "cpu", "cuda") and not (dev.startswith("cuda:") and dev[5:].isdigit()):
            raise ConfigError(f"device={dev!r}: expected auto, cpu, cuda or cuda:N")
        for key in ("results_dir", "cache_dir"):
            if not str(getattr(self, key)).strip():  # "" would be the launch directory, silently
                hint = " (DISTILL_SWEEP_CACHE is set but empty: unset it or give it a path)" \
                    if key == "cache_dir" and os.environ.get("DISTILL_SWEEP_CACHE") == "" else ""
                raise ConfigError(f"{key} is empty: give a directory{hint}")


@dataclass
class OptimizerSettings:
    name: Literal["adamw"] = field(default="adamw", metadata=IDENTITY)  # AdamW with linear warmup and decay (the only one)
    lr: float | None = field(default=None, metadata=IDENTITY | LEARNING_RATE)  # null = task.recipe.lr
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98], metadata=IDENTITY)  # AdamW's (beta1, beta2)
    # Adam's epsilon: below ~1e-38 it is 0 in float32, and a parameter without gradient then gets 0/0
    eps: float = field(default=1e-6, metadata=IDENTITY | {"ge": 1e-12})
    weight_decay: float = field(default=0.1, metadata=IDENTITY | {"ge": 0.0})  # AdamW's decoupled weight decay
    # share of a stage's updates spent warming up (null: task.recipe.warmup_ratio)
    warmup_ratio: float | None = field(default=None, metadata=IDENTITY | {"ge": 0.0, "le": 1.0})
    # training batch size (null: task.recipe.batch_size)
    batch_size: int | None = field(default=None, metadata=IDENTITY | {"ge": 1})
    max_grad_norm: float = field(default=0.0, metadata=IDENTITY | {"ge": 0.0})  # 0 = no clipping

    def validate(self, where: str) -> None:
        check_betas(self.betas, f"{where}.betas")


def check_betas(betas: list[float], where: str) -> None:
    """AdamW's (beta1, beta2): two numbers in [0, 1) (ConfigError, one line)."""
    if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
        raise ConfigError(f"{where}={betas}: expected two numbers in [0, 1)")


@dataclass
class RecipeSettings:
    """A task's training recipe: the student's, and the teacher's fine-tuning's where teacher.finetune leaves a key null
    (so the teacher's key holds these four as that fine-tuning resolves them: job/teacher_keys.py)."""

    lr: float = field(default=2e-5, metadata=TEACHER | LEARNING_RATE)  # learning rate
    batch_size: int = field(default=32, metadata=TEACHER | {"ge": 1})  # training batch size
    epochs: int = field(default=10, metadata=TEACHER | {"ge": 1})  # epochs per stage
    # share of the updates spent warming up
    warmup_ratio: float = field(default=0.06, metadata=TEACHER | {"ge": 0.0, "le": 1.0})
    # toy only: training examples (the GLUE tasks do not write these three: at null, left out of the hash)
    num_train: int | None = field(default=None, metadata=TEACHER | {"ge": 2, **UNHASHED_AT_DEFAULT})
    num_dev: int | None = field(default=None, metadata=TEACHER | {"ge": 1, **UNHASHED_AT_DEFAULT})  # toy only: dev examples
    # toy only: the data generator's seed
    seed: int | None = field(default=None, metadata=TEACHER | {**SEED_RANGE, **UNHASHED_AT_DEFAULT})


METRICS = ("accuracy", "f1", "mcc", "pearson", "spearman")


@dataclass
class TsvSettings:
    """The layout of a task's original GLUE TSV files under task.data_dir."""

    subdir: str | None = field(default=None, metadata=TEACHER)  # the task's folder under data_dir (null: the task's name in capitals)
    files: dict[str, str] = field(default_factory=dict, metadata=TEACHER)  # each split's file name: train and every dev split
    header: bool = field(default=True, metadata=TEACHER)  # the first row names the columns
    # our field (each text field and label) -> the file's column: its name, or its 0-based position
    columns: dict[str, Any] = field(default_factory=dict, metadata=TEACHER)
    # how labels are written: str (mapped through label_names), int (label ids) or float (regression scores)
    label_type: Literal["str", "int", "float"] = field(default="int", metadata=TEACHER)


@dataclass
class TaskSettings:
    name: str = field(metadata=TEACHER)  # the task's name (records, result directories)
    # glue: GLUE-format data from the hub or local TSVs; toy: the synthetic task, generated offline
    source: Literal["glue", "toy"] = field(metadata=TEACHER)
    num_labels: int = field(metadata=TEACHER | {"ge": 1})  # classes (1 for regression)
    primary_metric: str = field(metadata=TEACHER)  # the metric that picks the best epoch (one of metrics)
    metrics: list[str] = field(metadata=TEACHER)  # dev metrics recorded: accuracy, f1, mcc, pearson, spearman
    max_seq_length: int = field(metadata=TEACHER | {"ge": 2})  # tokens per example after truncation
    recipe: RecipeSettings = field(metadata=IDENTITY)  # the task's training recipe
    hub_id: str | None = field(default=None, metadata=TEACHER)  # hub dataset id (nyu-mll/glue)
    hub_config: str | None = field(default=None, metadata=TEACHER)  # the dataset's config (rte, mrpc, ...)
    data_dir: str | None = field(default=None, metadata=TEACHER)  # a folder of the original GLUE TSVs, read instead of the hub (layout: tsv)
    # the text columns: one, or two for sentence pairs
    text_fields: list[str] = field(default_factory=lambda: ["sentence"], metadata=TEACHER)
    label_names: list[str] = field(default_factory=list, metadata=TEACHER)  # class names in label-id order
    is_regression: bool = field(default=False, metadata=TEACHER)  # a regression task (STS-B): MSE on one output
    # the dev splits evaluated: our name -> the dataset's split
    dev_splits: dict[str, str] = field(default_factory=lambda: {"validation": "validation"}, metadata=TEACHER)
    # for the dry run's cost estimate (the toy task does not write it, nor `tsv`: at null, left out of the hash)
    train_size: int | None = field(default=None, metadata=TEACHER | {"ge": 1, **UNHASHED_AT_DEFAULT})
    max_train_samples: int | None = field(default=None, metadata=TEACHER | {"ge": 1})  # seeded subset for pilot runs
    max_dev_samples: int | None = field(default=None, metadata=TEACHER | {"ge": 1})  # the same for every dev split
    # picks those subsets; fixed, so every training seed sees the same data
    subset_seed: int = field(default=0, metadata=TEACHER | SEED_RANGE)
    # the TSV layout under data_dir (null: the task has no TSV layout, so data_dir cannot be read)
    tsv: TsvSettings | None = field(default=None, metadata=TEACHER | UNHASHED_AT_DEFAULT)
    # offline augmentation of the training split: a name or a mapping; the augment part owns and checks its
    # settings (augment.parse_augment, called by job.identify)
    augment: Any = field(default="none", metadata=IDENTITY)

    def validate(self, where: str) -> None:
        for metric in self.metrics:
            if metric not in METRICS:
                raise ConfigError(f"{where}.metrics: unknown metric {metric!r} (known: {', '.join(METRICS)})")
        if self.primary_metric not in self.metrics:
            raise ConfigError(f"{where}.primary_metric={self.primary_metric!r} is not in {where}.metrics "
                              f"{self.metrics}")
        if self.is_regression and self.num_labels != 1:
            raise ConfigError(f"{where}: is_regression needs num_labels 1, got {self.num_labels}")
        if not self.is_regression and len(self.label_names) != self.num_labels:
            raise ConfigError(f"{where}: num_labels {self.num_labels} but {len(self.label_names)} label_names")
        if self.source == "toy" and self.data_dir:  # unread, but it would key another teacher: a silent re-fine-tune
            raise ConfigError(f"{where}.data_dir={self.data_dir!r}: task={self.name} generates its data and reads no "
                              "files; leave it out, or choose a GLUE task (task=rte task.data_dir=...)")


@dataclass
class FinetuneSettings:
    # fine-tuning epochs (null: the task recipe's)
    epochs: int | None = field(default=None, metadata=TEACHER | {"ge": 1})
    # fine-tuning learning rate (null: the task recipe's)
    lr: float | None = field(default=None, metadata=TEACHER | LEARNING_RATE)
    # fine-tuning batch size (null: the task recipe's)
    batch_size: int | None = field(default=None, metadata=TEACHER | {"ge": 1})
    # fine-tuning warmup share (null: the task recipe's)
    warmup_ratio: float | None = field(default=None, metadata=TEACHER | {"ge": 0.0, "le": 1.0})
    # fine-tuning seed (each seed is its own cached teacher)
    seed: int = field(default=1, metadata=TEACHER | SEED_RANGE)
    # caps every fine-tuning epoch (null: whole epochs)
    max_steps_per_epoch: int | None = field(default=None, metadata=TEACHER | {"ge": 1})
    # The teacher's own AdamW: the student's `optimizer` keys are not the teacher's, so a grid over them distils every
    # cell from one teacher. The defaults are the optimizer preset's, with which every teacher was fine-tuned before
    # these keys (left out of the hash at them: the config hashes and teacher keys of before stay).
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98], metadata=TEACHER | UNHASHED_AT_DEFAULT)
    eps: float = field(default=1e-6, metadata=TEACHER | UNHASHED_AT_DEFAULT | {"ge": 1e-12})  # the teacher's Adam epsilon
    # the teacher's decoupled weight decay
    weight_decay: float = field(default=0.1, metadata=TEACHER | UNHASHED_AT_DEFAULT | {"ge": 0.0})
    max_grad_norm: float = field(default=0.0, metadata=TEACHER | UNHASHED_AT_DEFAULT | {"ge": 0.0})  # 0: no clipping

    def validate(self, where: str) -> None:
        check_betas(self.betas, f"{where}.betas")

    def optimizer(self) -> OptimizerSettings:
        """The teacher's fine-tuning optimizer (its rate, batch size and warmup: `teachers.cache.finetune_settings`)."""
        return OptimizerSettings(betas=list(self.betas), eps=self.eps, weight_decay=self.weight_decay,
                                 max_grad_norm=self.max_grad_norm)


@dataclass
class TeacherSettings:
    name: str = field(metadata=IDENTITY)  # the teacher's config name (records, report rows)
    name_or_path: str | None = field(default=None, metadata=TEACHER)  # hub id or local directory of the backbone (null: built from config)
    # a directory holding a teacher already fine-tuned on the task: used as it is
    finetuned_path: str | None = field(default=None, metadata=IDENTITY)
    tokenizer: str | None = field(default=None, metadata=TEACHER)  # hub id or directory of the tokenizer (null: name_or_path's)
    # the architecture of a teacher built with random weights when name_or_path is null (teacher=tiny)
    config: dict[str, Any] = field(default_factory=dict, metadata=TEACHER)
    trust_remote_code: bool = field(default=False, metadata=TEACHER)  # let transformers run code from the model's repository
    attn_implementation: str = field(default="sdpa", metadata=TEACHER)  # transformers' attention implementation (sdpa, eager)
    # what does a decoder teacher's bulk work (its seq_kd responses, its top-k / sampled store): hf (transformers, in
    # the job's process) or vllm (a vLLM engine in its own process and environment: teachers/engine.py)
    engine: Literal["hf", "vllm"] = field(default="hf", metadata=IDENTITY)
    # the vLLM engine's python (null: $DISTILL_SWEEP_VLLM_PYTHON, else the checkout's .venv-vllm/bin/python)
    engine_python: str | None = field(default=None, metadata=INVARIANT)
    # how the teacher is fine-tuned on the task (cached once per setting)
    finetune: FinetuneSettings = field(default_factory=FinetuneSettings, metadata=TEACHER)
    # An ensemble teacher (MT-DNN): its members, each this block overridden by an entry, an integer being the
    # fine-tuning seed (`[1, 2, 3]`) and a mapping any teacher keys (`{finetune: {seed: 2}}`, another
    # backbone); null = one teacher. Left out of the teacher presets and of the hash at null, so their ids and
    # hashes stay as they were.
    ensemble: list[Any] | None = field(default=None, metadata=TEACHER | UNHASHED_AT_DEFAULT)

    def validate(self, where: str) -> None:
        if self.name_or_path is None and not self.config:
            raise ConfigError(f"{where}: set name_or_path (hub id or directory) or config (a model built fresh)")
        if self.ensemble is not None:
            self._validate_ensemble(f"{where}.ensemble")

    def member_settings(self) -> list[TeacherSettings]:
        """An ensemble's members, each as that single teacher, as `validate` parsed them ([] for one teacher)."""
        return list(getattr(self, "_members", []))

    def _validate_ensemble(self, where: str) -> None:
        if not self.ensemble:
            raise ConfigError(f"{where} is empty: list the members (fine-tuning seeds or teacher settings), or "
                              "set it to null for one teacher")
        for i, entry in enumerate(self.ensemble):
            if not (_is_seed(entry) or isinstance(entry, dict)):
                raise ConfigError(f"{where}[{i}]={entry!r}: expected a fine-tuning seed (an integer) or a mapping "
                                  "of teacher settings")
            if isinstance(entry, dict) and "ensemble" in entry:
                raise ConfigError(f"{where}[{i}].ensemble: a member is one teacher, not an ensemble")
        members = ensemble_members(as_dict(self))
        # each member parsed once, here, and kept for the job (`member_settings`); not a field: no config key
        self._members = [parse(TeacherSettings, member, f"{where}[{i}]") for i, member in enumerate(members)]
        for i, member in enumerate(members):
            for j in range(i):
                if members[j] == member:
                    raise ConfigError(f"{where}[{j}] and {where}[{i}] are the same teacher: members differ in their "
                                      "fine-tuning seed or backbone")


def _is_seed(entry: Any) -> bool:
    return isinstance(entry, int) and not isinstance(entry, bool)


def ensemble_members(teacher: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The member teacher blocks of a teacher block (plain containers; [] for one teacher): the block without
    `ensemble`, with each entry merged in (a seed sets finetune.seed; a mapping's nested mappings are merged)."""
    base = {k: v for k, v in teacher.items() if k != "ensemble"}
    return [_merged(base, {"finetune": {"seed": entry}} if _is_seed(entry) else entry)
            for entry in teacher.get("ensemble") or []]


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class LoggerSettings:
    # the tracker: wandb, mlflow (a local store under the results dir), trackio (local SQLite), or none
    name: Literal["wandb", "mlflow", "trackio", "none"] = field(default="wandb", metadata=INVARIANT)
    # offline (nothing leaves the machine), online (wandb only) or disabled (no tracking, any tracker)
    mode: Literal["offline", "online", "disabled"] = field(default="offline", metadata=INVARIANT)
    # the project (wandb, trackio) or experiment (mlflow) the runs go to
    project: str = field(default="distill_sweep", metadata=INVARIANT)
    entity: str | None = field(default=None, metadata=INVARIANT)  # wandb entity, a team or user (null: wandb's default)
    dir: str | None = field(default=None, metadata=INVARIANT)  # where wandb writes its files (null: wandb's default)


@dataclass
class ConfigSettings:
    """The checked settings of the parts this module owns."""

    run: RunSettings
    optimizer: OptimizerSettings
    task: TaskSettings
    teacher: TeacherSettings
    logger: LoggerSettings


def check_config(config: Mapping[str, Any]) -> ConfigSettings:
    """Parse the top-level keys and the task, teacher, optimizer and logger groups of a plain config
    (job.plain_config); ConfigError if bad."""
    run_keys = set(RunSettings.__dataclass_fields__)
    unknown = sorted(str(k) for k in config if k not in run_keys and k not in GROUPS and k not in OTHER_KEYS)
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown top-level key (known: {', '.join(sorted(run_keys))})")
    run = parse(RunSettings, {k: config[k] for k in run_keys if k in config}, "")
    task = parse(TaskSettings, config.get("task"), "task")
    if run.tune.metric is not None and run.tune.metric not in task.metrics:
        raise ConfigError(f"tune.metric={run.tune.metric!r} is not a metric of task {task.name} "
                          f"(its metrics: {', '.join(task.metrics)}; null: its primary metric)")
    return ConfigSettings(
        run=run,
        optimizer=parse(OptimizerSettings, config.get("optimizer"), "optimizer"),
        task=task,
        teacher=parse(TeacherSettings, config.get("teacher"), "teacher"),
        logger=parse(LoggerSettings, config.get("logger"), "logger"),
    )
