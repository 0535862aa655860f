"""The dry run's cost: passes over the data and layer-passes per job, with and without the teacher-output store."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distill_sweep.data.augment_settings import samples_for
from distill_sweep.records import files
from distill_sweep.teachers import output_plan
from distill_sweep.teachers.cache import META, finetune_settings
from distill_sweep.teachers.output_plan import decoder_group, store_request

# The paper's cost of one task-agnostic student: 58 A100-hours for 100k updates of 1024 x 128 tokens
# (BERT-base teacher, 6-layer student): the dry run's anchor for corpus jobs with a step budget.
PAPER_A100_HOURS, PAPER_TOKENS = 58.0, 100_000 * 1024 * 128


def _passes(size: int, epochs: int, batch_size: int, max_steps: int | None) -> int:
    """Training sample-passes of `epochs` epochs over `size` examples, capped at `max_steps` per epoch."""
    per_epoch = min(size, max_steps * batch_size) if max_steps else size
    return per_epoch * epochs


def _decoder_teacher_work(ident: Any, cache: Path, teachers: dict[str, int], stores: set[Any]) -> None:
    """A decoder job's teacher (one built from its config and trained: counted once per config; whether it is
    cached is known only from its data's content) and its top-k store, if not built yet."""
    settings = ident.procedure_settings
    if ident.settings.teacher.name_or_path is None and settings.teacher_steps:
        teachers[decoder_group(ident.teacher, _fixed(settings))] = (settings.teacher_steps * settings.batch_size
                                                            * ident.settings.task.max_seq_length)
    request = store_request(ident)
    if request is not None and not request.prepared(cache):
        stores.add(request)


def _fixed(settings: Any) -> Any:
    """`settings` with the data's own responses: a seq_kd job trains the same teacher as the others first."""
    fixed = copy.copy(settings)
    fixed.seq_kd = False
    return fixed


def _generation_work(ident: Any, steps: float | None, cache: Path, sampled: dict[str, float],
                     stores: dict[tuple[str, str, int], int | None]) -> None:
    """A decoder job's generation: on_policy x its steps sampled batches of up to max_new_tokens student forwards
    each (KV cache), and its seq_kd store of the teacher's greedy generations, if not made yet (one per teacher,
    data and max_new_tokens: up to max_new_tokens forwards per output_plan.GENERATION_BATCH prompts)."""
    settings = ident.procedure_settings
    if not settings.generates():
        return
    new = settings.generation.max_new_tokens
    if settings.on_policy > 0:
        if steps is None:
            sampled["unsized"] += 1
        else:
            sampled["jobs"] += 1
            sampled["batches"] += settings.on_policy * steps
            sampled["forwards"] += settings.on_policy * steps * new
    if settings.seq_kd:
        group, tag = decoder_group(ident.teacher, settings), output_plan.generations_tag(new)
        if not any(output_plan.store_root(cache, ident.task).glob(f"{group}-{tag}-*/{output_plan.META}")):
            stores[(ident.task, group, new)] = settings.known_train_rows()


@dataclass
class _Work:
    """What estimate_cost adds up over the jobs."""

    student: int = 0  # training sample-passes of the students
    teacher: int = 0  # and of the teachers still to fine-tune
    teachers: set[Path] = field(default_factory=set)  # those teachers' directories
    unsized: int = 0  # jobs whose data size is not known before they read it (a corpus without a step budget)
    corpus_jobs: int = 0
    corpus_tokens: int = 0
    decoder_jobs: int = 0  # causal-LM students
    decoder_tokens: int = 0
    # decoder teachers a sweep trains (by config): training tokens each
    decoder_teachers: dict[str, int] = field(default_factory=dict)
    decoder_stores: set[Any] = field(default_factory=set)  # their top-k stores not built yet
    # frozen-teacher forward sample-passes with and without the store
    forwards: dict[str, int] = field(default_factory=lambda: {"store": 0, "live": 0})
    builds: dict[tuple[str, str], int] = field(default_factory=dict)  # stores to build: rows each
    # on-policy generation (expected)
    sampled: dict[str, float] = field(default_factory=lambda: {"jobs": 0, "batches": 0.0, "forwards": 0.0,
                                                               "unsized": 0})
    # seq_kd stores to make: their prompts (None: unknown)
    generations: dict[tuple[str, str, int], int | None] = field(default_factory=dict)


