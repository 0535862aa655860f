"""job/hashed.py and config/parse.py's `hashed_form`: a job's config hash and teacher keys come from its typed config,
each field saying in its metadata whether it makes the job, and every hash of before stays the job's."""

from __future__ import annotations

import copy
import dataclasses
from contextlib import nullcontext
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pytest
from helpers import FAST, compose_cfg

from distill_sweep.config.parse import (
    INVARIANT,
    UNHASHED_AT_DEFAULT,
    hashed_form,
    is_hashed,
    parse,
    unhashed_at,
)
from distill_sweep.config.schema import RunSettings
from distill_sweep.job.config import parse_plain
from distill_sweep.job.hashed import hashed_config
from distill_sweep.job.identity import identify, identify_plain
from distill_sweep.job.plain_config import plain_config
from distill_sweep.job.teacher_keys import teacher_specs
from distill_sweep.training.processes import planned

BASE = [*FAST, "objective=att_kl", "init=3"]  # a job whose every top-level setting is read (map: an intermediate term)

# A value other than the default for every top-level setting (conf/config.yaml's keys and the sweeper's).
OTHER_VALUES: dict[str, Any] = {
    "init": 2, "map": "skip", "seed": 2, "seeds": {"init": 5, "data_order": None, "dropout": None, "sampling": None},
    "device": "cpu", "precision": "bf16", "epochs": 2, "max_steps_per_epoch": 5, "eval_batch_size": 8,
    "num_workers": 1, "threads": 2, "log_every": 5, "skip_nonfinite": True, "batching": "random",
    "teacher_outputs": "live", "checkpoint": {"every_steps": 5, "keep": True}, "fsdp": {"teacher": "shard"},
    "guards": {"teacher_margin": 0.1, "allow_weak_teacher": True}, "results_dir": "elsewhere",
    "cache_dir": "/tmp/another-cache", "dry_run": True, "dry_run_list": True, "plan_seeds": True, "prepare_only": True,
    "finetune_grid": {"tasks": ["rte"], "lrs": [1e-5], "batch_sizes": [16]}, "pack": "off", "pack_size": 3,
    "pack_file": "/tmp/pack.json", "tune_trial": 1, "tune_study": 2, "tune_journal": "tuning/x.journal",
    "tune_chosen": "/tmp/chosen.json",
    "tune": {"trials": 2, "space": {"objective.temperature": {"low": 1, "high": 8}}, "holdout": 0.1, "sampler": "tpe",
             "metric": None, "parallel": 1, "seed": 0},
}


def test_a_top_level_setting_changes_the_digest_exactly_when_its_field_is_hashed() -> None:
    """Each top-level setting set to another value: the job's digest changes where the field is hashed and stays where
    its metadata says INVARIANT or nondeterministic (where a job runs, how it is logged or scheduled, not what it computes)."""
    assert set(OTHER_VALUES) == {f.name for f in dataclasses.fields(RunSettings)}  # a new key is classified here
    base = plain_config(compose_cfg(BASE))
    digest = identify_plain(copy.deepcopy(base)).digest
    changed, kept = set(), set()
    for key, value in OTHER_VALUES.items():
        config = copy.deepcopy(base)
        config[key] = value
        with planned(2) if key == "fsdp" else nullcontext():  # (fsdp.teacher=shard: a job of several processes)
            (changed if identify_plain(config).digest != digest else kept).add(key)
    not_hashed = {f.name for f in dataclasses.fields(RunSettings) if not is_hashed(f.metadata)}
    assert kept == not_hashed
    assert {"device", "threads", "results_dir", "cache_dir", "teacher_outputs", "pack", "tune_chosen", "tune_journal"} <= kept
    assert {"init", "map", "seed", "seeds", "precision", "epochs", "batching", "tune", "tune_trial", "tune_study"} <= changed


@dataclass
class _Inner:
    rate: float = 0.5
    added: int = field(default=3, metadata=UNHASHED_AT_DEFAULT)


@dataclass
class _Part:
    name: str
    rate: float = 1.0
    where: str = field(default="here", metadata=INVARIANT)
    added: int | None = field(default=None, metadata=UNHASHED_AT_DEFAULT)
    order: str = field(default="length", metadata=unhashed_at("random"))
    inner: _Inner = field(default_factory=_Inner)
    rates: list[float] = field(default_factory=lambda: [0.5])


def test_hashed_form_follows_each_fields_metadata_and_keeps_numbers_as_written() -> None:
    part = parse(_Part, {"name": "p", "rate": 2, "where": "there", "order": "random", "inner": {"rate": 1, "added": 4},
                         "rates": [0, 0.5]}, "part")
    assert part.rate == 2.0 and isinstance(part.rate, float)  # typed as float
    # `where` never, `added` at its default and `order` at random left out; 2 and [0, 0.5] as written (an integer
    # for a float field): the JSON a config hash was taken of
    assert hashed_form(part) == {"name": "p", "rate": 2, "inner": {"rate": 1, "added": 4}, "rates": [0, 0.5]}
    assert repr(hashed_form(part)["rate"]) == "2" and repr(hashed_form(part, written_numbers=False)["rate"]) == "2.0"
    part.rate = 3.0  # changed after parsing: its value, not the number as written
    assert repr(hashed_form(part)["rate"]) == "3.0"
    assert hashed_form(parse(_Part, {"name": "p", "added": 1, "order": "length"}, "part")) == {
        "name": "p", "rate": 1.0, "added": 1, "order": "length", "inner": {"rate": 0.5}, "rates": [0.5]}


