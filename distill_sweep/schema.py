"""The typed schema of a job's config: top-level keys and the settings of each config group.

The parts with a registry (procedure, student, objective terms) declare their own settings next to their
code; this module holds the rest. `check_config` parses them all: a wrong key, type or range is one
`ConfigError` line, raised for every job of a sweep before anything launches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from omegaconf import DictConfig

from distill_sweep.errors import ConfigError
from distill_sweep.settings import parse

GROUPS = ("procedure", "teacher", "student", "objective", "task", "optimizer", "logger", "experiment")
# Top-level keys that are neither a group nor a run setting.
OTHER_KEYS = ("hydra", "dry_run")


@dataclass
class CheckpointSettings:
    every_steps: int = field(default=0, metadata={"ge": 0})  # also every N optimiser steps (0: epoch ends)
    keep: bool = False  # keep checkpoint.pt after the job completes


@dataclass
class GuardSettings:
    teacher_margin: float = field(default=0.02, metadata={"ge": 0.0})
    allow_weak_teacher: bool = False


@dataclass
class RunSettings:
    """Top-level keys of conf/config.yaml."""

    init: Any = 1  # checked by models.resolve_init
    map: Any = "init"  # checked by mapping.resolve_map
    seed: int = 1
    device: str = "auto"
    precision: Literal["fp32", "bf16"] = "fp32"
    epochs: int | None = field(default=None, metadata={"ge": 1})
    max_steps_per_epoch: int | None = field(default=None, metadata={"ge": 1})
    eval_batch_size: int = field(default=64, metadata={"ge": 1})
    num_workers: int = field(default=0, metadata={"ge": 0})
    threads: int | None = field(default=None, metadata={"ge": 1})
    log_every: int = field(default=50, metadata={"ge": 1})
    skip_nonfinite: bool = False
    checkpoint: CheckpointSettings = field(default_factory=CheckpointSettings)
    guards: GuardSettings = field(default_factory=GuardSettings)
    results_dir: str = "results"
    cache_dir: str = "~/.cache/distill_sweep"

    def validate(self, where: str) -> None:
        dev = self.device
        if dev not in ("auto", "cpu", "cuda") and not (dev.startswith("cuda:") and dev[5:].isdigit()):
            raise ConfigError(f"device={dev!r}: expected auto, cpu, cuda or cuda:N")


@dataclass
class OptimizerSettings:
    name: Literal["adamw"] = "adamw"
    lr: float | None = field(default=None, metadata={"gt": 0.0})  # null = task.recipe.lr
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = field(default=1e-6, metadata={"gt": 0.0})
    weight_decay: float = field(default=0.1, metadata={"ge": 0.0})
    warmup_ratio: float | None = field(default=None, metadata={"ge": 0.0, "le": 1.0})
    batch_size: int | None = field(default=None, metadata={"ge": 1})
    max_grad_norm: float = field(default=0.0, metadata={"ge": 0.0})  # 0 = no clipping

    def validate(self, where: str) -> None:
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"{where}.betas={self.betas}: expected two numbers in [0, 1)")


@dataclass
class RecipeSettings:
    lr: float = field(default=2e-5, metadata={"gt": 0.0})
    batch_size: int = field(default=32, metadata={"ge": 1})
    epochs: int = field(default=10, metadata={"ge": 1})
    warmup_ratio: float = field(default=0.06, metadata={"ge": 0.0, "le": 1.0})
    num_train: int | None = field(default=None, metadata={"ge": 2})  # toy task only: data sizes and seed
    num_dev: int | None = field(default=None, metadata={"ge": 1})
    seed: int | None = None


METRICS = ("accuracy", "f1", "mcc", "pearson", "spearman")


@dataclass
class TaskSettings:
    name: str
    source: Literal["glue", "toy"]
    num_labels: int = field(metadata={"ge": 1})
    primary_metric: str
    metrics: list[str]
    max_seq_length: int = field(metadata={"ge": 2})
    recipe: RecipeSettings
    hub_id: str | None = None
    hub_config: str | None = None
    data_dir: str | None = None
    text_fields: list[str] = field(default_factory=lambda: ["sentence"])
    label_names: list[str] = field(default_factory=list)
    is_regression: bool = False
    dev_splits: dict[str, str] = field(default_factory=lambda: {"validation": "validation"})
    train_size: int | None = field(default=None, metadata={"ge": 1})  # for the dry run's cost estimate
    max_train_samples: int | None = field(default=None, metadata={"ge": 1})  # seeded subset for pilot runs
    max_dev_samples: int | None = field(default=None, metadata={"ge": 1})
    subset_seed: int = 0
    tsv: dict[str, Any] = field(default_factory=dict)

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


@dataclass
class FinetuneSettings:
    epochs: int | None = field(default=None, metadata={"ge": 1})
    lr: float | None = field(default=None, metadata={"gt": 0.0})
    batch_size: int | None = field(default=None, metadata={"ge": 1})
    warmup_ratio: float | None = field(default=None, metadata={"ge": 0.0, "le": 1.0})
    seed: int = 1
    max_steps_per_epoch: int | None = field(default=None, metadata={"ge": 1})


@dataclass
class TeacherSettings:
    name: str
    name_or_path: str | None = None
    finetuned_path: str | None = None
    tokenizer: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    trust_remote_code: bool = False
    attn_implementation: str = "sdpa"
    finetune: FinetuneSettings = field(default_factory=FinetuneSettings)

    def validate(self, where: str) -> None:
        if self.name_or_path is None and not self.config:
            raise ConfigError(f"{where}: set name_or_path (hub id or directory) or config (a model built fresh)")


@dataclass
class LoggerSettings:
    name: Literal["wandb", "none"] = "wandb"
    mode: Literal["offline", "online", "disabled"] = "offline"
    project: str = "distill_sweep"
    entity: str | None = None
    dir: str | None = None


@dataclass
class ConfigSettings:
    """The checked settings of the parts this module owns."""

    run: RunSettings
    optimizer: OptimizerSettings
    task: TaskSettings
    teacher: TeacherSettings
    logger: LoggerSettings


def check_config(cfg: DictConfig) -> ConfigSettings:
    """Parse the top-level keys and the task, teacher, optimizer and logger groups (ConfigError if bad)."""
    run_keys = set(RunSettings.__dataclass_fields__)
    unknown = sorted(str(k) for k in cfg if k not in run_keys and k not in GROUPS and k not in OTHER_KEYS)
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown top-level key (known: {', '.join(sorted(run_keys))})")
    run = parse(RunSettings, {k: cfg[k] for k in run_keys if k in cfg}, "")
    return ConfigSettings(
        run=run,
        optimizer=parse(OptimizerSettings, cfg.optimizer, "optimizer"),
        task=parse(TaskSettings, cfg.task, "task"),
        teacher=parse(TeacherSettings, cfg.teacher, "teacher"),
        logger=parse(LoggerSettings, cfg.logger, "logger"),
    )
