"""Which jobs of a grid share a pack, worked from sweep/packs.py's rule (same data, teacher, order seed, batching,
batch size, teacher-output mode; objective, init, learning rate, loss weights and on-policy sampling each member's
own), and that the rule reads the typed job, not the config as composed."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

import pytest
from helpers import DECODER_PACK_BASE, PACK_BASE
from hydra import compose, initialize_config_dir

from distill_sweep.config.space import CONF_DIR, VERSION_BASE
from distill_sweep.job.identity import JobIdentity, identify_plain
from distill_sweep.sweep.compose import JobComposer
from distill_sweep.sweep.packs import pack_key, plan_packs

BIG = "pack_size=100"  # no group is cut: plan_packs' packs are the groups
ENCODER = [*PACK_BASE, BIG]
DECODER = [*[o for o in DECODER_PACK_BASE if not o.startswith("procedure.data=")], BIG]


def _identify(jobs: Sequence[Sequence[str]]) -> list[JobIdentity]:
    """Each override list identified as a sweep does (composed once per group set, then typed)."""
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        composer = JobComposer(lambda groups: compose("config", overrides=list(groups), return_hydra_config=True))
        return [identify_plain(composer.plain(list(job))) for job in jobs]


def _grid(base: list[str], axes: dict[str, Sequence[Any]], keep: Callable[[dict[str, Any]], bool] = lambda v: True
          ) -> list[dict[str, Any]]:
    """The cross product of `axes` (key -> values) as one {key: value} per job, less those `keep` refuses."""
    return [dict(zip(axes, values, strict=True)) | {"_base": base}
            for values in itertools.product(*axes.values()) if keep(dict(zip(axes, values, strict=True)))]


def _overrides(job: dict[str, Any]) -> list[str]:
    return [*job["_base"], *(f"{k}={'null' if v is None else v}" for k, v in job.items() if k != "_base")]


# the settings each member has of its own (docstring of sweep/packs.py): they never split a pack
MEMBERS_OWN = {"objective", "init", "optimizer.lr", "procedure.lr", "procedure.ce_weight", "procedure.on_policy",
               "procedure.warmup_ratio"}


def _shares_with(job: dict[str, Any]) -> tuple[Any, ...]:
    """What decides a job's pack by the rule, from the values the test set: the data (encoder task or decoder
    corpus / instructions), the batches' order seed, the batching and batch size, the teacher-output mode; and for
    seq_kd, whose training responses are the teacher's, the generation settings."""
    shared = {k: v for k, v in job.items() if k not in MEMBERS_OWN and k != "_base"}
    if not job.get("procedure.seq_kd", False):  # generation: the member's own sampling, unless seq_kd
        shared = {k: v for k, v in shared.items() if not k.startswith("procedure.generation.")}
    return (tuple(job["_base"]), tuple(sorted(shared.items())))


ENCODER_JOBS = _grid(ENCODER, {"objective": ["vanilla_kd", "hid_seq", "att_kl"], "init": [1, 3],
                               "optimizer.lr": [1e-3, 1e-4], "seed": [1, 2], "optimizer.batch_size": [16, 32],
                               "task.max_train_samples": [None, 100]})
CORPUS_JOBS = _grid([*DECODER, "procedure.data=corpus"],
                    {"objective": ["fkl", "rkl"], "procedure.lr": [1e-3, 1e-2], "procedure.batch_size": [8, 16],
                     "corpus.num_documents": [100, 300], "procedure.teacher_top_k": [None, 4]})
INSTRUCTION_JOBS = _grid([*DECODER, "procedure.data=instructions"],
                         {"objective": ["fkl", "rkl"], "procedure.on_policy": [0.0, 0.5],
                          "procedure.seq_kd": [False, True], "procedure.teacher_top_k": [None, 4],
                          "procedure.generation.max_new_tokens": [3, 4], "procedure.ce_weight": [0.0, 0.5]},
                         # on-policy members need the live teacher; seq_kd's generated responses are not sampled
                         keep=lambda v: not (v["procedure.on_policy"] and (v["procedure.teacher_top_k"]
                                                                           or v["procedure.seq_kd"])))


@pytest.mark.parametrize(("jobs", "groups"), [(ENCODER_JOBS, 8), (CORPUS_JOBS, 8), (INSTRUCTION_JOBS, 6),
                                              (ENCODER_JOBS + CORPUS_JOBS + INSTRUCTION_JOBS, 22)],
                         ids=["encoder", "decoder-corpus", "decoder-instructions", "all"])
def test_a_grid_is_packed_by_the_rule(jobs: list[dict[str, Any]], groups: int) -> None:
    """Encoder jobs: 2 seeds x 2 batch sizes x 2 training sets, each a pack of 3 objectives x 2 inits x 2 lrs.
    Corpus jobs: 2 batch sizes x 2 corpora x 2 teacher-output modes. Instruction jobs: the live teacher, top-k
    store, or seq_kd with 2 generation lengths x (live, top-k)."""
    idents = _identify([_overrides(job) for job in jobs])
    expected: dict[tuple[Any, ...], list[int]] = {}
    for i, job in enumerate(jobs):
        expected.setdefault(_shares_with(job), []).append(i)
    assert len(expected) == groups  # the count worked by hand in the docstring
    assert sorted(map(sorted, plan_packs(idents))) == sorted(expected.values())


def _without_composed(job: JobIdentity, composed: Any) -> JobIdentity:
    return dataclasses.replace(job, config=dataclasses.replace(job.config, composed=MappingProxyType(composed)))


def test_the_key_is_read_from_the_typed_job_not_the_config_as_composed() -> None:
    """A job whose composed dict is emptied, or is another job's, keeps its key: the key is the typed settings'."""
    instructions = [*DECODER, "procedure.data=instructions"]
    jobs = _identify([_overrides(ENCODER_JOBS[0]), _overrides(CORPUS_JOBS[0]), [*instructions, "objective=fkl"],
                      [*instructions, "objective=rkl", "procedure.seq_kd=true"]])
    assert len({pack_key(job) for job in jobs}) == 4
    for job, other in zip(jobs, jobs[1:] + jobs[:1], strict=True):
        assert pack_key(_without_composed(job, {})) == pack_key(job)
        assert pack_key(_without_composed(job, other.composed)) == pack_key(job)


def test_a_number_written_as_an_integer_packs_with_its_float() -> None:
    """`procedure.teacher_lr=1` and `=1.0` train the same teacher on the same batches: one pack (their config
    hashes differ, as the config wrote them)."""
    a, b = _identify([[*DECODER, "procedure.data=corpus", f"procedure.teacher_lr={lr}", f"objective={o}"]
                      for lr, o in (("1", "fkl"), ("1.0", "rkl"))])
    assert a.digest != b.digest
    assert pack_key(a) == pack_key(b) is not None
