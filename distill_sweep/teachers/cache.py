"""Trained teachers, cached by content: one per (backbone, task data, recipe, teacher seed). Encoder teachers
fine-tuned on a task (`cached_teacher`) and decoder teachers trained on their sequences (teachers/decoder.py)
share this cache's entry rules (`cached_build`).

The first job that needs a teacher fine-tunes it while holding a file lock; concurrent jobs with the
same key block on the lock and then reuse the saved model. The model is written to a temporary
directory and renamed into place, and `teacher.json` (with the dev metrics) is written last, so a
directory without it is never taken as a finished teacher. A finished entry whose files cannot be read
(a truncated `model.safetensors` after a full disk) is moved aside to `<dir>.corrupt-<UTC time>` and the
teacher is fine-tuned again, instead of failing every job that uses it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distill_sweep.config.schema import FinetuneSettings, RecipeSettings, TeacherSettings
from distill_sweep.records.disk import set_aside
from distill_sweep.records.files import read_record, write_json_atomic
from distill_sweep.records.locks import waiting_lock
from distill_sweep.training.checkpoint_files import CHECKPOINT, remove_checkpoint

log = logging.getLogger(__name__)
META = "teacher.json"
CACHE_VERSION = 1  # bump when the fine-tuning procedure changes what it produces


@dataclass(frozen=True)
class TeacherSpec:
    """One teacher as the parts see it: its typed settings and its cache key (distill_sweep.job.teacher_keys)."""

    settings: TeacherSettings
    key: dict[str, Any]

    def directory(self, cache_dir: Path, task: str) -> Path:
        """Its cache entry: `<cache_dir>/teachers/<task>/<teacher name>-<12 hex of the key>`."""
        digest = hashlib.sha256(json.dumps(self.key, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return Path(cache_dir) / "teachers" / task / f"{self.settings.name}-{digest}"


RECIPE_KEYS = ("epochs", "lr", "batch_size", "warmup_ratio")  # the task recipe's keys a teacher.finetune key may set


def finetune_settings(finetune: FinetuneSettings, recipe: RecipeSettings) -> dict[str, Any]:
    """The teacher's fine-tuning recipe: teacher.finetune overrides, else the task recipe."""
    return {
        "epochs": int(finetune.epochs or recipe.epochs),
        "lr": float(finetune.lr or recipe.lr),
        "batch_size": int(finetune.batch_size or recipe.batch_size),
        "warmup_ratio": float(finetune.warmup_ratio if finetune.warmup_ratio is not None else recipe.warmup_ratio),
        "seed": int(finetune.seed),
        "max_steps_per_epoch": finetune.max_steps_per_epoch,
    }


def cached_teacher(
    spec: TeacherSpec, task: str, cache_dir: Path, finetune: Callable[[Path], dict[str, float]]
) -> tuple[Path, str, dict[str, float]]:
    """Path of the fine-tuned teacher, "cache" or "trained", and its dev metrics.

    `finetune(out_dir)` trains a teacher, saves it (model + tokenizer) into `out_dir` and returns its
    dev metrics; it runs at most once per key, whatever the number of concurrent jobs. `out_dir` survives
    an interrupted attempt when it holds a checkpoint, so `finetune` can resume from it.
    """
    return cached_build(spec.directory(cache_dir, task), spec.key, finetune)


def cached_build(target: Path, key: dict[str, Any], build: Callable[[Path], dict[str, float]],
                 doing: str = "fine-tuning") -> tuple[Path, str, dict[str, float]]:
    """The cache entry `target` of a teacher (encoder or decoder) keyed by `key`: built by `build(out_dir)`
    (saves the model into `out_dir`, returns its dev metrics) at most once whatever the number of concurrent
    jobs, reused while it loads, set aside and built again when it does not. Returns (path, "cache" or
    "trained", dev metrics); `doing` names the build in the log lines ("fine-tuning", "training")."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with waiting_lock(Path(str(target) + ".lock"), f"another job is {doing} this teacher"):
        meta = read_record(target / META)
        if meta is not None:
            problem = entry_problem(target) or (None if isinstance(meta.get("dev"), dict)
                                                else f"{META} has no dev metrics")
            if problem is None:
                log.info("reusing cached teacher %s", target)
                return target, "cache", meta["dev"]
            _set_aside(target, problem, doing)
        tmp = target.with_name(target.name + ".partial")
        if not (tmp / CHECKPOINT).exists():  # an interrupted fine-tuning with a checkpoint resumes
            shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)  # a directory without teacher.json is unfinished
        tmp.mkdir(parents=True, exist_ok=True)
        log.info("%s teacher into %s", doing, target)
        dev = build(tmp)
        remove_checkpoint(tmp / CHECKPOINT)  # training state, not part of the cached teacher
        write_json_atomic(tmp / META, {"key": key, "dev": dev})
        tmp.rename(target)
    return target, "trained", dev


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


def _set_aside(target: Path, problem: str, doing: str) -> None:
    aside = set_aside(target)
    log.warning("cached teacher %s cannot be loaded (%s): moved it to %s, %s it again",
                target, problem, aside, doing)
