"""The lm-eval stage of decoder jobs (`procedure.lm_eval`): EleutherAI's lm-evaluation-harness (`lm_eval`) run on the
trained student in memory after its last epoch, through its `HFLM` wrapper around the model and tokenizer.

Tasks are found among the shipped offline ones (data/lm_eval_tasks/: toy_instruct_rouge, a generate-until task
scored by ROUGE-L, and toy_instruct_choice, a multiple-choice task, over the toy instructions), the user's
`include_path` and, for a name found in neither, the harness's own (whose data come from the hub or its cache). A
name none of them knows is refused in one line by `check_tasks`, before any training (causal_lm_checks.check_job).

The record gets `lm_eval`: the scores per task and metric, each task's documents' content hash and count, and the
settings; the per-example values go to `lm_eval_samples.npz` beside it (records/lm_eval_results.py, checksummed),
keyed by that hash. Greedy generation and the harness's fixed seeds: the same student gives the same scores. With
evaluation-sampling seeds each sampled request draws from a generator of its own (`row_seed`), and every row of a
batch ends at EOS, so no score depends on `eval_batch_size` (not in the job's hash). A task whose per-document
values are not numbers (`loglikelihood_rolling`, corpus-level metrics: `unscorable`) is refused before training.
The teacher is scored once (`teacher_stage`, cached under cache_dir/lm_eval by its path and the settings, reused
while its documents hash equals the student's) and its scores go into the block as `teacher`. A multiple-choice
task's block also holds its chance level (`chance`: a uniform guess among each document's choices), which the report
flags the teacher and the students at.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import logging
import random
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from distill_sweep.config.parse import as_dict, new_keys_at_default
from distill_sweep.data.lm_eval_files import SHIPPED_TASKS, TASKS_DIR, docs_hash
from distill_sweep.errors import ConfigError
from distill_sweep.records.files import read_record, write_json_atomic
from distill_sweep.records.lm_eval_results import SAMPLES, TaskSamples, write_samples

from .causal_lm_settings import LM_EVAL_DRAWS as DRAWS
from .causal_lm_settings import LMEvalSettings
from .lm_eval_likelihoods import loglikelihoods

WHERE = "procedure.lm_eval"
SKIPPED = {"alias", "name", "sample_len", "samples"}  # the harness's per-task entries that are not scores
GENERATE = "generate_until"  # the output type whose responses are sampled with procedure.lm_eval.sampling_seeds
MULTIPLE_CHOICE = "multiple_choice"  # the output type with a chance level (chance_of)
CHOICE_METRICS = ("acc", "acc_norm")  # a multiple-choice task's scores that a uniform guess among the choices sets


@functools.lru_cache(maxsize=4)
def _manager(paths: tuple[str, ...], defaults: bool) -> Any:
    from lm_eval.tasks import TaskManager  # imported here: seconds, and only for jobs with the stage on

    return TaskManager(include_path=list(paths), include_defaults=defaults)


def task_manager(settings: LMEvalSettings, defaults: bool = False) -> Any:
    """The harness's task index over the shipped tasks and `include_path` (+ its own tasks with `defaults`: slow,
    it reads every YAML it ships, so only when a name is not found in the first two)."""
    paths = [str(TASKS_DIR)] + ([str(Path(settings.include_path).expanduser())] if settings.include_path else [])
    return _manager(tuple(paths), defaults)


def manager_for(settings: LMEvalSettings) -> Any:
    """The smallest task index that knows every task of `settings`; ConfigError (one line) naming one it does not."""
    manager = task_manager(settings)
    if all(t in manager.all_tasks for t in settings.tasks):
        return manager
    manager = task_manager(settings, defaults=True)
    unknown = [t for t in settings.tasks if t not in manager.all_tasks]
    if unknown:
        own = (f"no readable YAML in {WHERE}.include_path={settings.include_path} names it" if settings.include_path
               else f"for your own task YAMLs set {WHERE}.include_path")
        raise ConfigError(f"{WHERE}.tasks: {unknown[0]!r} is not an lm-eval task (not shipped: "
                          f"{', '.join(SHIPPED_TASKS)}; not the harness's own; {own})")
    return manager


def check_tasks(settings: LMEvalSettings) -> None:
    """Every task name known to the harness (shipped, include_path or its own), before any work; with sampling seeds,
    at least one task that generates (a list of tasks the index says are all scored by likelihood is refused)."""
    if not settings.tasks:
        return
    with quiet_harness():
        manager = manager_for(settings)
        for task in settings.tasks:
            why = unscorable(manager, task)
            if why:
                raise ConfigError(f"{WHERE}.tasks: {task!r} cannot be scored by the stage: {why}; it keeps each "
                                  "document's score, so name tasks whose metrics are per-document numbers (mean, "
                                  "median or perplexity), or evaluate the saved student with lm_eval afterwards")
        load_local(settings)
    if settings.sampling_seeds:
        kinds = {t: output_type(manager, t) for t in settings.tasks}
        if all(k is not None and k != GENERATE for k in kinds.values()):
            listed = ", ".join(f"{t} ({k})" for t, k in kinds.items())
            raise ConfigError(f"{WHERE}.sampling_seeds samples the generate-until tasks, and none of {WHERE}.tasks "
                              f"generates: {listed}; name a {GENERATE} task or leave the seeds empty")


# the aggregations over per-document numbers: any other (f1, bleu, chrf, ter, weighted_perplexity, bits_per_byte,
# matthews_corrcoef, brier_score, ...) aggregates per-document tuples, which the per-example file cannot hold
NUMERIC_AGGREGATIONS = ("mean", "nanmean", "median", "perplexity")
ROLLING = "loglikelihood_rolling"  # per document a (loglikelihood, length) pair: perplexities over the corpus


def unscorable(manager: Any, task: str, depth: int = 0) -> str | None:
    """Why the stage cannot keep `task`'s per-document scores (None when it can, or when the index cannot tell: a
    tag or a Python task, known only once loaded), from its YAML as the index reads it; a group: each of its tasks."""
    entry = manager.task_index.get(task)
    if entry is None or entry.cfg is None or depth > 8:
        return None
    kind = str(getattr(entry.kind, "name", ""))
    if kind == "GROUP":
        members = entry.cfg.get("task") or []
        for member in members if isinstance(members, list) else [members]:
            why = unscorable(manager, member, depth + 1) if isinstance(member, str) else None
            if why:
                return why if member == task else f"its task {member!r}: {why}"
        return None
    if kind != "TASK":
        return None
    output = str(entry.cfg.get("output_type", GENERATE))
    if output == ROLLING:
        return (f"its output type {ROLLING} gives each document a (log-likelihood, length) pair, aggregated into "
                "perplexities over the whole corpus")
    from lm_eval.api.registry import AGGREGATION_REGISTRY, DEFAULT_METRIC_REGISTRY, get_metric_aggregation

    listed = entry.cfg.get("metric_list") or [{"metric": m} for m in DEFAULT_METRIC_REGISTRY.get(output, [])]
    for item in listed:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), str):
            continue  # a metric given as a function: known only once loaded
        metric, aggregation = item["metric"], item.get("aggregation")
        if aggregation is None:  # the metric's own, named as the registry names it
            try:
                own = get_metric_aggregation(metric)
            except Exception:  # noqa: BLE001 - a metric the registry does not know (an hf-evaluate one)
                own = None
            aggregation = next((name for name, fn in AGGREGATION_REGISTRY.items() if fn is own), None)
        if isinstance(aggregation, str) and aggregation not in NUMERIC_AGGREGATIONS:
            return (f"its metric {metric!r} is aggregated over the corpus ({aggregation}) from per-document values "
                    "that are not numbers")
    return None


def load_local(settings: LMEvalSettings) -> None:
    """Build each task defined by a local YAML (shipped or include_path), its documents read, so that a data file the
    YAML names and cannot be read (missing, malformed) is one line before any training rather than a failed stage
    after it. The harness's own tasks are left to the stage (their data come from the hub or its cache)."""
    manager = task_manager(settings)
    for task in settings.tasks:
        if task not in manager.all_tasks:
            continue
        try:
            manager.load([task])
        except Exception as exc:  # whatever the YAML's loader raises: named with the task and its file
            where = manager.task_index[task].yaml_path
            first = (str(exc).strip().splitlines() or [""])[0]
            raise ConfigError(f"{WHERE}.tasks: {task!r} ({where}) does not load: {type(exc).__name__}: "
                              f"{first}") from None