def estimate_cost(jobs: list[Any], done_records: list[dict[str, Any]], cache_dir: Path | None = None) -> str:
    """Training work in sample-passes (students, and the teachers still to fine-tune), and hours at the
    throughput of records already completed. `jobs` are job identities (distill_sweep.job.identity.identify)."""
    work = _Work()
    for ident in jobs:
        _count_job(work, ident, Path(cache_dir or files.absolute(ident.settings.run.cache_dir)))
    return (_passes_text(work, done_records, jobs) + _teacher_forwards_text(work) + _corpus_text(work)
            + _decoder_text(work) + _on_policy_text(work) + _seq_kd_text(work) + _unsized_text(work))


def student_passes(ident: Any) -> int:
    """One job's training sample-passes of its student, as estimate_cost counts them (a tuning trial trains at
    most this much: it is its arm's job on fewer rows)."""
    work = _Work()
    _count_job(work, ident, Path(files.absolute(ident.settings.run.cache_dir)))
    return work.student


def _count_job(work: _Work, ident: Any, cache: Path) -> None:
    """Adds one job's work: a job on a task's rows is sized by its epochs, one on a corpus (or a decoder's
    data) by its steps."""
    if getattr(ident.procedure_settings, "decoders", False):
        _decoder_teacher_work(ident, cache, work.decoder_teachers, work.decoder_stores)
    if ident.procedure_settings.reads_task:
        _count_task_job(work, ident, cache)
    else:
        _count_steps_job(work, ident, cache)


def _count_steps_job(work: _Work, ident: Any, cache: Path) -> None:
    """A job that does not read a task: its training tokens (and a decoder's generation), when its steps are known."""
    steps = _planned_steps(ident)
    if getattr(ident.procedure_settings, "decoders", False):
        _generation_work(ident, steps, cache, work.sampled, work.generations)
    if steps is None:
        work.unsized += 1
        return
    tokens = int(steps) * ident.procedure_settings.sequences_per_step() * ident.settings.task.max_seq_length
    if ident.procedure_settings.decoders:
        work.decoder_jobs, work.decoder_tokens = work.decoder_jobs + 1, work.decoder_tokens + tokens
    else:
        work.corpus_jobs, work.corpus_tokens = work.corpus_jobs + 1, work.corpus_tokens + tokens


def _planned_steps(ident: Any) -> float | None:
    """The optimiser steps of a job that does not read a task: its step budget, else its epochs over data of a
    stated size; capped by the smoke-run's steps per epoch; None when its data's size is known only once read."""
    s = ident.settings
    steps = getattr(ident.procedure_settings, "max_steps", None)
    epochs = min(s.run.epochs or math.inf, getattr(ident.procedure_settings, "epochs", None) or math.inf)
    rows = getattr(ident.procedure_settings, "known_train_rows", lambda: None)()
    if steps is None and rows is not None and epochs < math.inf:  # data of a stated size, by epochs
        per_epoch = rows // ident.procedure_settings.sequences_per_step()
        steps = epochs * min(per_epoch, s.run.max_steps_per_epoch or per_epoch)
    if s.run.max_steps_per_epoch and epochs < math.inf:  # the smoke-run caps bound it
        steps = min(steps or math.inf, epochs * s.run.max_steps_per_epoch)
    return steps


def _count_task_job(work: _Work, ident: Any, cache: Path) -> None:
    """A job on a task's rows: its students' passes (every stage, and a stage before the objective's), the frozen
    teacher's forwards and its teacher's fine-tuning if still to do."""
    s = ident.settings
    size = task_rows(s)
    if s.task.augment.name != "none":  # counted at its largest: every sample of every field new
        size *= 1 + len(s.task.text_fields) * samples_for(s.task.augment, s.task.name)
    batch = s.optimizer.batch_size or s.task.recipe.batch_size
    n_stages = len(ident.objective.stages) if ident.objective is not None else 1
    epochs = s.run.epochs or s.task.recipe.epochs
    passes = _passes(size, epochs, batch, s.run.max_steps_per_epoch)
    work.student += passes * n_stages
    if ident.objective is not None:  # every stage of a distilling job runs the teacher, unless stored
        _count_teacher_forwards(work, ident, size, passes, cache)
    # a stage before the objective's, e.g. PEA-KD's PTP
    work.student += _passes(size, ident.procedure_settings.pre_stage_epochs(epochs), batch, s.run.max_steps_per_epoch)
    _count_teacher_to_finetune(work, ident, size, cache)


def task_rows(s: Any) -> int:
    """The training rows of a job on a task (its settings `s`), before any augmentation (0: not stated)."""
    size = s.task.max_train_samples or s.task.train_size or s.task.recipe.num_train or 0
    return min(size, s.task.train_size or size)


