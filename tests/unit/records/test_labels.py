"""records/labels.py: one label per job, naming every seed source that makes it another job, and one name for the
jobs that distil nothing."""

from __future__ import annotations

from distill_sweep.config.seeds import SeedSettings, job_seeds
from distill_sweep.records.labels import NO_KD, distillation, job_label, record_label, recorded_seeds


def test_a_label_names_the_seed_sources_that_make_another_job() -> None:
    plain = job_seeds(1, None)
    order = job_seeds(1, SeedSettings(data_order=2))
    same_order = job_seeds(1, SeedSettings(data_order=1))  # the master seed's own order: the same job (and hash)
    own_init = job_seeds(1, SeedSettings(init=1))  # two torch streams: another job, though the value is the seed's
    labels = [job_label("toy", "task_specific", "vanilla_kd", "init-1", 1, s)
              for s in (plain, order, same_order, own_init)]
    assert labels == ["toy/vanilla_kd init-1 seed 1", "toy/vanilla_kd init-1 seed 1 (seeds.data_order=2)",
                      "toy/vanilla_kd init-1 seed 1", "toy/vanilla_kd init-1 seed 1 (seeds.init=1)"]
    both = job_seeds(3, SeedSettings(data_order=2, dropout=7))
    assert job_label("rte", "task_specific", "att_kl", "init-2", 3, both).endswith(
        "seed 3 (seeds.data_order=2, seeds.dropout=7)")


def test_one_name_for_no_kd_and_the_others_by_what_they_distil_with() -> None:
    assert distillation("finetune", "none") == distillation("finetune", None) == NO_KD == "no KD (fine-tuning)"
    assert distillation("finetune", "none", "distilled") == "fine-tuning of a distilled student"
    assert distillation("fastbert", "none") == "fastbert" and distillation("ptp", "vanilla_kd") == "vanilla_kd"


def test_a_records_label_is_the_jobs() -> None:
    seeds = job_seeds(1, SeedSettings(data_order=2))
    record = {"task": "toy", "procedure": "task_specific", "objective": "vanilla_kd", "seed": 1,
              "init": {"spec": "[1, 5, 9]"}, "seeds": seeds.to_dict()}
    assert record_label(record) == "toy/vanilla_kd init-1-5-9 seed 1 (seeds.data_order=2)"
    assert recorded_seeds(1, seeds.to_dict()) == seeds
    # a record from before the seeds block: every source is the master seed
    assert record_label({**record, "seeds": None}) == "toy/vanilla_kd init-1-5-9 seed 1"
    assert record_label({"task": "toy", "procedure": "finetune", "objective": "none", "seed": "x"}) == \
        "toy/no KD (fine-tuning) init-none seed 'x'"