def test_the_hash_and_the_teacher_keys_are_the_typed_configs() -> None:
    """The config as composed (kept for the ignored-settings check and the record) plays no part in them."""
    job = parse_plain(plain_config(compose_cfg([*BASE, "teacher=tiny_ensemble", "task.augment=tinybert"])))
    blind = dataclasses.replace(job, composed=MappingProxyType({}))
    assert hashed_config(blind) == hashed_config(job)
    (whole, members), (whole_blind, members_blind) = teacher_specs(job), teacher_specs(blind)
    assert len(members) == 3 and whole_blind.key == whole.key
    assert [m.key for m in members_blind] == [m.key for m in members]


# Digests and teacher cache directories as the code before typed hashing computed them (from the config as
# composed), for configs where the typed form differs from the composed one: an integer for a float field, an
# augmentation named, an ensemble's members, a vLLM engine that does work, a sampling seed, a tuning budget. A
# job's hash names its result directory and a teacher's key its cache entry: these may never change, but for the
# one correction of the declared kinds (config/parse.py): the toy data's size and seed (task.recipe.num_train, num_dev,
# seed), which the teacher is fine-tuned on, entered the toy teachers' keys, and the student's optimizer left them. Each is the
# sha256 of settings' JSON (config values, no computed float), so the same on any machine.
TOY = ("procedure=task_specific", "task=toy", "teacher=tiny", "objective=att_kl", "init=3")
DECODER = ("procedure=causal_lm", "teacher=tiny_llama", "objective=fkl", "procedure.data=instructions")
PINNED = {
    (*TOY, "optimizer.max_grad_norm=1"): ("c89585991c5f8345d7552163d334a00378130f2bc0a442d9fc983e5897075d46",
                                          "toy/tiny-f4e86d600c83"),
    (*TOY, "optimizer.max_grad_norm=1.0"): ("f694de4ab09b996c142fb0f4d29c6d7255e5803528b21a5157cb400a35704552",
                                            "toy/tiny-f4e86d600c83"),
    (*TOY, "task.augment=tinybert"): ("bf067efba7b1f212e84caf5b2b90e51e833dd06df24db02daa5712769a970e7d",
                                      "toy/tiny-f4e86d600c83"),
    (*TOY, "tune.trials=8", "tune.parallel=2", "+tune.space={objective.temperature:{low:1,high:8}}"):
        ("7f994bab06d5901bbf24b081ecebe77e575556d70ddefdd5042cf917effa8c45", "toy/tiny-f4e86d600c83"),
    ("procedure=task_specific", "task=toy", "teacher=tiny_ensemble", "objective=vanilla_kd"):
        ("143faf08ccbb83b8c762b9f942b0a3c39e662015f84686475429555a75e20648", "toy/tiny_ensemble-5bc78dcee896"),
    ("procedure=fastbert", "task=toy", "teacher=tiny", "procedure.speeds=[0,0.5]"):
        ("6ee0470b3f4f2463f711334dac45192ef4a384f3dea0207543e486a85ed4f4f5", "toy/tiny-f4e86d600c83"),
    (*DECODER, "teacher.engine=vllm", "procedure.seq_kd=true"):
        ("11cc0fe2127ff924b546da59990fe34d84a9229bd6eff708d539dcc3a74e5f68",
         "causal_toy_instructions/tiny_llama-1a9897d04d2b"),
    (*DECODER, "procedure.on_policy=1"):
        ("a18aa80e6561ca13d05af63aa60883cd3ae32ccf314bcfb47b67e21d1b152068",
         "causal_toy_instructions/tiny_llama-1a9897d04d2b"),
    ("procedure=task_agnostic", "corpus=toy", "teacher=tiny_mlm", "objective=att_mse", "seeds.sampling=3"):
        ("395e14bdc730e069b9957f0a6d3041b5cadc5b69262c81c9d8821d49739d7ea2", "pretrain_toy/tiny_mlm-161407122106"),
}


@pytest.mark.parametrize("overrides", list(PINNED), ids=lambda ov: " ".join(ov[2:]))
def test_the_digest_and_the_teacher_key_of_before_are_kept(overrides: tuple[str, ...]) -> None:
    ident = identify(compose_cfg(list(overrides)))
    digest, teacher_dir = PINNED[overrides]
    assert ident.digest == digest
    assert ident.teacher.directory("/c", ident.task).as_posix() == f"/c/teachers/{teacher_dir}"


def test_a_job_with_lm_eval_tasks_is_hashed_with_how_its_responses_are_drawn() -> None:
    """The stage's draws stopped depending on the eval batch size (issue 48): the jobs scored before are other jobs,
    so their records (batch-dependent) are not taken as this version's; a job without lm-eval tasks keeps its hash."""
    from distill_sweep.procedures.causal_lm_settings import LM_EVAL_DRAWS

    base = ["procedure=causal_lm", "teacher=tiny_llama", "objective=fkl", "procedure.data=instructions"]
    with_tasks = parse_plain(plain_config(compose_cfg([*base, "procedure.lm_eval.tasks=[toy_instruct_rouge]"])))
    assert hashed_config(with_tasks)["procedure"]["lm_eval"]["draws"] == LM_EVAL_DRAWS
    assert "lm_eval" not in hashed_config(parse_plain(plain_config(compose_cfg(base))))["procedure"]