def _count_teacher_forwards(work: _Work, ident: Any, size: int, passes: int, cache: Path) -> None:
    """A distilling job's frozen-teacher forwards, live and with the teacher-output store (whose logit stages read
    the store instead), and the store to build if it is not there yet."""
    n_stages = len(ident.objective.stages)
    logit_stages = sum(k in ("prediction", "combined") for k in ident.objective.stages)
    work.forwards["live"] += passes * n_stages
    request = store_request(ident)
    only_logits = n_stages - (logit_stages if request else 0)  # stages that still run it (intermediate)
    work.forwards["store"] += passes * only_logits
    if request is not None and not request.prepared(cache):
        work.builds[(ident.task, request.group)] = size


def _count_teacher_to_finetune(work: _Work, ident: Any, size: int, cache: Path) -> None:
    """The fine-tuning of the job's teacher on its task, once per teacher, unless given or already cached."""
    s = ident.settings
    if s.teacher.finetuned_path or (ident.objective is None and not ident.student_kind.needs_teacher_weights):
        return
    where = ident.teacher.directory(cache, ident.task)
    if where in work.teachers or (where / META).exists():
        return
    work.teachers.add(where)
    ft = finetune_settings(s.teacher.finetune, s.task.recipe)
    work.teacher += _passes(size, ft["epochs"], ft["batch_size"], ft["max_steps_per_epoch"])


def _passes_text(work: _Work, done_records: list[dict[str, Any]], jobs: list[Any]) -> str:
    """The line's start: the sample-passes, in job-hours at the median throughput of the grid's completed records,
    else of the results dir's completed records of its tasks and teachers."""
    passes = work.student + work.teacher
    line = (f"estimated cost: {passes:.3g} training sample-passes ({work.student:.3g} students, {work.teacher:.3g} "
            f"for {len(work.teachers)} teacher(s) to fine-tune)")
    if any(_speed(r) for r in done_records) or not jobs:
        return line + hours_text(passes, done_records)
    similar = similar_records(files.absolute(jobs[0].settings.run.results_dir), jobs)
    return line + hours_text(passes, similar, f"{len(similar)} completed job(s) of the same task and teacher")


