"""The walk over every key of the typed config and the values tried at each, which two files share:
tests/unit/config/test_config_properties.py (wrong values refused, boundary values accepted) and
tests/integration/config/test_config_properties_runs.py (a step trained at each accepted boundary value).

Every key of every settings dataclass (the top level, the groups, and each group option's own settings: the
procedures, the student types, the objective terms, augmentation, the corpus) is found by walking the
dataclasses, so a new key is covered without touching the tests."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

from helpers import FAST

from distill_sweep.config.parse import key_kind
from distill_sweep.config.schema import (
    LoggerSettings,
    OptimizerSettings,
    RunSettings,
    TaskSettings,
    TeacherSettings,
)
from distill_sweep.data.augment_settings import AugmentSettings
from distill_sweep.data.corpus_settings import CorpusSettings
from distill_sweep.objectives import NEXT_TOKEN_TERMS, TERMS
from distill_sweep.procedures import PROCEDURES
from distill_sweep.students import STUDENTS

AGNOSTIC = ["procedure=task_agnostic", "teacher=tiny_mlm", "optimizer.batch_size=null"]
DECODER = ["procedure=causal_lm", "teacher=tiny_llama", "optimizer.batch_size=null"]  # decoder LMs (causal_lm)
# Keys whose value is free text or a structure another check owns (named, so the list is the whole story):
# paths and names (any string is a value), raw model/architecture blocks checked by transformers' own config
# class, the layer init/map (tests/e2e/test_parts.py and test_models.py), the run's planning flags.
FREE = {"results_dir", "cache_dir", "device", "init", "map", "dry_run", "prepare_only", "finetune_grid", "pack_file",
        "name", "hub_id", "hub_config", "data_dir", "tsv", "dev_splits", "text_fields", "label_names",
        "metrics", "primary_metric", "name_or_path", "finetuned_path", "tokenizer", "config", "ensemble",
        "attn_implementation", "project", "entity", "dir", "augment", "mlm", "embeddings", "path", "paths",
        "source", "text_field", "also", "hub_split", "thresholds", "corpus", "kd", "source_hash",
        "prompt_field", "response_field", "choices", "split"}


@dataclass(frozen=True)
class Key:
    """One settable key: where it is (`path`), its type, range and default, and the overrides that choose its part."""

    path: str
    tp: Any
    bounds: dict[str, float]
    base: tuple[str, ...]
    default: Any = None  # the field's own default (None: it has none, or a factory)
    kind: str | None = None  # the kind its field declares (config/parse.py's KINDS; None: none, which fails)

    def __str__(self) -> str:
        return self.path


def _leaves(cls: type, prefix: str, base: tuple[str, ...], free: bool = False) -> list[Key]:
    """The settable keys of `cls` under `prefix` (a nested block's keys, not the block); `free`: the FREE ones too."""
    hints = typing.get_type_hints(cls)
    out: list[Key] = []
    for f in dataclasses.fields(cls):
        if (f.name in FREE and not free) or not f.init:
            continue
        tp = hints[f.name]
        inner = _dataclass_in(tp)
        path = f"{prefix}.{f.name}" if prefix else f.name
        if inner is not None and not (f.name in FREE and free):
            out += _leaves(inner, path, base, free)
        else:
            out.append(Key(path, tp, {k: v for k, v in f.metadata.items() if k in ("ge", "gt", "le", "lt")}, base,
                           None if f.default is dataclasses.MISSING else f.default, key_kind(f)))
    return out


def _dataclass_in(tp: Any) -> type | None:
    args = [a for a in typing.get_args(tp) if a is not type(None)] if _is_union(tp) else [tp]
    return args[0] if len(args) == 1 and dataclasses.is_dataclass(args[0]) else None


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _objective_with(term: str) -> str:
    """A conf/objective option whose terms include `term`."""
    from omegaconf import OmegaConf

    from distill_sweep.config.space import CONF_DIR, group_options

    for option in group_options("objective"):
        if term in (OmegaConf.load(Path(CONF_DIR) / "objective" / f"{option}.yaml").get("terms") or {}):
            return option
    raise LookupError(term)


def all_keys(free: bool = False) -> list[Key]:
    """Every key of the typed config with the overrides that choose its part; `free`: the FREE keys too."""
    keys = _leaves(RunSettings, "", (), free)
    for prefix, cls in (("optimizer", OptimizerSettings), ("task", TaskSettings), ("teacher", TeacherSettings),
                        ("logger", LoggerSettings)):
        keys += _leaves(cls, prefix, (), free)
    keys += _leaves(AugmentSettings, "task.augment", ("task.augment={name: tang}",), free)
    keys += _leaves(CorpusSettings, "corpus", tuple(AGNOSTIC), free)
    for name, procedure in sorted(PROCEDURES.items()):
        base = tuple(AGNOSTIC) if name == "task_agnostic" else (f"procedure={name}",)
        if name == "causal_lm":
            base = tuple(DECODER) + ("objective=fkl",)
        if name == "ptp":
            base += ("+procedure.thresholds.toy={correct: 0.9, wrong: 0.65}", "objective=pkd", "student=sps2")
        keys += _leaves(procedure.settings, "procedure", base, free)
    for name, kind in sorted(STUDENTS.items()):
        if name in ("pretrained", "distilled"):  # read a saved model: their keys are paths (test_models.py)
            continue
        base = (f"student={name}", *(("objective=logit_mse",) if not kind.has_layers else ()))
        keys += _leaves(kind.settings, "student", base, free)
    for name, spec in sorted(TERMS.items()):
        # relation heads that divide the tiny teacher's width (64), as the preset for tiny models sets them
        fit = ("objective.terms.rel_kl.relation_heads=16",) if name == "rel_kl" else ()
        decoder = tuple(DECODER) if name in NEXT_TOKEN_TERMS else ()  # next-token terms: decoder LMs only
        keys += _leaves(spec.settings, f"objective.terms.{name}", (*decoder, f"objective={_objective_with(name)}",
                                                                    *fit), free)
    return keys


KEYS = all_keys()


def _job(key: Key, value: str) -> list[str]:
    return [*FAST, *key.base, f"++{key.path}={value}"]


def _scalar(tp: Any) -> Any:
    """The one non-None type of an optional field (or the type itself)."""
    if _is_union(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


WORD = "many"  # text: not what Hydra reads as a number, bool or null (nan, inf), nor any Literal's option


def _fraction(key: Key) -> float:
    """A number half a step from the key's default (else from the least whole number its range allows, or 1),
    inside the range: an int key refuses it for its type alone (cut to a whole number, the range allows it)."""
    low = key.bounds["ge"] if "ge" in key.bounds else key.bounds["gt"] + 1 if "gt" in key.bounds else None
    high = key.bounds.get("le", key.bounds.get("lt"))
    start = key.default if isinstance(key.default, int) else low if low is not None else 1
    return start + 0.5 if high is None or start + 0.5 < high else start - 0.5


def _non_finite(key: Key) -> list[str]:
    """An infinity on a side the key's range leaves open (refused as non-finite, not by a bound); none where
    the range is closed on both sides (there any infinity is a value outside a bound)."""
    lower, upper = ("ge" in key.bounds or "gt" in key.bounds), ("le" in key.bounds or "lt" in key.bounds)
    return [] if lower and upper else ["-inf"] if upper else ["inf"]


def _outside(name: str, bound: float, integral: bool) -> str:
    """The value nearest `bound` on its wrong side (boundary_values' values, one step over the edge)."""
    if integral:
        return repr({"ge": int(bound) - 1, "gt": int(bound), "le": int(bound) + 1, "lt": int(bound)}[name])
    if name in ("ge", "le"):
        return repr(math.nextafter(float(bound), -math.inf if name == "ge" else math.inf))
    return repr(float(bound))


def _unknown(tp: Any) -> str:
    """An option a Literal does not have: its first option in capitals (the options are lower case)."""
    return str(typing.get_args(tp)[0]).upper()


def wrong_values(key: Key) -> list[str]:
    """Override values this key must refuse: one of each kind of wrong its type and range admit."""
    tp = _scalar(key.tp)
    origin = typing.get_origin(tp)
    out: list[str] = []
    if tp in (int, float):
        out += [WORD, "[1, 2]"]  # text; a list
        out += [repr(_fraction(key))] if tp is int else _non_finite(key)  # int: a fraction; float: an infinity
    elif tp is bool:
        out += [WORD, "1"]  # text; a number
    elif origin is Literal:
        out.append(_unknown(tp))
    elif origin in (list, tuple):
        out.append("7")  # a single value
        item = typing.get_args(tp)[0] if typing.get_args(tp) else Any
        if typing.get_origin(item) is Literal or item in (int, float, bool):
            out.append(f"[{_unknown(item) if typing.get_origin(item) is Literal else WORD}]")  # an item of no type
    elif tp is str:
        out.append("[1, 2]")  # a list
    out += [_outside(name, bound, tp is int) for name, bound in key.bounds.items()]
    return out


def boundary_values(key: Key) -> list[str]:
    """The values at the edges of the range the key allows."""
    tp = _scalar(key.tp)
    out = []
    for name, bound in key.bounds.items():
        if name in ("ge", "le"):
            out.append(repr(int(bound)) if tp is int else repr(float(bound)))
        elif tp is int:
            out.append(repr(int(bound) + (1 if name == "gt" else -1)))
        else:
            out.append(repr(math.nextafter(float(bound), math.inf if name == "gt" else -math.inf)))
    return out


BOUNDED = [(k, v) for k in KEYS for v in boundary_values(k)]
# The boundary values that conflict with another setting at its default, each with the words of the one line
# that refuses it (keyed by the key's path and value, and for a part's key its part: `student=sps`); every other
# boundary value must be accepted (a validator that wrongly refuses one fails).
REFUSED_AT_BOUNDARY = {
    ("task.num_labels", "1"): "num_labels 1 but 3 label_names",
    ("task.augment.p_mask", "1.0"): "p_mask + p_pos = 1.1 > 1",
    ("task.augment.p_pos", "1.0"): "p_mask + p_pos = 1.1 > 1",
    ("corpus.max_documents", "2"): "leaves no training documents after corpus.dev_documents",
    ("corpus.mask_ratio", "1.0"): "mask_ratio + random_ratio = 1.1 > 1",
    ("corpus.random_ratio", "1.0"): "mask_ratio + random_ratio = 1.8 > 1",
    ("procedure.instructions.max_examples", "2"): "leave none to train on after dev_examples",
    ("procedure.instructions.num_examples", "2"): "leave none to train on after dev_examples",
    ("procedure.on_policy", "1.0"): "needs procedure.data=instructions (a corpus has no prompts)",
    ("procedure.branch_width", "1"): "is not a multiple of procedure.branch_heads",
    ("procedure.global_batch", "1"): "is not a multiple of procedure.micro_batch",
    # one token renormalised on both sides trains nothing (teacher_logits=top_k, the default with a top-k)
    ("procedure.teacher_top_k", "1"): "procedure.teacher_logits=top_k with procedure.teacher_top_k=1 trains nothing",
    # the lm-eval stage's settings without its tasks: the stage is off, so they would be unread
    ("procedure.lm_eval.limit", "1"): "procedure.lm_eval.tasks is empty, so the lm-eval stage is off",
    ("procedure.lm_eval.num_fewshot", "0"): "procedure.lm_eval.tasks is empty, so the lm-eval stage is off",
    # its sampling settings without sampling seeds (greedy): unread
    ("procedure.lm_eval.temperature", "0.001"): "procedure.lm_eval.sampling_seeds is empty (greedy)",
    ("procedure.lm_eval.temperature", "1000.0"): "procedure.lm_eval.sampling_seeds is empty (greedy)",
    ("procedure.lm_eval.top_p", "5e-324"): "procedure.lm_eval.sampling_seeds is empty (greedy)",
    ("student.hidden_size", "1", "student=fresh"): "is not a multiple of student.num_attention_heads",
    ("student.num_layers", "1", "student=sps"): "student.shared_layers=3: must be 1..student.num_layers=1",
    # an amount is a budget in seconds or FLOPs: with the default budget in trials, tune.trials is the budget
    ("tune.budget", "5e-324"): "with tune.budget_by=trials: the budget in trials is tune.trials",
}


def refusal(key: Key, value: str) -> str | None:
    """What REFUSED_AT_BOUNDARY says refuses `value` for `key` (None: it must be accepted)."""
    return REFUSED_AT_BOUNDARY.get((key.path, value)) or REFUSED_AT_BOUNDARY.get((key.path, value, *key.base[:1]))
