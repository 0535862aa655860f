"""Fine-tuned teachers, cached by content: one per (backbone, task data, recipe, teacher seed).

The first job that needs a teacher fine-tunes it while holding a file lock; concurrent jobs with the
same key block on the lock and then reuse the saved model. The model is written to a temporary
directory and renamed into place, and `teacher.json` (with the dev metrics) is written last, so a
directory without it is never taken as a finished teacher.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock
from omegaconf import DictConfig, OmegaConf

from distill_sweep.results import read_record, write_json_atomic

log = logging.getLogger(__name__)
META = "teacher.json"
CACHE_VERSION = 1  # bump when the fine-tuning procedure changes what it produces


def finetune_settings(cfg: DictConfig) -> dict[str, Any]:
    """The teacher's fine-tuning recipe: teacher.finetune overrides, else the task recipe."""
    ft = cfg.teacher.get("finetune") or {}
    recipe = cfg.task.recipe
    return {
        "epochs": int(ft.get("epochs") or recipe.epochs),
        "lr": float(ft.get("lr") or recipe.lr),
        "batch_size": int(ft.get("batch_size") or recipe.batch_size),
        "warmup_ratio": float(ft.get("warmup_ratio") if ft.get("warmup_ratio") is not None else recipe.warmup_ratio),
        "seed": int(ft.get("seed", 1)),
        "max_steps_per_epoch": ft.get("max_steps_per_epoch"),
    }


def teacher_key(cfg: DictConfig) -> dict[str, Any]:
    """Everything that determines the fine-tuned teacher (and nothing about the student)."""
    teacher = OmegaConf.to_container(cfg.teacher, resolve=True)
    task = OmegaConf.to_container(cfg.task, resolve=True)
    optimizer = OmegaConf.to_container(cfg.optimizer, resolve=True)
    assert isinstance(teacher, dict) and isinstance(task, dict) and isinstance(optimizer, dict)
    for key in ("name", "finetuned_path"):
        teacher.pop(key, None)
    return {
        "version": CACHE_VERSION,
        "teacher": teacher,
        "task": {k: v for k, v in task.items() if k not in ("recipe",)},
        "optimizer": {k: optimizer.get(k) for k in ("betas", "eps", "weight_decay", "max_grad_norm")},
        "finetune": finetune_settings(cfg),
        "precision": cfg.precision,
    }


def teacher_dir(cfg: DictConfig, cache_dir: Path) -> Path:
    key = json.dumps(teacher_key(cfg), sort_keys=True, default=str)
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return Path(cache_dir) / "teachers" / str(cfg.task.name) / f"{cfg.teacher.name}-{digest}"


def cached_teacher(
    cfg: DictConfig, cache_dir: Path, finetune: Callable[[Path], dict[str, float]]
) -> tuple[Path, str, dict[str, float]]:
    """Path of the fine-tuned teacher, "cache" or "trained", and its dev metrics.

    `finetune(out_dir)` trains a teacher, saves it (model + tokenizer) into `out_dir` and returns its
    dev metrics; it runs at most once per key, whatever the number of concurrent jobs. `out_dir` survives
    an interrupted attempt when it holds a checkpoint, so `finetune` can resume from it.
    """
    target = teacher_dir(cfg, cache_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        meta = read_record(target / META)
        if meta is not None:
            log.info("reusing cached teacher %s", target)
            return target, "cache", meta["dev"]
        tmp = target.with_name(target.name + ".partial")
        if not (tmp / "checkpoint.pt").exists():  # an interrupted fine-tuning with a checkpoint resumes
            shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)  # a directory without teacher.json is unfinished
        tmp.mkdir(parents=True, exist_ok=True)
        log.info("fine-tuning teacher into %s", target)
        dev = finetune(tmp)
        write_json_atomic(tmp / META, {"key": teacher_key(cfg), "dev": dev})
        tmp.rename(target)
    return target, "trained", dev