def hours_text(passes: float, done_records: list[dict[str, Any]], of: str = "completed jobs") -> str:
    """`passes` in job-hours at the median throughput of the completed records (or why there are none); `of`: what
    those records are."""
    speeds = sorted(r["samples_per_s"] for r in done_records if _speed(r))
    if not speeds:
        return " (no completed record yet to convert it to hours)"
    speed = speeds[len(speeds) // 2]
    return f", ~{passes / speed / 3600:.3g} job-hours at the median {speed:.0f} samples/s of {of}"


def _speed(record: Any) -> bool:
    speed = record.get("samples_per_s") if isinstance(record, dict) else None
    return isinstance(speed, (int, float)) and not isinstance(speed, bool) and 0 < speed < math.inf


SIMILAR_RECORDS = 2000  # result.json files read at most for a speed when the grid has no completed job


def similar_records(results_dir: Path, jobs: list[Any]) -> list[dict[str, Any]]:
    """Completed records under `results_dir` of the grid's tasks and teachers (its shape: another objective, init or
    seed trains at a similar speed), for the estimate where none of the grid's own jobs is completed yet; a record
    that cannot be read is left out (the report names those)."""
    shapes = {(ident.task, ident.settings.teacher.name) for ident in jobs}
    out = []
    for i, path in enumerate(sorted(Path(results_dir).glob("*/*/*/*/*/result.json"))):
        if i >= SIMILAR_RECORDS:
            break
        record = files.read_record(path)
        if (isinstance(record, dict) and record.get("status") == "completed" and _speed(record)
                and (record.get("task"), (record.get("teacher") or {}).get("name")) in shapes):
            out.append(record)
    return out


def _teacher_forwards_text(work: _Work) -> str:
    if not work.forwards["live"]:
        return ""
    built = sum(work.builds.values())
    return (f"; frozen-teacher forwards: {work.forwards['store'] + built:.3g} sample-passes with the teacher-output "
            f"store ({len(work.builds)} store(s) to build, {built:.3g} rows), {work.forwards['live']:.3g} without")


def _corpus_text(work: _Work) -> str:
    if not work.corpus_jobs:
        return ""
    return (f"; {work.corpus_jobs} task-agnostic job(s): {work.corpus_tokens:.3g} training tokens, ~"
            f"{PAPER_A100_HOURS * work.corpus_tokens / PAPER_TOKENS:.3g} A100-hours at the paper's 58 per "
            "student of 100k x 1024 x 128 tokens (BERT-base -> 6 layers; other sizes scale with their FLOPs)")


def _decoder_text(work: _Work) -> str:
    """The decoder students' tokens, and the decoder teachers and top-k stores made before them."""
    line = ""
    if work.decoder_jobs:
        line += f"; {work.decoder_jobs} decoder job(s): {work.decoder_tokens:.3g} student training tokens"
    if work.decoder_teachers or work.decoder_stores:
        line += (f"; at most {len(work.decoder_teachers)} decoder teacher(s) trained first "
                 f"({sum(work.decoder_teachers.values()):.3g} tokens; none for one already cached), "
                 f"{len(work.decoder_stores)} top-k store(s) to build")
    return line


def _on_policy_text(work: _Work) -> str:
    sampled = work.sampled
    if not (sampled["jobs"] or sampled["unsized"]):
        return ""
    line = (f"; on-policy generation: ~{sampled['batches']:.3g} sampled batches in {sampled['jobs']} job(s) "
            f"(on_policy x steps), up to {sampled['forwards']:.3g} student forwards (max_new_tokens per sampled "
            "batch, KV cache)")
    if sampled["unsized"]:
        line += f", {sampled['unsized']} job(s) by epochs on data of unknown size not counted"
    return line


def _seq_kd_text(work: _Work) -> str:
    """The seq_kd stores of the teacher's generations still to make, in teacher forwards."""
    if not work.generations:
        return ""
    known = [(rows, new) for (_, _, new), rows in work.generations.items() if rows is not None]
    forwards = sum(math.ceil(rows / output_plan.GENERATION_BATCH) * new for rows, new in known)
    return (f"; {len(work.generations)} seq-KD generation store(s) to make: up to {forwards:.3g} teacher forwards "
            f"(max_new_tokens per {output_plan.GENERATION_BATCH} prompts"
            + (f"; {len(work.generations) - len(known)} of unknown size)" if len(known) < len(work.generations)
               else ")"))


def _unsized_text(work: _Work) -> str:
    if not work.unsized:
        return ""
    return (f"; {work.unsized} job(s) on a corpus by epochs not counted (its size is known once it is read; "
            "procedure.max_steps gives a count)")


def _teacher_stages(ident: Any) -> list[tuple[int, str, float]]:
    """(position, kind, sample-passes) of each stage of a distilling job that still runs the frozen teacher with
    the teacher-output store (estimate_cost's rule: a prediction or combined stage reads the store when it has one)."""
    if ident.objective is None:
        return []
    if getattr(ident.procedure_settings, "decoders", False):
        return _decoder_teacher_passes(ident)
    if not ident.procedure_settings.reads_task:
        return []
    s = ident.settings
    size = task_rows(s)
    passes = _passes(size, s.run.epochs or s.task.recipe.epochs, s.optimizer.batch_size or s.task.recipe.batch_size,
                     s.run.max_steps_per_epoch)
    stored = store_request(ident) is not None
    return [(i, kind, passes) for i, kind in enumerate(ident.objective.stages)
            if not (stored and kind in ("prediction", "combined"))]


def _decoder_teacher_passes(ident: Any) -> list[tuple[int, str, float]]:
    """A decoder job's live teacher forwards (sequences; none with a store, top-k or hidden, none when its steps are not known
    before its data is read): on the data's batches, which a pack's members share, and (expected: on_policy x
    steps) on its own student's samples, which it alone reads."""
    settings = ident.procedure_settings
    steps = _planned_steps(ident)
    if settings.stores_teacher() or steps is None:
        return []
    passes = steps * settings.sequences_per_step()
    share = settings.on_policy
    own = [(0, f"sampled by {ident.digest}", share * passes)] if share > 0 else []
    return [(0, "distill", (1 - share) * passes), *own]


def pack_cost(jobs: list[Any], packs: list[list[int]]) -> str:
    """The dry run's line on packs (sweep/packs.py): processes, and the frozen teacher's forward sample-passes
    with the store, one process per job and in packs (members at the same stage of the same position share one
    forward per batch)."""
    alone = sum(passes for job in jobs for _, _, passes in _teacher_stages(job))
    packed = 0.0
    for pack in packs:
        shared: dict[tuple[int, str], float] = {}
        for i in pack:
            for position, kind, passes in _teacher_stages(jobs[i]):
                shared[(position, kind)] = max(shared.get((position, kind), 0), passes)
        packed += sum(shared.values())
    several = [p for p in packs if len(p) > 1]
    return (f"packs (pack=auto): {len(jobs)} jobs in {len(packs)} process(es), {len(several)} pack(s) of "
            f"{', '.join(str(len(p)) for p in several) or 'none'} jobs; frozen-teacher forwards with the "
            f"teacher-output store: {packed:.3g} sample-passes in packs, {alone:.3g} one process per job")
