"""Parts the procedures share: building the student and training it with the stage driver."""

from __future__ import annotations

import logging
from typing import Any

from torch import nn
from transformers import PreTrainedModel

from distill_sweep.objectives.core import IntermediateObjective
from distill_sweep.objectives.teacher import TeacherView
from distill_sweep.records.files import absolute
from distill_sweep.students import BuildInputs
from distill_sweep.teachers import output_plan, output_store
from distill_sweep.teachers.finetuned import student_source
from distill_sweep.training.checkpoint_files import CHECKPOINT
from distill_sweep.training.context import RunContext
from distill_sweep.training.loop import seed_everything
from distill_sweep.training.stages import Stage
from distill_sweep.training.tracking import Tracker

log = logging.getLogger("distill_sweep")


def build_student(ctx: RunContext, teacher: PreTrainedModel | None) -> PreTrainedModel:
    """The job's student (its new weights seeded by the job's init seed), on the job's device."""
    job = ctx.job
    seed_everything(job.seeds.init)
    teacher = student_source(teacher) if teacher is not None else None  # an ensemble: its first member
    # With the teacher loaded, its real config (vocabulary size of the tokenizer) is the reference.
    arch = job.student_kind.describe(job.student, teacher.config) if teacher is not None else job.student_arch
    inputs = BuildInputs(arch=arch, teacher=teacher, init=job.init, num_labels=ctx.data.num_labels,
                         label_names=ctx.data.label_names, tokenizer=ctx.student_tokenizer)
    return job.student_kind.build(job.student, inputs).to(ctx.device)


def teacher_view(ctx: RunContext, teacher: nn.Module, terms: IntermediateObjective | None) -> TeacherView:
    """The frozen teacher as the job's losses read it: logits from the teacher-output store where that is
    exact (outputs_plan.plan), the teacher run only as deep as the terms read; the record says which."""
    job = ctx.job
    decision = output_plan.plan(job.settings.run.teacher_outputs, job.procedure, job.objective)
    live = job.settings.run.teacher_outputs == "live"
    depth = terms.teacher_depth if terms is not None and not live else None
    info: dict[str, Any] = {"mode": "live", "reason": decision.reason, "depth": depth}
    store = None
    if decision.use_store:
        cls_layers = output_plan.stored_cls_layers(job.objective, job.layer_map)
        whole = ctx.data.tuning_from if ctx.data.tuning_from is not None else ctx.data.train
        store = output_store.open_or_build(
            teacher, whole, cache_dir=ctx.cache_dir, task=job.task, group=output_plan.group_id(job.teacher),
            precision=ctx.precision, device=ctx.device, batch_size=job.settings.run.eval_batch_size,
            pad_token_id=int(ctx.tokenizer.pad_token_id), cls_layers=cls_layers)
        if cls_layers:
            depth = 0  # stage 1 reads the stored [CLS] states: the teacher runs no layer
        info = {"mode": "store", "key": store.key, "path": str(store.path), "built": store.built, "depth": depth,
                "cls_layers": cls_layers}
    ctx.record.teacher_outputs = info
    return TeacherView(teacher, store, depth, forward=ctx.pack.teacher_forward if ctx.pack is not None else None)


def train_student(ctx: RunContext, student: nn.Module, stages: list[Stage],
                  extra_state: dict[str, nn.Module] | None = None, state: dict[str, nn.Module] | None = None) -> None:
    """Run the student's stages (resumable, tracked) and complete the record. A checkpoint holds `state`
    (default: the student and `extra_state`)."""
    job, record = ctx.job, ctx.record
    state = state if state is not None else {"student": student, **(extra_state or {})}
    seeds = job.seeds
    if seeds.separate_streams:  # the training draws from their own stream, whatever the new weights drew
        seed_everything(seeds.dropout)  # (a resumed job then restores the checkpoint's generators)
    driver = ctx.driver(role="student", model=student, state=state, checkpoint=job.out_dir / CHECKPOINT, key=job.digest,
                        history=record.epochs, seed=seeds.data_order)
    if driver.resumed:
        record.resumed += 1
    tracker = Tracker(job.settings.logger, record, job.out_dir, results_dir=absolute(job.settings.run.results_dir),
                      group=ctx.sweep_group, name=run_name(job),
                      tags=[f"task:{job.task}", f"procedure:{job.procedure.name}", f"objective:{job.objective_name}",
                            f"init:{job.init.spec}", f"seed:{job.seed}"],
                      resume_id=driver.resumed_wandb_id)
    driver.tracker = tracker
    record.wandb = {"id": tracker.run_id, "dir": tracker.run_dir, "mode": job.settings.logger.mode}

    def count_requeue() -> None:
        record.requeued += 1
        ctx.save_record()

    driver.on_preempt = count_requeue  # type: ignore[method-assign]
    try:
        driver.run(stages)
    except BaseException as err:
        stopped = isinstance(err, (SystemExit, KeyboardInterrupt))  # preempted or interrupted: resumed later
        tracker.finish(exit_code=0 if isinstance(err, SystemExit) else 1, stopped=stopped)
        raise
    ctx.finish_record(driver)
    primary = job.settings.task.primary_metric
    assert record.best is not None and record.final is not None  # (finish_record set them)
    tracker.summary({f"best/{primary}": record.best["dev"][primary], f"final/{primary}": record.final["dev"][primary],
                     # the job's cost (the record's; None where unknown: left out)
                     **{f"system/{k}": v for k in ("wall_time_s", "samples_per_s", "peak_memory_mb")
                        if (v := getattr(record, k)) is not None}})
    tracker.finish()  # (the checkpoint is removed once the completed record is written: train._run)


def run_name(job: Any) -> str:
    return f"{job.task}-{job.objective_name}-init{job.init.spec}-s{job.seed}"
