"""The dry run's cost: passes over the data and layer-passes per job, with and without the teacher-output store."""

from __future__ import annotations

import copy
import math
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


def estimate_cost(jobs: list[Any], done_records: list[dict[str, Any]], cache_dir: Path | None = None) -> str:
    """Training work in sample-passes (students, and the teachers still to fine-tune), and hours at the
    throughput of records already completed. `jobs` are job identities (distill_sweep.job.identity.identify)."""
    student = teacher = 0
    teachers: set[Path] = set()
    unsized = 0  # jobs whose data size is not known before they read it (a corpus without a step budget)
    corpus_jobs, corpus_tokens = 0, 0
    decoder_jobs, decoder_tokens = 0, 0  # causal-LM students
    decoder_teachers: dict[str, int] = {}  # decoder teachers a sweep trains (by config): training tokens each
    decoder_stores: set[Any] = set()  # their top-k stores not built yet
    forwards = {"store": 0, "live": 0}  # frozen-teacher forward sample-passes with and without the store
    builds: dict[tuple[str, str], int] = {}  # stores to build: rows each
    sampled = {"jobs": 0, "batches": 0.0, "forwards": 0.0, "unsized": 0}  # on-policy generation (expected)
    generations: dict[tuple[str, str, int], int | None] = {}  # seq_kd stores to make: their prompts (None: unknown)
    for ident in jobs:
        s = ident.settings
        if getattr(ident.procedure_settings, "decoders", False):
            _decoder_teacher_work(ident, Path(cache_dir or files.absolute(s.run.cache_dir)), decoder_teachers,
                                  decoder_stores)
        if not ident.procedure_settings.reads_task:
            steps = getattr(ident.procedure_settings, "max_steps", None)
            epochs = min(s.run.epochs or math.inf, getattr(ident.procedure_settings, "epochs", None) or math.inf)
            rows = getattr(ident.procedure_settings, "known_train_rows", lambda: None)()
            if steps is None and rows is not None and epochs < math.inf:  # data of a stated size, by epochs
                per_epoch = rows // ident.procedure_settings.sequences_per_step()
                steps = epochs * min(per_epoch, s.run.max_steps_per_epoch or per_epoch)
            if s.run.max_steps_per_epoch and epochs < math.inf:  # the smoke-run caps bound it
                steps = min(steps or math.inf, epochs * s.run.max_steps_per_epoch)
            if getattr(ident.procedure_settings, "decoders", False):
                _generation_work(ident, steps, Path(cache_dir or files.absolute(s.run.cache_dir)), sampled,
                                 generations)
            if steps is None:
                unsized += 1
                continue
            tokens = int(steps) * ident.procedure_settings.sequences_per_step() * s.task.max_seq_length
            if ident.procedure_settings.decoders:
                decoder_jobs, decoder_tokens = decoder_jobs + 1, decoder_tokens + tokens
            else:
                corpus_jobs, corpus_tokens = corpus_jobs + 1, corpus_tokens + tokens
            continue
        size = s.task.max_train_samples or s.task.train_size or s.task.recipe.num_train or 0
        size = min(size, s.task.train_size or size)
        if s.task.augment.name != "none":  # counted at its largest: every sample of every field new
            size *= 1 + len(s.task.text_fields) * samples_for(s.task.augment, s.task.name)
        batch = s.optimizer.batch_size or s.task.recipe.batch_size
        n_stages = len(ident.objective.stages) if ident.objective is not None else 1
        epochs = s.run.epochs or s.task.recipe.epochs
        student += _passes(size, epochs, batch, s.run.max_steps_per_epoch) * n_stages
        if ident.objective is not None:  # every stage of a distilling job runs the teacher, unless stored
            logit_stages = sum(k in ("prediction", "combined") for k in ident.objective.stages)
            forwards["live"] += _passes(size, epochs, batch, s.run.max_steps_per_epoch) * n_stages
            request = store_request(ident)
            only_logits = n_stages - (logit_stages if request else 0)  # stages that still run it (intermediate)
            forwards["store"] += _passes(size, epochs, batch, s.run.max_steps_per_epoch) * only_logits
            cache = Path(cache_dir or files.absolute(s.run.cache_dir))
            if request is not None and not request.prepared(cache):
                builds[(ident.task, request.group)] = size
        # a stage before the objective's, e.g. PEA-KD's PTP
        student += _passes(size, ident.procedure_settings.pre_stage_epochs(epochs), batch, s.run.max_steps_per_epoch)
        if s.teacher.finetuned_path or (ident.objective is None and not ident.student_kind.needs_teacher_weights):
            continue
        where = ident.teacher.directory(Path(cache_dir or files.absolute(s.run.cache_dir)), ident.task)
        if where in teachers or (where / META).exists():
            continue
        teachers.add(where)
        ft = finetune_settings(s.teacher.finetune, s.task.recipe)
        teacher += _passes(size, ft["epochs"], ft["batch_size"], ft["max_steps_per_epoch"])
    passes = student + teacher
    line = (f"estimated cost: {passes:.3g} training sample-passes ({student:.3g} students, {teacher:.3g} for "
            f"{len(teachers)} teacher(s) to fine-tune)")
    speeds = [r["samples_per_s"] for r in done_records if r.get("samples_per_s")]
    if speeds:
        speed = sorted(speeds)[len(speeds) // 2]
        line += f", ~{passes / speed / 3600:.2f} job-hours at the median {speed:.0f} samples/s of completed jobs"
    else:
        line += " (no completed record yet to convert it to hours)"
    if forwards["live"]:
        built = sum(builds.values())
        line += (f"; frozen-teacher forwards: {forwards['store'] + built:.3g} sample-passes with the teacher-output "
                 f"store ({len(builds)} store(s) to build, {built:.3g} rows), {forwards['live']:.3g} without")
    if corpus_jobs:
        line += (f"; {corpus_jobs} task-agnostic job(s): {corpus_tokens:.3g} training tokens, ~"
                 f"{PAPER_A100_HOURS * corpus_tokens / PAPER_TOKENS:.3g} A100-hours at the paper's 58 per "
                 "student of 100k x 1024 x 128 tokens (BERT-base -> 6 layers; other sizes scale with their FLOPs)")
    if decoder_jobs:
        line += f"; {decoder_jobs} decoder job(s): {decoder_tokens:.3g} student training tokens"
    if decoder_teachers or decoder_stores:
        line += (f"; at most {len(decoder_teachers)} decoder teacher(s) trained first "
                 f"({sum(decoder_teachers.values()):.3g} tokens; none for one already cached), {len(decoder_stores)} "
                 "top-k store(s) to build")
    if sampled["jobs"] or sampled["unsized"]:
        line += (f"; on-policy generation: ~{sampled['batches']:.3g} sampled batches in {sampled['jobs']} job(s) "
                 f"(on_policy x steps), up to {sampled['forwards']:.3g} student forwards (max_new_tokens per sampled "
                 "batch, KV cache)")
        if sampled["unsized"]:
            line += f", {sampled['unsized']} job(s) by epochs on data of unknown size not counted"
    if generations:
        known = [(rows, new) for (_, _, new), rows in generations.items() if rows is not None]
        forwards = sum(math.ceil(rows / output_plan.GENERATION_BATCH) * new for rows, new in known)
        line += (f"; {len(generations)} seq-KD generation store(s) to make: up to {forwards:.3g} teacher forwards "
                 f"(max_new_tokens per {output_plan.GENERATION_BATCH} prompts"
                 + (f"; {len(generations) - len(known)} of unknown size)" if len(known) < len(generations) else ")"))
    if unsized:
        line += (f"; {unsized} job(s) on a corpus by epochs not counted (its size is known once it is read; "
                 "procedure.max_steps gives a count)")
    return line


def _teacher_stages(ident: Any) -> list[tuple[int, str, int]]:
    """(position, kind, sample-passes) of each stage of a distilling job that still runs the frozen teacher with
    the teacher-output store (estimate_cost's rule: a prediction or combined stage reads the store when it has one)."""
    if ident.objective is None or not ident.procedure_settings.reads_task:
        return []
    s = ident.settings
    size = s.task.max_train_samples or s.task.train_size or s.task.recipe.num_train or 0
    size = min(size, s.task.train_size or size)
    passes = _passes(size, s.run.epochs or s.task.recipe.epochs, s.optimizer.batch_size or s.task.recipe.batch_size,
                     s.run.max_steps_per_epoch)
    stored = store_request(ident) is not None
    return [(i, kind, passes) for i, kind in enumerate(ident.objective.stages)
            if not (stored and kind in ("prediction", "combined"))]


def pack_cost(jobs: list[Any], packs: list[list[int]]) -> str:
    """The dry run's line on packs (sweep/packs.py): processes, and the frozen teacher's forward sample-passes
    with the store, one process per job and in packs (members at the same stage of the same position share one
    forward per batch)."""
    alone = sum(passes for job in jobs for _, _, passes in _teacher_stages(job))
    packed = 0
    for pack in packs:
        shared: dict[tuple[int, str], int] = {}
        for i in pack:
            for position, kind, passes in _teacher_stages(jobs[i]):
                shared[(position, kind)] = max(shared.get((position, kind), 0), passes)
        packed += sum(shared.values())
    several = [p for p in packs if len(p) > 1]
    return (f"packs (pack=auto): {len(jobs)} jobs in {len(packs)} process(es), {len(several)} pack(s) of "
            f"{', '.join(str(len(p)) for p in several) or 'none'} jobs; frozen-teacher forwards with the "
            f"teacher-output store: {packed:.3g} sample-passes in packs, {alone:.3g} one process per job")
