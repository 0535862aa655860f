"""The declared kind of every config key (config/parse.py: identity, teacher, invariant, nondeterministic) and a second
legal value for each, which the generated invariance tests share: tests/unit/config/test_key_kinds.py (the hash and the
teacher key, from the config alone) and tests/integration/config/test_key_kinds_runs.py (two values of a result-invariant
key give the same record).

Every key is found by walking the typed schema (config_keys.py's walk, free-text keys included), so a key added
anywhere is covered, and a key added without a declaration fails."""

from __future__ import annotations

import copy
import dataclasses
import functools
import typing
from dataclasses import dataclass
from typing import Any, Literal

from config_keys import Key, _dataclass_in, _is_union, _leaves, all_keys
from helpers import FAST, compose_cfg, plain
from hydra.core.override_parser.overrides_parser import OverridesParser

from distill_sweep.config.parse import KINDS, key_kind
from distill_sweep.config.schema import (
    LoggerSettings,
    OptimizerSettings,
    RunSettings,
    TaskSettings,
    TeacherSettings,
)
from distill_sweep.data.augment_settings import AugmentSettings
from distill_sweep.data.corpus_settings import CorpusSettings
from distill_sweep.objectives import TERMS, ObjectiveSettings
from distill_sweep.procedures import PROCEDURES
from distill_sweep.students import STUDENTS

ROOTS: tuple[type, ...] = (RunSettings, OptimizerSettings, TaskSettings, TeacherSettings, LoggerSettings, AugmentSettings,
                           CorpusSettings, ObjectiveSettings, *(p.settings for p in PROCEDURES.values()),
                           *(s.settings for s in STUDENTS.values()), *(t.settings for t in TERMS.values()))
HASHED = ("identity", "teacher")
# What a record measures of the machine, not of the job: left out where records are compared (at any depth: the
# measured cost's seconds, records/blocks.Cost; its FLOPs are counted, not measured, and stay compared).
TIMING = ("wall_time_s", "samples_per_s", "peak_memory_mb", "cpu_seconds", "cpu_seconds_own", "gpu_seconds")


def settings_classes(roots: tuple[type, ...] = ROOTS) -> list[type]:
    """Every settings dataclass reachable from `roots` through its fields' types (nested blocks, optional blocks)."""
    seen: list[type] = []

    def walk(cls: type) -> None:
        if cls in seen:
            return
        seen.append(cls)
        for tp in typing.get_type_hints(cls).values():
            for inner in (tp, *typing.get_args(tp)):
                if dataclasses.is_dataclass(inner):
                    walk(inner)
    for root in roots:
        walk(root)
    return seen


