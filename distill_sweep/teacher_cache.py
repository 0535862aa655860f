"""Fine-tuned teachers, cached by content: one per (backbone, task data, recipe, teacher seed).

The first job that needs a teacher fine-tunes it while holding a file lock; concurrent jobs with the
same key block on the lock and then reuse the saved model. The model is written to a temporary
directory and renamed into place, and `teacher.json` (with the dev metrics) is written last, so a
directory without it is never taken as a finished teacher. A finished entry whose files cannot be read
(a truncated `model.safetensors` after a full disk) is moved aside to `<dir>.corrupt-<UTC time>` and the
teacher is fine-tuned again, instead of failing every job that uses it.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from omegaconf import DictConfig, OmegaConf, open_dict

from distill_sweep.checkpoint import CHECKPOINT, remove_checkpoint
from distill_sweep.results import read_record, write_json_atomic
from distill_sweep.schema import ensemble_members

log = logging.getLogger(__name__)
META = "teacher.json"
CACHE_VERSION = 1  # bump when the fine-tuning procedure changes what it produces
LOCK_NOTICE_AFTER_S = 2.0  # a job still waiting for the lock after this says what it waits for
# Task keys that only exist for pilot runs: left out of the key while unset, so teachers cached before
# these keys existed keep their key (and are not fine-tuned again).
_OPTIONAL_TASK_KEYS = ("max_train_samples", "max_dev_samples")


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
    task = {k: v for k, v in task.items() if k not in ("recipe", "augment")}  # the teacher trains on the original
    for key in _OPTIONAL_TASK_KEYS:
        if task.get(key) is None:
            task.pop(key, None)
    if not any(key in task for key in _OPTIONAL_TASK_KEYS):
        task.pop("subset_seed", None)  # picks a subset only when there is one to pick
    return {
        "version": CACHE_VERSION,
        "teacher": teacher,
        "task": task,
        "optimizer": {k: optimizer.get(k) for k in ("betas", "eps", "weight_decay", "max_grad_norm")},
        "finetune": finetune_settings(cfg),
        "precision": cfg.precision,
    }


def member_configs(cfg: DictConfig) -> list[DictConfig]:
    """One job config per member of an ensemble teacher ([] for one teacher): the job's config with the
    member's teacher block (schema.ensemble_members), so each member is fine-tuned and cached exactly as that
    single teacher would be, and shares its cache entry."""
    block = OmegaConf.to_container(cfg.teacher, resolve=True)
    assert isinstance(block, dict)
    out = []
    for member in ensemble_members(block):
        member_cfg = copy.deepcopy(cfg)
        with open_dict(member_cfg):
            member_cfg.teacher = member
        out.append(member_cfg)
    return out


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
    with waiting_lock(Path(str(target) + ".lock"), "another job is fine-tuning this teacher"):
        meta = read_record(target / META)
        if meta is not None:
            problem = entry_problem(target) or (None if isinstance(meta.get("dev"), dict)
                                                else f"{META} has no dev metrics")
            if problem is None:
                log.info("reusing cached teacher %s", target)
                return target, "cache", meta["dev"]
            _set_aside(target, problem)
        tmp = target.with_name(target.name + ".partial")
        if not (tmp / CHECKPOINT).exists():  # an interrupted fine-tuning with a checkpoint resumes
            shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)  # a directory without teacher.json is unfinished
        tmp.mkdir(parents=True, exist_ok=True)
        log.info("fine-tuning teacher into %s", target)
        dev = finetune(tmp)
        remove_checkpoint(tmp / CHECKPOINT)  # training state, not part of the cached teacher
        write_json_atomic(tmp / META, {"key": teacher_key(cfg), "dev": dev})
        tmp.rename(target)
    return target, "trained", dev


@contextmanager
def waiting_lock(path: Path, why: str) -> Iterator[None]:
    """Hold a cache entry's file lock; a job that has to wait says once what it is waiting for (`why`)."""
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=LOCK_NOTICE_AFTER_S)
    except Timeout:
        log.info("waiting for the lock %s (%s)", path, why)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def entry_problem(directory: Path) -> str | None:
    """Why a finished cache entry cannot be loaded, or None. Reads only headers: cheap on every reuse.

    Checks that config.json parses and that every safetensors file (and every shard its index names)
    opens: safetensors refuses a header whose data offsets run past the end of the file, i.e. truncation.
    """
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError) as err:
        return f"config.json unreadable ({type(err).__name__}: {err})"
    if not isinstance(config, dict):
        return "config.json is not a JSON object"
    weights = sorted(directory.glob("*.safetensors"))
    for index in directory.glob("*.safetensors.index.json"):
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            return f"{index.name} unreadable ({type(err).__name__})"
        missing = sorted(s for s in shards if not (directory / s).is_file())
        if missing:
            return f"{index.name} names missing shards {missing}"
    if not weights and not any(directory.glob("pytorch_model*.bin")):
        return "no model weights (*.safetensors or pytorch_model*.bin)"
    from safetensors import SafetensorError, safe_open

    for path in weights:
        try:
            with safe_open(str(path), framework="numpy") as f:
                f.keys()
        except (OSError, SafetensorError) as err:
            return f"{path.name} unreadable ({str(err).strip().splitlines()[0][:160]})"
    return None


def _set_aside(target: Path, problem: str) -> None:
    aside = target.with_name(f"{target.name}.corrupt-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S.%fZ}")
    os.replace(target, aside)
    log.warning("cached teacher %s cannot be loaded (%s): moved it to %s, fine-tuning it again",
                target, problem, aside)