def output_type(manager: Any, task: str) -> str | None:
    """A task's output type as the harness's index reads its YAML (includes resolved; the harness's default
    `generate_until` when unstated); None for a group, a tag or a Python task (known only once loaded)."""
    entry = manager.task_index.get(task)
    if entry is None or entry.cfg is None or str(getattr(entry.kind, "name", "")) != "TASK":
        return None
    return str(entry.cfg.get("output_type", GENERATE))


def harness_tokenizer(tokenizer: Any) -> tuple[Any, bool | None]:
    """The tokenizer as HFLM reads it, and its add_bos_token. A tokenizer with BOS/EOS tokens is the harness's as it
    is. The toy tokenizer has none ([CLS] ... [SEP] around every text): a copy with [CLS] as BOS only at the start
    and [SEP] as EOS, so the student reads [BOS] prompt ... as it was trained (data/decoder.py) and stops at [EOS]."""
    if tokenizer.bos_token_id is not None and tokenizer.eos_token_id is not None:
        return tokenizer, None
    from tokenizers.processors import TemplateProcessing

    own = copy.deepcopy(tokenizer)
    own.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"{own.cls_token} $A", special_tokens=[(own.cls_token, own.cls_token_id)])
    own.bos_token, own.eos_token = own.cls_token, own.sep_token
    return own, True


