"""The lm-eval stage of decoder jobs (`procedure.lm_eval`): EleutherAI's lm-evaluation-harness (`lm_eval`) run on the
trained student in memory after its last epoch, through its `HFLM` wrapper around the model and tokenizer.

Tasks are found among the shipped offline ones (data/lm_eval_tasks/: toy_instruct_rouge, a generate-until task
scored by ROUGE-L, and toy_instruct_choice, a multiple-choice task, over the toy instructions), the user's
`include_path` and, for a name found in neither, the harness's own (whose data come from the hub or its cache). A
name none of them knows is refused in one line by `check_tasks`, before any training (causal_lm.check_job).

The record gets `lm_eval`: the scores per task and metric, each task's documents' content hash and count, and the
settings; the per-example values go to `lm_eval_samples.npz` beside it (records/lm_eval_results.py, checksummed),
keyed by that hash. Greedy generation and the harness's fixed seeds: the same student gives the same scores.
The teacher is scored once (`teacher_stage`, cached under cache_dir/lm_eval by its path and the settings, reused
while its documents hash equals the student's) and its scores go into the block as `teacher`.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import random
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from distill_sweep.config.parse import as_dict
from distill_sweep.data.lm_eval_files import SHIPPED_TASKS, TASKS_DIR, docs_hash
from distill_sweep.errors import ConfigError
from distill_sweep.records.files import read_record, write_json_atomic
from distill_sweep.records.lm_eval_results import SAMPLES, TaskSamples, write_samples

from .settings import LMEvalSettings

WHERE = "procedure.lm_eval"
SKIPPED = {"alias", "name", "sample_len", "samples"}  # the harness's per-task entries that are not scores


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
    """Every task name known to the harness (shipped, include_path or its own), before any work."""
    if settings.tasks:
        manager_for(settings)


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


def evaluate(model: nn.Module, tokenizer: Any, settings: LMEvalSettings, batch_size: int) -> dict[str, Any]:
    """lm_eval's `simple_evaluate` on `model` in memory, with per-example records (log_samples)."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM

    tok, bos = harness_tokenizer(tokenizer)
    training = model.training
    model.eval()
    # simple_evaluate seeds Python's, NumPy's and torch's global generators: a pack member still training beside
    # this one (decoder_pack.py) must keep drawing its own stream, so they are put back as they were
    py_state, np_state = random.getstate(), np.random.get_state()
    devices = [model.device] if model.device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            lm = HFLM(pretrained=model, tokenizer=tok, batch_size=batch_size, add_bos_token=bos)
            out = simple_evaluate(model=lm, tasks=list(settings.tasks), task_manager=manager_for(settings),
                                  limit=settings.limit, num_fewshot=settings.num_fewshot, log_samples=True,
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
            rows.setdefault(doc_id, {})[m if filt == "none" else f"{m},{filt}"] = float(s[m])
    ids = sorted(rows)
    names = sorted({m for r in rows.values() for m in r})
    return TaskSamples(docs_hash(docs[i] for i in ids), np.asarray(ids, dtype=np.int64),
                       {m: np.asarray([rows[i][m] for i in ids], dtype=np.float64) for m in names})


def _block(out: dict[str, Any], tasks: list[str]) -> tuple[dict[str, Any], dict[str, TaskSamples]]:
    samples = {t: samples_of(out["samples"][t]) for t in tasks}
    return {"scores": {t: scores_of(out["results"][t]) for t in tasks},
            "docs": {t: {"docs_hash": s.docs_hash, "n": len(s.doc_id)} for t, s in samples.items()}}, samples


def teacher_stage(teacher: nn.Module, tokenizer: Any, settings: LMEvalSettings, teacher_info: dict[str, Any],
                  cache_dir: Path, docs: dict[str, Any], batch_size: int) -> dict[str, Any]:
    """The teacher's scores on the same tasks: read from the cache (cache_dir/lm_eval, keyed by the teacher's path,
    which names a trained teacher's cache key, and the settings) when they were made on the student's documents
    (`docs`, the student block's), else evaluated and cached. A teacher without a path (random) is evaluated."""
    where = teacher_info.get("path")
    file = None
    if where:
        key = hashlib.sha256(json.dumps({"teacher": str(where), "settings": as_dict(settings)},
                                        sort_keys=True).encode()).hexdigest()[:20]
        file = Path(cache_dir) / "lm_eval" / f"{key}.json"
        cached = read_record(file)
        if cached is not None and cached.get("docs") == docs:
            return {**cached, "cache": "reused"}
    block, _ = _block(evaluate(teacher, tokenizer, settings, batch_size), list(settings.tasks))
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(file, block)
    return {**block, "cache": "built" if file is not None else "none"}


def run_stage(model: nn.Module, tokenizer: Any, settings: LMEvalSettings, out_dir: Path, batch_size: int
              ) -> dict[str, Any]:
    """Evaluate `model`, write the per-example file beside the record and return the record's `lm_eval` block."""
    block, samples = _block(evaluate(model, tokenizer, settings, batch_size), list(settings.tasks))
    write_samples(out_dir, samples)
    return {**block, "samples_file": SAMPLES, "harness": f"lm_eval {version('lm_eval')}", "settings": as_dict(settings)}
