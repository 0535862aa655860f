"""`seeds: {init, data_order, dropout, sampling}`: one seed per source of variance, each null = the master `seed`.

Each sub-seed changes its own source and leaves the others bit-identical (the student's new weights, the torch
stream the training draws its dropout masks from, the order of the batches), the default keeps every earlier config
hash and the numbers of the one stream seeded by `seed`, and every record states the four seeds it used."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import CAUSAL_BASE, CAUSAL_BASE_HASH, FAST, compose_cfg

from distill_sweep.config.seeds import SeedSettings, job_seeds
from distill_sweep.errors import ConfigError
from distill_sweep.job.identity import identify

# a causal_lm job and its config hash from before the `seeds` block (helpers: a settings identity, not floats)
CAUSAL, CAUSAL_HASH = CAUSAL_BASE, CAUSAL_BASE_HASH


def _digest(tmp_path: Path, *overrides: str) -> str:
    return identify(compose_cfg([*CAUSAL, f"results_dir={tmp_path}", *overrides])).digest


def test_the_default_block_keeps_the_hash_of_before_it_and_a_set_source_makes_another_job(tmp_path: Path):
    assert _digest(tmp_path) == CAUSAL_HASH
    assert _digest(tmp_path, "seeds.init=null", "seeds.data_order=null") == CAUSAL_HASH
    # a data order seed equal to the master seed draws the same batches: the same job (seed=1,2,3 seeds.data_order=1)
    assert _digest(tmp_path, "seeds.data_order=1") == CAUSAL_HASH
    assert _digest(tmp_path, "seeds.data_order=2") != CAUSAL_HASH
    # init or dropout set separates the torch stream in two: another job even at the master's value
    assert _digest(tmp_path, "seeds.init=1") != CAUSAL_HASH
    assert _digest(tmp_path, "seeds.dropout=3") not in (CAUSAL_HASH, _digest(tmp_path, "seeds.init=3"))
    # this job draws no samples from its student: the sampling seed does not make another job
    assert _digest(tmp_path, "seeds.sampling=5") == CAUSAL_HASH
    assert _digest(tmp_path, "procedure.data=instructions", "procedure.on_policy=0.5", "seeds.sampling=5") != \
        _digest(tmp_path, "procedure.data=instructions", "procedure.on_policy=0.5")


@pytest.mark.parametrize("override,message", [
    ("seeds.init=-1", r"seeds.init=-1: must be >= 0"),
    ("seeds.dropout=4294967296", r"seeds.dropout=4294967296: must be < 4294967296"),
    ("seeds.data_order=1.5", r"seeds.data_order=1.5: expected an integer or null"),
    ("+seeds.teacher=1", r"seeds.teacher: unknown setting \(known: init, data_order, dropout, sampling\)"),
])
def test_a_bad_seed_is_one_line_before_any_work(override: str, message: str, tmp_path: Path):
    with pytest.raises(ConfigError, match=message):
        identify(compose_cfg([*FAST, f"results_dir={tmp_path}", override]))


def test_a_job_on_its_own_that_sets_a_sampling_seed_it_never_draws_from_is_refused(tmp_path: Path):
    ident = identify(compose_cfg([*FAST, f"results_dir={tmp_path}", "seeds.sampling=3"]))
    with pytest.raises(ConfigError, match=r"seeds.sampling=3 is ignored: procedure=task_specific"):
        ident.check_used()


def test_each_source_is_the_master_seed_unless_set():
    assert job_seeds(4, SeedSettings()).to_dict() == {"init": 4, "data_order": 4, "dropout": 4, "sampling": 4,
                                                      "own": []}
    seeds = job_seeds(4, SeedSettings(data_order=1, dropout=9))
    assert (seeds.init, seeds.data_order, seeds.dropout, seeds.sampling) == (4, 1, 9, 4)
    assert seeds.own == ("data_order", "dropout") and seeds.separate_streams
    assert not job_seeds(4, SeedSettings(data_order=1, sampling=2)).separate_streams
