"""The run context: what every procedure of one job shares (the job, its record, device, data, loaders).

Procedures receive one `RunContext` instead of a dozen arguments; `ctx.stage(...)` turns a loss into a
`Stage` with the job's recipe, `ctx.driver(...)` gives the stage driver over the job's data.
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import torch
from torch import nn

from distill_sweep.config.schema import ConfigSettings, OptimizerSettings, RunSettings
from distill_sweep.config.tune import sampler_seed, trial_label
from distill_sweep.data.augment import augmented_train
from distill_sweep.data.batching import make_loader
from distill_sweep.data.glue import load_task_data
from distill_sweep.data.holdout import HOLDOUT, tuning_data
from distill_sweep.models.inits import StudentInit
from distill_sweep.models.loading import load_tokenizer
from distill_sweep.records import files
from distill_sweep.records.blocks import Cost, StudentVocab, TuneTrial
from distill_sweep.records.record import RECORD, SCORED_STAGES, DataInfo, Record, best_epoch, write_record
from distill_sweep.training import distributed
from distill_sweep.training.allocator import keep_freed_memory
from distill_sweep.training.distributed import is_main, local_device
from distill_sweep.training.fsdp import rank_slice
from distill_sweep.training.loop import LossFn, bf16_cpu_slowdown, bf16_cpu_warning, resolve_device
from distill_sweep.training.metrics import compute_metrics
from distill_sweep.training.pack import PackMember
from distill_sweep.training.prediction_capture import DevPredictionCapture, dev_hashes
from distill_sweep.training.stages import Stage, StageDriver, epoch_seed
from distill_sweep.training.trial_pruning import TrialPruning, instance_values

# the batching a teacher's fine-tuning uses, whatever the student's: the key's default
TEACHER_BATCHING: str = RunSettings.__dataclass_fields__["batching"].default
log = logging.getLogger("distill_sweep")


Role = Literal["student", "teacher"]  # whose stages a driver runs: the student's, or a teacher fine-tuned on the way


class Job(Protocol):
    """What the parts read of a prepared job (`distill_sweep.job.prepare.Job` is one; the job itself is
    orchestration, above the parts, so they name this instead)."""

    settings: ConfigSettings  # every group's typed settings
    procedure: Any  # the procedure's declaration
    procedure_settings: Any  # its settings dataclass
    student_kind: Any  # the student type's declaration
    student: Any  # its settings dataclass
    objective: Any  # ObjectiveSettings, None for procedures that do not distil
    teacher: Any  # TeacherSpec: the teacher block and its cache key
    members: list[Any]  # an ensemble's members, each a TeacherSpec
    digest: str
    out_dir: Path
    init: StudentInit
    layer_map: list[tuple[int, int]]
    teacher_arch: Any  # transformers' PretrainedConfig of the teacher and the student
    student_arch: Any

    @property
    def task(self) -> str: ...

    @property
    def seed(self) -> int: ...

    @property
    def seeds(self) -> Any: ...  # config.seeds.JobSeeds

    @property
    def objective_name(self) -> str: ...


@dataclass
class RunContext:
    job: Job
    record: Record  # the job's record while it runs (status running), written by save_record
    device: torch.device
    precision: str
    cache_dir: Path
    tokenizer: Any
    data: Any  # data.TaskData
    dev_loaders: dict[str, Any]
    started: float = field(default_factory=time.perf_counter)
    student_tokenizer: Any = None  # the student's own tokenizer (student=bilstm's word vocabulary), if it has one
    sweep_group: str | None = None  # the sweep's directory when the job is one of a sweep (groups tracker runs)
    predictions: DevPredictionCapture | None = None  # the student's dev predictions per epoch (driver sets it)
    pack: PackMember | None = None  # the job's pack, when it is trained in one (training/pack.py)

    @classmethod
    def open(cls, job: Job, record: Record, sweep_group: str | None = None) -> RunContext:
        """Set threads and device, load the tokenizer and the task's data (no model yet)."""
        run = job.settings.run
        if run.threads:
            torch.set_num_threads(run.threads)
        keep_freed_memory()  # steady-state steps stop page-faulting their temporaries (see allocator.py)
        cache_dir = files.absolute(run.cache_dir)

        device = local_device(resolve_device(run.device))
        if device.type == "cpu" and run.precision == "bf16":
            warning = bf16_cpu_warning(bf16_cpu_slowdown())
            if warning:
                log.warning(warning)
        record.device = str(device) if device.type == "cpu" else torch.cuda.get_device_name(device)
        tokenizer = load_tokenizer(job.settings.teacher, cache_dir)
        if not job.procedure_settings.reads_task:  # its data is not the task's (a corpus)
            return cls(job, record, device, run.precision, cache_dir, tokenizer, None, {}, sweep_group=sweep_group)
        augment = job.settings.task.augment
        info: dict[str, Any] = {}

        def augmented(train: Any) -> Any:
            split, found = augmented_train(train, job.settings.task, job.settings.teacher, augment, cache_dir, device,
                                           mask_token=str(tokenizer.mask_token))
            info.update(found)
            return split

        kind = job.student_kind
        own: dict[str, Any] = {}

        def student_words(train: Any) -> Any:
            # the student's own tokenizer, from the original training split's text (one per sweep: cache_dir)
            build_tokenizer = kind.tokenizer
            assert build_tokenizer is not None
            own["vocab"] = build_tokenizer(job.student, train, list(job.settings.task.text_fields), cache_dir, job.task)
            return own["vocab"]

        data = load_task_data(job.settings.task, tokenizer, cache_dir, augmented if augment.name != "none" else None,
                              words=student_words if job.procedure.uses_student and kind.has_tokenizer else None)
        tune = job.settings.run.tune
        if run.tune_trial is not None:  # a tuning trial: trains without the holdout, scored on it alone
            data = tuning_data(data, tune.holdout, tune.seed)
            study = run.tune_study or 0
            record.tune_trial = TuneTrial(number=run.tune_trial, holdout=tune.holdout, seed=tune.seed,
                                          holdout_size=len(data.dev[HOLDOUT]), study=study, sampler=tune.sampler,
                                          sampler_seed=sampler_seed(tune, study, run.tune_trial),
                                          order=run.tune_trial)
        if run.tune_chosen is not None:  # a tuned grid job: its arm's chosen values and a pointer to the study
            # (relative to the results directory, as sweep/tune.py stores every path: a copied store reads its own)
            chosen = files.absolute(run.results_dir) / run.tune_chosen
            record.tuned = files.read_record(chosen) or {"chosen": run.tune_chosen}
        if info:
            record.augment = info
        if own:
            record.student_vocab = StudentVocab(size=len(own["vocab"]), key=own["vocab"].key)
        dev_loaders = _dev_loaders(data.dev, run.eval_batch_size, int(tokenizer.pad_token_id))
        record.data = DataInfo(max_train_samples=job.settings.task.max_train_samples,
                               max_dev_samples=job.settings.task.max_dev_samples, train_size=len(data.train),
                               dev_size=len(next(iter(data.dev.values()))),  # the primary metric's split
                               # what the report checks before it pools or compares runs (one dev content)
                               dev_hash=dev_hashes(data.dev))
        return cls(job, record, device, run.precision, cache_dir, tokenizer, data, dev_loaders,
                   student_tokenizer=own.get("vocab"), sweep_group=sweep_group)

    def teacher_dev_loaders(self) -> dict[str, Any]:
        """What a teacher's fine-tuning is scored on: the reported dev splits, also in a tuning trial (whose own
        `dev_loaders` are the holdout's): the teacher cache keeps that score as the teacher's dev score, which every
        job of its key reads and sets beside the dev split's majority baseline."""
        reported = self.data.reported_dev if self.data is not None else None
        if reported is None:
            return self.dev_loaders
        return _dev_loaders(reported, self.job.settings.run.eval_batch_size, int(self.tokenizer.pad_token_id))

    def metrics(self, logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        return compute_metrics(self.job.settings.task, logits, labels)

    def loader(self, seed: int, train: Any = None, batching: str | None = None) -> Any:
        """stage, epoch -> that epoch's shuffled training batches (seeded by seed, stage kind, epoch) of `train`
        (default: the student's training split), drawn as `batching` says (default: the job's `batching`)."""
        pad, run = int(self.tokenizer.pad_token_id), self.job.settings.run
        train = self.data.train if train is None else train
        by_length = (batching or run.batching) == "length"

        def batches(stage: Stage, epoch: int) -> Any:
            loader = make_loader(train, stage.batch_size, shuffle=True,
                                 seed=epoch_seed(seed, stage.name, epoch), pad_token_id=pad,
                                 num_workers=run.num_workers, by_length=by_length)
            world = distributed.world()  # (at each epoch: a teacher fine-tuned by rank 0 alone reads whole batches)
            return loader if world.size == 1 else (rank_slice(b, world) for b in loader)

        return batches

    def stage(self, name: str, loss_fn: LossFn, params: list[nn.Parameter]) -> Stage:
        """A stage of the student with the job's recipe (the task's, unless the optimizer/epochs keys say)."""
        run, opt, recipe = self.job.settings.run, self.job.settings.optimizer, self.job.settings.task.recipe
        # a student may name its own rate (a BiLSTM from scratch: the GLUE recipes' rates are for fine-tuning)
        own = getattr(self.job.student, "lr", None) if self.job.procedure.uses_student else None
        lr = opt.lr or own or recipe.lr
        return Stage(name, run.epochs or recipe.epochs, lr, opt.batch_size or recipe.batch_size,
                     recipe.warmup_ratio if opt.warmup_ratio is None else opt.warmup_ratio, loss_fn, params,
                     max_steps_per_epoch=run.max_steps_per_epoch)

    def driver(self, *, role: Role, model: nn.Module, state: dict[str, nn.Module], checkpoint: Path, key: str,
               history: list[dict[str, Any]], seed: int, tracker: Any = None, label: str = "", train: Any = None,
               teacher_optimizer: OptimizerSettings | None = None) -> StageDriver:
        """The stage driver over `train` (default: the student's training split). `role`: whose stages these are:
        the student's (its epochs are the record's; a pack member's take turns; its predictions are kept) or
        a teacher's (fine-tuned on the way, under the teacher cache's lock). A teacher reads only what its cache key
        holds (the keys declared TEACHER): its own optimizer (`teacher_optimizer`), the default batching, no skipped
        steps; not the student's `optimizer`, `batching` or `skip_nonfinite`."""
        run = self.job.settings.run
        train = self.data.train if train is None else train
        student = role == "student"
        if not student and teacher_optimizer is None:
            raise ValueError("a teacher's stages need its own optimizer (teacher.finetune.optimizer())")
        extra: dict[str, Any] = {}
        pack = self.pack if student else None  # a pack member's own stages
        label = label or (pack.label if pack is not None else "")
        trial = run.tune_trial if student else None
        if trial is not None:  # a tuning trial's lines say which, and that they score the holdout, not a dev split
            label = f"[{trial_label(trial, run.tune.trials)}] {label}"
        if student:  # keep its predictions
            self.predictions = DevPredictionCapture(self.job.out_dir, self.data.dev, history,
                                                    self.job.settings.task.is_regression,
                                                    self.record.data.dev_hash)
            extra["evaluate_fn"] = self.predictions.evaluate
        loader = self.loader(seed, train, None if student else TEACHER_BATCHING)
        driver = StageDriver(model=model, state=state, train_size=len(train), loader=loader,
                             dev_loaders=self.dev_loaders if student else self.teacher_dev_loaders(),
                             metrics=self.metrics, device=self.device,
                             precision=self.precision,
                             optimizer_cfg=self.job.settings.optimizer if student else teacher_optimizer,
                             checkpoint=checkpoint, key=key, history=history, every_steps=run.checkpoint.every_steps,
                             log_every=run.log_every, skip_nonfinite=run.skip_nonfinite and student, tracker=tracker,
                             label=label, **extra)
        if trial is not None:
            driver.scored_on = "holdout"
            if run.tune.pruner != "none" and run.tune_journal is not None:  # asks its study's pruner as it goes
                if distributed.world().size == 1:
                    driver.after_evaluation = self._pruning(trial, history)
                else:  # (each rank would ask on its own, and the ranks could part ways)
                    log.warning("tune.pruner=%s: a trial of several processes is not pruned: it trains to its end",
                                run.tune.pruner)
        if student:
            driver.measure_cost()
        if pack is not None:
            # only the student's stages take turns: a teacher's fine-tuning holds the teacher cache's lock, which
            # another member would wait for while holding the turn
            driver.turn = pack.turn
        return driver

    def _pruning(self, trial: int, history: list[dict[str, Any]]
                 ) -> Callable[[int, dict[str, Any]], dict[str, Any] | None]:
        """A pruned trial's `after_evaluation` (training/trial_pruning.py): each evaluation reported to its study,
        the prune (if any) written into the record's `tune_trial`."""
        run, task = self.job.settings.run, self.job.settings.task
        pruning = TrialPruning(files.absolute(run.results_dir) / str(run.tune_journal), trial, run.tune.pruner,
                               run.tune.metric or task.primary_metric)

        def after(index: int, entry: dict[str, Any]) -> dict[str, Any] | None:
            if entry["stage"] not in SCORED_STAGES:  # (an intermediate stage's head is untrained: not a rung)
                return None
            arrays = self.predictions.last if self.predictions is not None else {}
            instances = instance_values(arrays[f"pred/{HOLDOUT}"], arrays[f"label/{HOLDOUT}"],
                                        task.is_regression) if f"pred/{HOLDOUT}" in arrays else None
            # the rung: this evaluation's place among the scored stages' (the same rungs for every objective)
            rung = sum(e["stage"] in SCORED_STAGES for e in history[:index])
            pruned = pruning.after_evaluation(rung, entry, instances)
            if pruned is not None and self.record.tune_trial is not None:
                self.record.tune_trial.pruned = pruned
                log.info("%spruned by the %s pruner at rung %d (%s epoch %d, holdout %s=%.4f)",
                         f"[{trial_label(trial, run.tune.trials)}] ", run.tune.pruner, rung + 1, entry["stage"],
                         entry["epoch"], pruned["metric"], pruned["value"])
            return pruned

        return after

    def save_record(self) -> None:
        if is_main():  # with several ranks only rank 0 writes
            write_record(self.job.out_dir / RECORD, self.record)

    def finish_record(self, driver: StageDriver) -> None:
        """Best and final dev scores, throughput, time and memory into the record."""
        record, primary = self.record, self.job.settings.task.primary_metric
        # an objective of intermediate stages only has no scored epoch: its best epoch is over all
        epochs = record.epochs
        best = best_epoch(epochs, primary) or max(epochs, key=lambda e: e["dev"][primary])
        record.best = {"stage": best["stage"], "epoch": best["epoch"], "dev": best["dev"]}
        if self.predictions is not None:  # the best epoch's per-example predictions beside result.json
            self.predictions.finish(next(i for i, e in enumerate(epochs) if e is best), best)
        record.final = {"dev": epochs[-1]["dev"]}
        record.samples_per_s = None if driver.samples_per_s is None else float(driver.samples_per_s)
        record.nonfinite_skipped = int(sum(e.get("nonfinite_skipped", 0) for e in epochs))
        record.padding = padding_by_stage(epochs)
        record.wall_time_s = time.perf_counter() - self.started
        cost = driver.cost()
        record.cost = Cost(**cost) if cost is not None else None
        record.peak_memory_mb, record.peak_memory_kind = peak_memory(self.device)


def padding_by_stage(epochs: list[dict[str, Any]]) -> dict[str, float]:
    """Padded / real tokens of the training batches per stage (mean over its epochs; 1.0 = no padding)."""
    ratios: dict[str, list[float]] = {}
    for entry in epochs:
        if "padding" in entry:
            ratios.setdefault(entry["stage"], []).append(float(entry["padding"]))
    return {stage: round(sum(r) / len(r), 4) for stage, r in ratios.items()}


def peak_memory(device: torch.device) -> tuple[float, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "cuda_max_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process_max_rss"


def _dev_loaders(splits: dict[str, Any], batch_size: int, pad: int) -> dict[str, Any]:
    # evaluation in order of length: metrics pair each prediction with its batch's labels, so order is free
    return {name: make_loader(ds, batch_size, shuffle=False, seed=0, pad_token_id=pad, by_length=True)
            for name, ds in splits.items()}
