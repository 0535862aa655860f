"""Packs: which jobs share batches (sweep/packs.py's rule), how a grid is cut into packs, the dry run's line, and a
sweep that launches packs (one process each), with a failing member and a partial re-run."""

from __future__ import annotations

import pytest
from helpers import PACK_BASE as BASE
from helpers import compose_cfg

from distill_sweep.job.identity import identify
from distill_sweep.sweep.cost import pack_cost
from distill_sweep.sweep.packs import pack_key, plan_packs


def _job(*overrides: str):
    return identify(compose_cfg([*BASE, *overrides]))


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_jobs_that_draw_the_same_batches_share_a_key_and_others_do_not() -> None:
    key = pack_key(_job("objective=hid_seq", "init=1"))
    assert key is not None
    # what a member trains, and where its record goes, is its own
    for same in ("objective=att_kl", "init=3", "objective=vanilla_kd", "optimizer.lr=0.5", "map=skip",
                 "results_dir=elsewhere", "checkpoint.every_steps=3"):
        assert pack_key(_job("objective=hid_seq", "init=1", same)) == key, same
    assert pack_key(_job("objective=hid_seq", "logger=wandb")) is not None  # one wandb run per member
    # anything that changes the batches, the teacher or the process
    for other in ("seed=2", "optimizer.batch_size=16", "epochs=2", "batching=random", "max_steps_per_epoch=3",
                  "precision=bf16", "task.max_train_samples=100", "teacher.finetune.epochs=2", "threads=2",
                  "teacher_outputs=live", "pack_size=3"):
        assert pack_key(_job("objective=hid_seq", "init=1", other)) not in (key, None), other
    # never packed
    for alone in ("pack=off", "procedure=finetune", "+prepare_only=true"):
        assert pack_key(_job("objective=hid_seq", alone)) is None, alone
    assert pack_key(_job("objective=hid_seq"), processes_per_job=2) is None  # data parallel


def test_packs_put_the_same_stages_next_to_each_other_and_hold_at_most_pack_size() -> None:
    jobs = [_job(f"objective={o}", f"init={i}", "pack_size=3")
            for o in ("vanilla_kd", "hid_seq", "att_kl") for i in (1, 2)]  # vanilla_kd: no intermediate stage
    jobs.append(_job("objective=hid_seq", "seed=2", "pack_size=3"))  # other batches
    jobs.append(_job("objective=hid_seq", "pack=off"))
    assert plan_packs(jobs) == [[0, 1, 2], [3, 4, 5], [6], [7]]
    assert plan_packs(jobs, processes_per_job=2) == [[i] for i in range(8)]
    # the teacher's forwards: hid_seq and att_kl share their intermediate stages, in packs of at most 3
    line = pack_cost(jobs, plan_packs(jobs))
    steps = 256  # FAST: 256 examples, one epoch
    assert f"{6 * steps:.3g} one process per job" in line  # hid_seq and att_kl x 2, the seed-2 and pack=off ones
    assert f"{4 * steps:.3g} sample-passes in packs" in line  # [0,1,2] (its hid_seq), [3,4,5], [6], [7]


def test_members_that_differ_only_by_a_value_are_told_apart() -> None:
    """A pack's log labels its members by objective, init and seed; members equal in those (an lr grid) were
    named alike, so a failing one could not be told from the others."""
    from distill_sweep.sweep.packs import differing_settings

    base = {"objective": {"name": "vanilla_kd", "alpha": 0.5}, "init": 1, "seed": 1,
            "optimizer": {"lr": None, "batch_size": 32}, "task": {"name": "toy"}}
    members = [base, {**base, "optimizer": {"lr": 0.001, "batch_size": 32}},
               {**base, "objective": {"name": "att_mse", "alpha": 0.5}, "seed": 2}]
    # objective, init and seed are the label's own: only the lr is added, to every member
    assert differing_settings(members) == ["optimizer.lr=None", "optimizer.lr=0.001", "optimizer.lr=None"]
    assert differing_settings([base, {**base, "seed": 2}]) == ["", ""]
