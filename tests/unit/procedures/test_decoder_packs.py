"""Decoder packs (procedure=causal_lm, pack=auto): which decoder jobs share batches, the dry run's line, and a
pack whose members (fkl, rkl with CE, on-policy gjsd; and sparse top-k members) are each bit-identical to the job
alone, with one teacher forward per data batch between the live members."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import DECODER_PACK_BASE as BASE
from helpers import DECODER_PACK_BATCH as BATCH
from helpers import DECODER_PACK_EPOCHS as EPOCHS
from helpers import DECODER_PACK_LIVE as LIVE
from helpers import DECODER_PACK_SPARSE as SPARSE
from helpers import DECODER_PACK_STEPS as STEPS
from helpers import compose_cfg

from distill_sweep.job.identity import identify
from distill_sweep.sweep.cost import pack_cost
from distill_sweep.sweep.packs import differing_settings, pack_key, plan_packs


def _job(*overrides: str) -> Any:
    return identify(compose_cfg([*BASE, *overrides]))


@pytest.mark.slow  # identifies dozens of decoder jobs through Hydra, seconds
def test_decoder_jobs_that_draw_the_same_batches_share_a_key_and_others_do_not() -> None:
    key = pack_key(_job("objective=fkl"))
    assert key is not None  # decoder jobs pack (they did not: task_specific only)
    # a member's own: its loss, optimiser, init, on-policy sampling
    for same in ("objective=gjsd", "objective=rkl", "init=2", "optimizer.lr=0.5", "procedure.lr=0.01",
                 "procedure.ce_weight=1", "procedure.on_policy=0.5", "procedure.generation.temperature=0.7",
                 "procedure.warmup_ratio=0.2", "results_dir=elsewhere"):
        assert pack_key(_job("objective=fkl", same)) == key, same
    # another teacher, other data, another batch order or size, another teacher-output mode: other batches or
    # another teacher's forward
    for other in ("teacher=tiny_gpt2", "procedure.teacher_steps=30", "procedure.teacher_lr=0.01", "seed=2",
                  "procedure.batch_size=4", "procedure.data=corpus", "procedure.instructions.num_examples=300",
                  "procedure.max_seq_length=48", "procedure.epochs=3", "procedure.max_steps=5",
                  "procedure.teacher_top_k=4", "procedure.seq_kd=true", "precision=bf16", "max_steps_per_epoch=2"):
        assert pack_key(_job("objective=fkl", other)) not in (key, None), other
    # with seq_kd the training responses are the teacher's generations: their settings make other batches
    seq_kd = pack_key(_job("objective=fkl", "procedure.seq_kd=true"))
    assert pack_key(_job("objective=rkl", "procedure.seq_kd=true")) == seq_kd
    assert pack_key(_job("objective=fkl", "procedure.seq_kd=true", "procedure.generation.max_new_tokens=8")) \
        not in (seq_kd, None)
    assert pack_key(_job("objective=fkl", "pack=off")) is None
    assert pack_key(_job("objective=fkl"), processes_per_job=2) is None  # data parallel: one job per process


def test_a_decoder_grid_is_cut_into_packs_and_the_dry_run_counts_its_teacher_forwards() -> None:
    jobs = [_job(*m) for m in LIVE] + [_job("objective=fkl", "seed=2")] + [_job(*m) for m in SPARSE]
    assert plan_packs(jobs) == [[0, 1, 2], [3], [4, 5]]
    # live teacher forwards in sequences: EPOCHS x STEPS x BATCH per job alone; in the pack of three, the data's
    # batches once, plus the on-policy member's own samples (expected: on_policy=0.8 of its steps); none for the
    # sparse members (their store)
    passes = EPOCHS * STEPS * BATCH
    line = pack_cost(jobs, plan_packs(jobs))
    assert f"{4 * passes:.3g} one process per job" in line, line
    assert f"{passes + 0.8 * passes + passes:.3g} sample-passes in packs" in line, line
    assert "6 jobs in 3 process(es), 2 pack(s) of 3, 2 jobs" in line, line


def test_members_of_other_objectives_are_not_labelled_by_each_others_term_settings() -> None:
    """The labels of an fkl/rkl/gjsd pack named every term's settings (objective.terms.fkl.temperature=None ...),
    since each objective lists only its own terms; those are shown only between members of one objective."""
    jobs = [_job("objective=fkl"), _job("objective=rkl", "procedure.ce_weight=0.5"),
            _job("objective=fkl", "objective.terms.fkl.temperature=2")]
    assert differing_settings([job.composed for job in jobs]) == [
        "objective.terms.fkl.temperature=1.0 procedure.ce_weight=0.0",
        "objective.terms.fkl.temperature=None procedure.ce_weight=0.5",
        "objective.terms.fkl.temperature=2 procedure.ce_weight=0.0"]
    assert differing_settings([jobs[0].composed, jobs[1].composed]) == ["procedure.ce_weight=0.0",
                                                                        "procedure.ce_weight=0.5"]