def declaration_problems(cls: type) -> list[str]:
    """What is wrong with the declarations of `cls`'s fields: a field that declares no kind, a nondeterministic key
    without its reason, a block left out of the hash that holds a hashed key (which could never enter the hash)."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind = key_kind(f)
        if kind is None:
            out.append(f"{cls.__name__}.{f.name} declares no kind (one of {', '.join(KINDS)}: config/parse.py)")
            continue
        if kind == "nondeterministic" and not f.metadata.get("why"):
            out.append(f"{cls.__name__}.{f.name} is nondeterministic without saying why")
        inner = _dataclass_in(hints[f.name])
        if inner is not None and kind not in HASHED:
            hashed = [g.name for g in dataclasses.fields(inner) if key_kind(g) in HASHED]
            if hashed:
                out.append(f"{cls.__name__}.{f.name} is {kind} but its block hashes {', '.join(hashed)}")
    return out


@dataclass(frozen=True)
class KindCase:
    """One key at a second legal value: `base` the overrides of a job that reads it, `value` the override's value."""

    path: str
    kind: str
    base: tuple[str, ...]
    value: str

    def __str__(self) -> str:
        return f"{self.path}={self.value}"

    def overrides(self) -> list[str]:
        return [*FAST, *self.base, f"++{self.path}={self.value}"]

    def configs(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The plain configs (job.plain_config's form) of the job without and with the key at `value`: the base
        composed by Hydra once, the value parsed by Hydra's override grammar and set (composing each case would take
        the whole run's time)."""
        base = base_config(self.base)
        other = copy.deepcopy(base)
        value = OverridesParser.create().parse_overrides([f"++{self.path}={self.value}"])[0].value()
        node = other
        *parents, last = self.path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
        return copy.deepcopy(base), other


@functools.cache
def base_config(base: tuple[str, ...]) -> dict[str, Any]:
    return plain(compose_cfg([*FAST, *base]))


# Second values that the generic rule (`_other`) cannot choose: free text, structures, and the keys whose generic
# second value another setting refuses; each a legal value the job reads.
SECOND: dict[str, str] = {
    "init": "2", "map": "skip", "results_dir": "elsewhere", "cache_dir": "/tmp/another-cache",
    "finetune_grid": "{tasks: [rte], lrs: [1e-5], batch_sizes: [16]}", "pack_file": "/tmp/pack.json",
    "tune_chosen": "/tmp/chosen.json", "tune_journal": "tuning/x.journal", "tune.space": "{objective.alpha: {low: 0.1, high: 0.9}}",
    "device": "cpu", "optimizer.betas": "[0.8,0.98]", "teacher.finetune.betas": "[0.8,0.98]",
    "task.text_fields": "[sentence2,sentence1]", "task.label_names": "[negative,mixed,positive]",
    "task.train_size": "10", "task.augment": "tinybert", "task.name": "toy2",
    "teacher.name": "tiny2", "teacher.attn_implementation": "eager", "teacher.ensemble": "[1,2]",
    "teacher.engine_python": "/usr/bin/python3", "logger.project": "other", "logger.entity": "me",
    "logger.dir": "/tmp/wandb", "seeds.data_order": "2", "seeds.sampling": "2", "teacher.engine": "vllm",
    "procedure.teacher_logits": "top_k_full", "corpus.max_documents": "1000", "procedure.instructions.max_examples": "200",
    "procedure.branch_width": "256", "procedure.branch_heads": "4", "procedure.global_batch": "64",
    "procedure.micro_batch": "8", "student.hidden_size": "384", "student.shared_layers": "2",
}
# Keys a job reads only with another setting: the overrides that make it read them (beside config_keys.py's base of
# each part's settings).
INSTRUCTIONS = ("procedure.data=instructions",)
GENERATES = (*INSTRUCTIONS, "procedure.seq_kd=true")
LM_EVAL = (*INSTRUCTIONS, "procedure.lm_eval.tasks=[toy_instruct_rouge]")
BASE: dict[str, tuple[str, ...]] = {
    "tune": ("tune.trials=2", "+tune.space={objective.temperature:{low:1,high:8}}"),
    "tune.budget": ("tune.trials=2", "+tune.space={objective.temperature:{low:1,high:8}}", "tune.budget_by=flops"),
    "seeds.sampling": ("procedure=causal_lm", "teacher=tiny_llama", "optimizer.batch_size=null", "objective=fkl",
                       *INSTRUCTIONS, "procedure.on_policy=0.5"),
    "map": ("objective=att_kl",),  # read by an intermediate term
    "task.recipe.epochs": ("teacher.finetune.epochs=null",),  # the teacher's, where teacher.finetune leaves it
    "task.subset_seed": ("task.max_train_samples=100",),  # picks a subset where there is one
    "teacher.engine": ("procedure=causal_lm", "teacher=tiny_llama", "optimizer.batch_size=null", "objective=fkl",
                       *GENERATES),
    "procedure.on_policy": INSTRUCTIONS, "procedure.seq_kd": INSTRUCTIONS, "procedure.generation": GENERATES,
    "procedure.lm_eval.temperature": (*LM_EVAL, "procedure.lm_eval.sampling_seeds=[1]"),
    "procedure.lm_eval.top_p": (*LM_EVAL, "procedure.lm_eval.sampling_seeds=[1]"),
    "procedure.lm_eval": LM_EVAL,
    "procedure.embeddings_pair": ("objective=hid_seq",),
    "procedure.teacher_logits": ("procedure.teacher_top_k=8",),
    "objective.terms.hid_cls.projection_init": ("objective.terms.hid_cls.projection=linear", "student=tinybert_toy"),
    "objective.terms.hid_seq.projection_init": ("objective.terms.hid_seq.projection=linear", "student=tinybert_toy"),
}


# Keys no case varies: their values name data, models or files that must exist (a hub id, a directory, a column), or a
# structure with rules of its own (the labels' count and names, a source and its path); each is declared (the
# declarations test), and named here so that a key added without a second value in `SECOND` is seen.
NOT_VARIED = {
    "corpus.also", "corpus.hub_config", "corpus.hub_id", "corpus.name", "corpus.path", "corpus.revision", "corpus.split",
    "corpus.text_field", "corpus.source", "objective.terms.rel_kl.relations", "optimizer.name",
    "procedure.instructions.choices", "procedure.instructions.hub_config", "procedure.instructions.hub_id",
    "procedure.instructions.name", "procedure.instructions.path", "procedure.instructions.prompt_field",
    "procedure.instructions.response_field", "procedure.instructions.split", "procedure.instructions.source",
    "procedure.kd", "procedure.lm_eval.include_path", "procedure.lm_eval.sampling_seeds", "procedure.lm_eval.tasks",
    "procedure.map", "procedure.name", "procedure.speeds", "procedure.thresholds", "student.embeddings", "student.name",
    "student.tokenizer", "task.augment.embeddings", "task.augment.mlm", "task.data_dir", "task.dev_splits",
    "task.hub_config", "task.hub_id", "task.metrics", "task.primary_metric", "task.tsv", "task.num_labels",
    "task.is_regression", "teacher.config", "teacher.finetuned_path", "teacher.name_or_path", "teacher.tokenizer",
    "tune.metric",
}


def _current(config: dict[str, Any], path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _inside(x: float, bounds: dict[str, float]) -> bool:
    return all({"ge": x >= b, "gt": x > b, "le": x <= b, "lt": x < b}[name] for name, b in bounds.items())


def _other(tp: Any, value: Any, bounds: dict[str, float]) -> str | None:
    """A second legal value of a scalar key now at `value`: the other boolean or option, a number beside it inside
    the key's range; None for anything else (free text, lists, mappings: `SECOND` names those)."""
    if _is_union(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = args[0] if len(args) == 1 else tp
    if tp is bool:
        return str(not value).lower()
    if typing.get_origin(tp) is Literal:
        return next((str(o) for o in typing.get_args(tp) if o != value and o is not None), None)
    if tp in (int, float):
        start = value if value is not None else bounds.get("ge", bounds.get("gt", 0))
        steps = (1, -1, 2) if tp is int else (0.5, 2.0, 1.0, 0.25, 0.1)
        for step in steps:
            x = start + step if tp is int else (start * step if start else step)
            if x != value and _inside(x, bounds):
                return str(x) if tp is int else repr(float(x))
    return None


def _objective_keys() -> list[Key]:
    """The objective's own keys (config_keys.py walks its terms' settings, not the objective block)."""
    return [k for k in _leaves(ObjectiveSettings, "objective", ("objective=vanilla_kd",), free=True)
            if k.path not in ("objective.name", "objective.stages", "objective.terms", "objective.schedules")]


def kind_cases() -> list[KindCase]:
    """Every declared key (free text included, where `SECOND` names a value) at a second legal value, on a job that
    reads its part."""
    cases: list[KindCase] = []
    for key in [*all_keys(free=True), *_objective_keys()]:
        if key.path in NOT_VARIED:
            continue
        prefixes = [p for p in BASE if key.path == p or key.path.startswith(p + ".")]
        base = BASE[max(prefixes, key=len)] if prefixes else ()
        base = (*base, *key.base)
        current = _current(base_config(base), key.path)
        value = SECOND.get(key.path) or _other(key.tp, key.default if current is None else current, key.bounds)
        if value is not None:
            cases.append(KindCase(key.path, key.kind or "undeclared", base, value))
    return cases


def unvaried(cases: list[KindCase]) -> list[str]:
    """The keys of the walk that no case varies (no generic second value and none in `SECOND`)."""
    varied = {c.path for c in cases}
    return sorted({k.path for k in all_keys(free=True)} - varied - NOT_VARIED)
