"""procedure.teacher_logits (full | top_k | top_k_tail | sampled) in a causal_lm job: the hashes of jobs from before
the key, the refusals of what an estimator cannot serve, and a job of each sparse estimator run from its store."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import CAUSAL_BASE as BASE
from helpers import CAUSAL_BASE_HASH, compose_cfg
from helpers import LOGITS_FAST as FAST

from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare

# config hashes of these jobs (sha256 of the hashed config's JSON: settings, no float results, so the same on any
# machine), computed by the code before procedure.teacher_logits existed (commit 8259e3c)
EARLIER = [
    ([], CAUSAL_BASE_HASH),
    (["procedure.teacher_top_k=4", "objective=fkl"], "508c0d7a9335830ca5d8566cf40f62e16c3f94022fc31706b113b86573f9bfad"),
    (["procedure.data=instructions", "objective=gjsd", "procedure.teacher_top_k=8"],
     "d183ef5761edec8556296f6c2b6df5145d2558debc9b30621234faed9d4ee386"),
]


@pytest.mark.parametrize("overrides,digest", EARLIER)
def test_earlier_jobs_keep_their_hash_and_naming_their_estimator_is_the_same_job(overrides, digest, tmp_path: Path):
    def hashed(extra: list[str]) -> str:
        return identify(compose_cfg([*BASE, f"results_dir={tmp_path}", *overrides, *extra])).digest

    assert hashed([]) == digest
    same = "procedure.teacher_logits=" + ("top_k" if any("teacher_top_k" in o for o in overrides) else "full")
    assert hashed([same]) == digest
    if any("teacher_top_k" in o for o in overrides):  # another estimator is another job
        assert hashed(["procedure.teacher_logits=top_k_tail"]) != digest
    else:  # the hidden store is another job than the live teacher's (the same numbers, another record)
        assert hashed(["procedure.teacher_logits=hidden"]) != digest


@pytest.mark.parametrize("overrides,message", [
    (["procedure.teacher_logits=sampled"], r"teacher_logits=sampled stores k tokens per position: set "
                                           r"procedure.teacher_top_k"),
    (["procedure.teacher_logits=full", "procedure.teacher_top_k=4"], "teacher_logits=full reads all the teacher's "
                                                                     "logits live: leave procedure.teacher_top_k null"),
    (["objective=rkl", "procedure.teacher_logits=sampled", "procedure.teacher_top_k=4"],
     "estimates forward KL without bias, and only it: term rkl is not linear"),
    (["objective=fkl", "objective.terms.fkl.temperature=2.0", "procedure.teacher_logits=top_k_tail",
      "procedure.teacher_top_k=4"], r"teacher_logits=top_k_tail stores the teacher's probabilities at T = 1 .*"
                                    r"term fkl has temperature 2.0"),
    (["objective=gjsd", "procedure.teacher_logits=top_k_full", "procedure.teacher_top_k=4"],
     "teacher_logits=top_k_full compares the teacher's k tokens with the student's full softmax, a forward KL: term "
     "gjsd is not fkl"),
    (["objective=fkl", "procedure.teacher_top_k=1"], r"procedure.teacher_logits=top_k with procedure.teacher_top_k=1 "
                                                     r"trains nothing .* or procedure.teacher_logits=top_k_full, "
                                                     r"top_k_tail or sampled"),
    (["objective=fkl", "procedure.teacher_logits=hidden", "procedure.teacher_top_k=4"],
     "teacher_logits=hidden stores the teacher's whole last hidden state per position .* leave "
     "procedure.teacher_top_k null"),
    (["objective=fkl_hid_seq", "procedure.teacher_logits=hidden"],
     "teacher_logits=hidden stores the teacher's outputs so that it need not run, but term hid_seq reads its hidden "
     "states"),
    (["objective=gjsd", "procedure.teacher_logits=top_k", "procedure.teacher_top_k=1"], r"teacher_top_k=1 trains "
                                                                                        r"nothing"),
])
def test_what_an_estimator_cannot_serve_is_refused_before_any_work(overrides, message, tmp_path: Path):
    cfg = compose_cfg([*FAST, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c", *overrides])
    with pytest.raises(ConfigError, match=message):
        prepare(cfg)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_a_teacher_whose_logits_are_scaled_or_capped_after_its_head_is_refused_for_a_hidden_store() -> None:
    """The families here apply nothing after the head; a config that does (Gemma 2's soft-capping, Cohere's
    logit_scale) would be read wrong from stored hidden states: refused in one line, a plain head passes."""
    from types import SimpleNamespace

    from distill_sweep.procedures.causal_lm_checks import check_plain_head

    check_plain_head(SimpleNamespace(final_logit_softcapping=None, logit_scale=1.0))
    for name, value in (("final_logit_softcapping", 30.0), ("logit_scale", 0.0625), ("logits_scaling", 8.0)):
        with pytest.raises(ConfigError, match=f"also has {name}={value} after its head"):
            check_plain_head(SimpleNamespace(**{name: value}))