def row_seed(seed: int, prompt: list[int], occurrence: int) -> int:
    """The seed of one generate-until request's own generator: a function of the sampling seed, the request's
    prompt tokens and how many requests with that same prompt came before it (in the harness's order, which sorts
    all requests before cutting them into batches), never of the batch it lands in."""
    text = json.dumps([int(seed), [int(t) for t in prompt], int(occurrence)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") & (2**63 - 1)


@functools.lru_cache(maxsize=1)
def _row_seeded_lm() -> type:
    """HFLM whose sampled generation draws each request from its own generator (`row_seed`).

    The harness samples a batch with torch's global generator, so a document's response depended on which documents
    shared its batch: the scores changed with eval_batch_size (0.3375 against 0.3038 ROUGE-L at 8 and 64), a key
    that is not in the job's hash. Here each row's tokens are drawn with models/generation.py's `RowSampler` (the
    Gumbel-max draw the on-policy samples use) from a generator seeded by the sampling seed and the request, the
    same at any batch size. Greedy requests are the harness's own. The progress bars are left out (the job's
    log is the job's)."""
    from lm_eval.models.huggingface import HFLM

    from distill_sweep.models.generation import sampler

    class RowSeededLM(HFLM):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, sampling_seed: int | None = None, chunk: int = 0, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.sampling_seed = sampling_seed
            self.chunk = chunk  # procedure.logit_chunk: the likelihoods' logits a chunk at a time (0: the harness's)
            self.seen: dict[tuple[int, ...], int] = {}  # prompt -> requests with it drawn so far

        def loglikelihood(self, requests: Any, disable_tqdm: bool = False) -> Any:
            return super().loglikelihood(requests, disable_tqdm=True)

        def _loglikelihood_tokens(self, requests: Any, disable_tqdm: bool = False, override_bs: int | None = None
                                  ) -> Any:
            if self.chunk <= 0 or self.backend != "causal":
                return super()._loglikelihood_tokens(requests, disable_tqdm=True, override_bs=override_bs)
            size = override_bs or self.batch_size
            return loglikelihoods(self.model, requests, max_length=self.max_length, chunk=self.chunk,
                                  batch_size=int(size) if str(size).isdigit() else 1, device=self.device,
                                  hook=lambda key, answer: self.cache_hook.add_partial("loglikelihood", key, answer))

        def generate_until(self, requests: Any, disable_tqdm: bool = False) -> Any:
            return super().generate_until(requests, disable_tqdm=True)

        def _model_generate(self, context: torch.Tensor, max_length: int, stop: list[str],
                            **generation_kwargs: Any) -> torch.Tensor:
            # a row ends at the tokenizer's EOS whatever its batch: the harness stops a batch only once every row has
            # met a stop sequence, and a row that went on past its EOS decoded without it (a special token, skipped)
            # so the stop sequence no longer cut it: its response depended on the rows beside it
            generation_kwargs.setdefault("eos_token_id", self.tokenizer.eos_token_id)
            if not generation_kwargs.get("do_sample"):
                return super()._model_generate(context, max_length, stop, **generation_kwargs)
            if self.sampling_seed is None:
                raise RuntimeError("a sampled generate-until request without an evaluation-sampling seed")
            kwargs = dict(generation_kwargs)
            kwargs.pop("do_sample")
            temperature = float(kwargs.pop("temperature", 1.0) or 1.0)
            top_p = float(kwargs.pop("top_p", 1.0) or 1.0)
            top_k = kwargs.pop("top_k", None)
            mask = kwargs.get("attention_mask")
            generators = []
            for n, row in enumerate(context.tolist()):
                prompt = [t for t, m in zip(row, mask[n].tolist()) if m] if mask is not None else row
                key = tuple(prompt)
                occurrence = self.seen.get(key, 0)
                self.seen[key] = occurrence + 1
                g = torch.Generator(device=context.device)
                g.manual_seed(row_seed(self.sampling_seed, prompt, occurrence))
                generators.append(g)
            processors = sampler(temperature, top_p, generators)
            if top_k:
                from transformers import TopKLogitsWarper

                processors.insert(0, TopKLogitsWarper(int(top_k)))
            stopping = stop_criteria(self.tokenizer, stop, context)
            return self.model.generate(input_ids=context, max_length=max_length, stopping_criteria=stopping,
                                       pad_token_id=self.tokenizer.pad_token_id, use_cache=True, do_sample=False,
                                       num_beams=1, logits_processor=processors, **kwargs)

    return RowSeededLM


def stop_criteria(tokenizer: Any, stop: list[str], context: torch.Tensor) -> Any:
    """The harness's stop-sequence criteria for a batch of `context` (as its own `_model_generate` builds them)."""
    from lm_eval.models.huggingface import stop_sequences_criteria  # the one HFLM itself uses

    return stop_sequences_criteria(tokenizer, stop, context.shape[1], context.shape[0])


@contextlib.contextmanager
def quiet_harness() -> Iterator[None]:
    """lm_eval's own warnings kept out of the job's log while it runs: they are addressed to its command-line users
    ("Please do not launch via accelerate ...", "Ensure 'do_sample=True' ...") and say nothing about this job. Its
    errors still reach the log."""
    logger = logging.getLogger("lm_eval")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def evaluate(model: nn.Module, tokenizer: Any, settings: LMEvalSettings, batch_size: int,
             tasks: list[str] | None = None, seed: int | None = None, chunk: int = 0) -> dict[str, Any]:
    """lm_eval's `simple_evaluate` on `model` in memory, with per-example records (log_samples), on `tasks` (all of
    the settings' by default); `seed`: a sampling seed, from which each sampled request draws with a generator of
    its own (`row_seed`: the same responses at any batch size); it is also the harness's torch seed, its Python,
    NumPy and few-shot seeds staying the harness's, so only the samples change with it. `chunk` > 0
    (procedure.logit_chunk): the likelihood requests' logits a chunk of positions at a time (lm_eval_likelihoods.py)."""
    from lm_eval import simple_evaluate

    tok, bos = harness_tokenizer(tokenizer)
    training = model.training
    model.eval()
    # simple_evaluate seeds Python's, NumPy's and torch's global generators: a pack member still training beside
    # this one (decoder_pack.py) must keep drawing its own stream, so they are put back as they were
    py_state, np_state = random.getstate(), np.random.get_state()
    devices = [model.device] if model.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), quiet_harness():
            lm = _row_seeded_lm()(pretrained=model, tokenizer=tok, batch_size=batch_size, add_bos_token=bos,
                                  sampling_seed=seed, chunk=chunk)
            seeded = {} if seed is None else {"torch_random_seed": seed}
            out = simple_evaluate(model=lm, tasks=list(tasks or settings.tasks), task_manager=manager_for(settings),
                                  limit=settings.limit, num_fewshot=settings.num_fewshot, log_samples=True,
                                  gen_kwargs=settings.gen_kwargs(), **seeded,
                                  bootstrap_iters=0)  # spread: the report's, over seeds (and examples)
    finally:
        model.train(training)
        random.setstate(py_state)
        np.random.set_state(np_state)
    assert out is not None  # (None on the ranks past 0 of the harness's own multi-process runs only)
    return out


def scores_of(results: dict[str, Any]) -> dict[str, float]:
    """One task's numeric scores, `metric` (the filter named only when not `none`), stderr entries left out."""
    scores = {}
    for key, value in results.items():
        metric, _, filt = key.partition(",")
        if key in SKIPPED or "_stderr" in metric or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        scores[metric if filt in ("", "none") else key] = float(value)
    return scores


def samples_of(samples: list[dict[str, Any]]) -> TaskSamples:
    """One task's logged samples as arrays in doc_id order (a task with several filters: `metric,filter`)."""
    rows: dict[int, dict[str, float]] = {}
    docs: dict[int, Any] = {}
    for s in samples:
        doc_id = int(s["doc_id"])
        docs[doc_id] = s["doc"]
        filt = s.get("filter", "none")
        for m in s["metrics"]:
            value = s[m]
            if not isinstance(value, (int, float, np.number)):  # (a bool, 0 or 1, is a number)
                # what check_tasks refuses before training (unscorable); a task it could not tell (a tag, a
                # Python task) ends here, in one line rather than float()'s TypeError
                raise RuntimeError(f"lm-eval metric {m!r} gives each document a {type(value).__name__}, not a "
                                   "number: the stage cannot keep its per-document scores (leave the task out)")
            rows.setdefault(doc_id, {})[m if filt == "none" else f"{m},{filt}"] = float(value)
    ids = sorted(rows)
    names = sorted({m for r in rows.values() for m in r})
    return TaskSamples(docs_hash(docs[i] for i in ids), np.asarray(ids, dtype=np.int64),
                       {m: np.asarray([rows[i][m] for i in ids], dtype=np.float64) for m in names})


def chance_of(samples: list[dict[str, Any]], scores: dict[str, float]) -> dict[str, float]:
    """A multiple-choice task's chance level for each of its `scores` that counts right picks (acc, acc_norm): the
    mean over its documents of 1 / (the document's number of choices, one loglikelihood request each), what a
    uniform guess scores. The report flags a teacher or student at it (report/decoder_lm_eval.py)."""
    choices = [len(s.get("arguments") or ()) for s in samples if s.get("filter", "none") == "none"]
    if not choices or min(choices) < 1:
        return {}
    level = float(np.mean([1 / k for k in choices]))
    return {m: level for m in scores if m in CHOICE_METRICS}


def _block(out: dict[str, Any], tasks: list[str]) -> tuple[dict[str, Any], dict[str, TaskSamples]]:
    samples = {t: samples_of(out["samples"][t]) for t in tasks}
    scores = {t: scores_of(out["results"][t]) for t in tasks}
    block = {"scores": scores,
             "docs": {t: {"docs_hash": s.docs_hash, "n": len(s.doc_id)} for t, s in samples.items()}}
    choice = [t for t in tasks if (out.get("configs") or {}).get(t, {}).get("output_type") == MULTIPLE_CHOICE]
    chance = {t: got for t in choice if (got := chance_of(out["samples"][t], scores[t]))}
    if chance:  # (only then: a block without multiple-choice tasks is the one of before)
        block["chance"] = chance
    return block, samples


def generated(out: dict[str, Any], tasks: list[str]) -> list[str]:
    """The tasks of a harness run that generated (their config's output type, as the harness ran them)."""
    return [t for t in tasks if (out.get("configs") or {}).get(t, {}).get("output_type") == GENERATE]


def scored(model: nn.Module, tokenizer: Any, settings: LMEvalSettings, batch_size: int, chunk: int = 0
           ) -> tuple[dict[str, Any], dict[str, TaskSamples]]:
    """The block (scores, docs; `sampling` with seeds) and the per-example results of `model` on the settings' tasks.

    Greedy (no sampling seeds): one harness run. With seeds: the first run has every task, its generate-until ones
    sampled with the first seed (a likelihood task does not sample: scored this once); the generate-until tasks are
    run again with each further seed. A sampled task's scores are the means over the seeds, each seed's in
    `sampling.scores` (task -> metric -> one value per seed) and its per-example values one row per seed."""
    tasks = list(settings.tasks)
    seeds = list(settings.sampling_seeds)
    first = evaluate(model, tokenizer, settings, batch_size, seed=seeds[0] if seeds else None, chunk=chunk)
    block, samples = _block(first, tasks)
    if not seeds:
        return block, samples
    sampled = generated(first, tasks)
    runs = [(block, samples)] + [_block(evaluate(model, tokenizer, settings, batch_size, tasks=sampled, seed=s,
                                                 chunk=chunk), sampled) for s in seeds[1:]]
    per_seed: dict[str, dict[str, list[float]]] = {}
    for task in sampled:
        rows = [got[task] for _, got in runs]
        if any(r.docs_hash != rows[0].docs_hash or not np.array_equal(r.doc_id, rows[0].doc_id) for r in rows):
            raise RuntimeError(f"lm-eval task {task} evaluated other documents under another sampling seed")
        per_seed[task] = {m: [b["scores"][task][m] for b, _ in runs] for m in block["scores"][task]}
        block["scores"][task] = {m: float(np.mean(v)) for m, v in per_seed[task].items()}
        samples[task] = TaskSamples(rows[0].docs_hash, rows[0].doc_id,
                                    {m: np.stack([r.metrics[m] for r in rows]) for m in rows[0].metrics}, seeds)
    block["sampling"] = {"seeds": seeds, "gen_kwargs": settings.gen_kwargs(), "tasks": sampled, "scores": per_seed,
                         "draws": DRAWS}
    return block, samples


def stated(settings: LMEvalSettings) -> dict[str, Any]:
    """The settings as the record and the teacher's cache key state them: the keys added at their default (the
    sampling ones, greedy) left out, so a greedy stage's record and cache key are those of before the keys."""
    return {k: v for k, v in as_dict(settings).items() if k not in new_keys_at_default(settings)}


def teacher_stage(teacher: nn.Module, tokenizer: Any, settings: LMEvalSettings, teacher_info: dict[str, Any],
                  cache_dir: Path, docs: dict[str, Any], batch_size: int, chunk: int = 0) -> dict[str, Any]:
    """The teacher's scores on the same tasks: read from the cache (cache_dir/lm_eval, keyed by the teacher's path,
    which names a trained teacher's cache key, and the settings) when they were made on the student's documents
    (`docs`, the student block's), else evaluated and cached. A teacher without a path (random) is evaluated."""
    where = teacher_info.get("path")
    file = None
    if where:
        key = hashlib.sha256(json.dumps({"teacher": str(where), "settings": stated(settings), "draws": DRAWS},
                                        sort_keys=True).encode()).hexdigest()[:20]
        file = Path(cache_dir) / "lm_eval" / f"{key}.json"
        cached = read_record(file)
        if cached is not None and cached.get("docs") == docs:
            return {**cached, "cache": "reused"}
    block, _ = scored(teacher, tokenizer, settings, batch_size, chunk)
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(file, block)
    return {**block, "cache": "built" if file is not None else "none"}


def run_stage(model: nn.Module, tokenizer: Any, settings: LMEvalSettings, out_dir: Path, batch_size: int,
              chunk: int = 0) -> dict[str, Any]:
    """Evaluate `model`, write the per-example file beside the record and return the record's `lm_eval` block."""
    block, samples = scored(model, tokenizer, settings, batch_size, chunk)
    write_samples(out_dir, samples)
    return {**block, "samples_file": SAMPLES, "harness": f"lm_eval {version('lm_eval')}", "settings": stated(settings)}
