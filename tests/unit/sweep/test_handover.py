"""What the sweeper hands to the jobs the in-process launcher runs (sweep/handover.py): each job's config, made when
the launcher asks for it, and its typed job, each taken once and only while its batch is launched."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

from distill_sweep.sweep import handover


def test_a_batchs_configs_are_made_on_demand_and_its_jobs_taken_once_while_it_launches() -> None:
    made: list[list[str]] = []

    def make(overrides: Sequence[str]) -> DictConfig:
        made.append(list(overrides))
        return OmegaConf.create({"overrides": list(overrides)})

    batch = [["seed=1"], ["seed=2", "+pack_file='p.json'"]]
    with handover.handed_over(batch, 3, make, ["job 3", ["member a", "member b"]]):
        assert made == []  # nothing made before the launcher asks
        assert handover.config_of(["seed=2", "+pack_file='p.json'"]).overrides[0] == "seed=2"
        assert made == [["seed=2", "+pack_file='p.json'"]]
        assert handover.config_of(["seed=2", "+pack_file='p.json'"]) is None  # once: a second ask composes
        assert handover.config_of(["seed=9"]) is None  # not of this batch
        assert handover.job_of(4) == ["member a", "member b"] and handover.job_of(4) is None
        assert handover.job_of(0) is None  # another batch's number
    # after the batch, nothing is left for a job launched later (e.g. again, after another process held it)
    assert handover.config_of(["seed=1"]) is None and handover.job_of(3) is None
    assert made == [["seed=2", "+pack_file='p.json'"]]


def test_a_job_the_sweeper_could_not_type_is_left_to_type_its_config() -> None:
    with handover.handed_over([["a=1"], ["a=2"]], 0, lambda ov: OmegaConf.create({}), [None, "job 1"]):
        assert handover.job_of(0) is None and handover.job_of(1) == "job 1"
