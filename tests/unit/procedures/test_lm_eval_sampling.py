"""procedure.lm_eval.sampling_seeds (evaluation-sampling seeds: the generate-until tasks sampled once per seed on one
trained model): the refusals, the hashes (greedy keeps every hash), the per-example file with seeds (the per-seed scores
and rows, each seed's run alone and at any batch size: tests/integration/procedures/test_lm_eval_sampling_runs.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import CAUSAL_BASE, compose_cfg

from distill_sweep.errors import ConfigError
from distill_sweep.job.hashed import hashed_config
from distill_sweep.job.identity import identify
from distill_sweep.job.prepare import prepare
from distill_sweep.procedures.causal_lm_settings import LM_EVAL_DRAWS
from distill_sweep.records.hashing import digest
from distill_sweep.records.lm_eval_results import SAMPLES, TaskSamples, read_samples, write_samples
from distill_sweep.records.predictions import read_checked_npz

INSTRUCT = [*CAUSAL_BASE, "procedure.data=instructions", "procedure.teacher_steps=40", "procedure.epochs=1",
            "max_steps_per_epoch=3", "objective=fkl", "procedure.instructions.num_examples=96",
            "procedure.instructions.dev_examples=16"]
BOTH = "procedure.lm_eval.tasks=[toy_instruct_rouge,toy_instruct_choice]"
# the config hash of a decoder job with both shipped tasks, pinned before the sampling keys were added (sha256 of
# its settings' JSON, no float results: the same on any machine)
BOTH_HASH = "10ac8ae7450ea7c204a540c62891c7231594d2f2fd21df933f430f5b18af6b90"


def test_greedy_keeps_the_hash_and_each_seed_list_is_another_job(tmp_path: Path):
    """Greedy is the same job at any sampling setting left at its default; the hash of before, less the one mark that
    its responses are now drawn per request (`LM_EVAL_DRAWS`, job/hashed.py: the rows of a batch used to run past their
    end token, so scores depended on the eval batch size, greedy ones too)."""
    def hashed(*extra: str) -> str:
        job = identify(compose_cfg([*CAUSAL_BASE, f"results_dir={tmp_path}", BOTH, *extra])).config
        config = hashed_config(job)
        assert config["procedure"]["lm_eval"].pop("draws") == LM_EVAL_DRAWS
        return digest(config)

    assert hashed() == BOTH_HASH
    assert hashed("procedure.lm_eval.sampling_seeds=[]", "procedure.lm_eval.temperature=1.0") == BOTH_HASH
    seeded = {hashed("procedure.lm_eval.sampling_seeds=[1,2]"), hashed("procedure.lm_eval.sampling_seeds=[1,2,3]"),
              hashed("procedure.lm_eval.sampling_seeds=[1,2]", "procedure.lm_eval.top_p=0.9")}
    assert len(seeded) == 3 and BOTH_HASH not in seeded


@pytest.mark.parametrize("overrides, message", [
    ([BOTH, "procedure.lm_eval.sampling_seeds=[1,-1]"],
     r"procedure.lm_eval.sampling_seeds: -1 is not a seed \(an integer in \[0, 2\*\*32\)\)"),
    ([BOTH, "procedure.lm_eval.sampling_seeds=[3,1,3]"], r"procedure.lm_eval.sampling_seeds: 3 is given twice"),
    ([BOTH, "procedure.lm_eval.sampling_seeds=[1,x]"], r"procedure.lm_eval.sampling_seeds"),
    ([BOTH, "procedure.lm_eval.temperature=0.7"],
     r"procedure.lm_eval.temperature/top_p set the sampling .*sampling_seeds is empty \(greedy\)"),
    ([BOTH, "procedure.lm_eval.sampling_seeds=[1]", "procedure.lm_eval.top_p=0"], r"procedure.lm_eval.top_p=0"),
    (["procedure.lm_eval.sampling_seeds=[1,2]"], r"procedure.lm_eval.tasks is empty, so the lm-eval stage is off"),
    (["procedure.lm_eval.tasks=[toy_instruct_choice]", "procedure.lm_eval.sampling_seeds=[1,2]"],
     r"procedure.lm_eval.sampling_seeds samples the generate-until tasks, and none of procedure.lm_eval.tasks "
     r"generates: toy_instruct_choice \(multiple_choice\)"),
])
def test_bad_sampling_settings_are_refused_in_one_line_before_any_work(overrides, message, tmp_path: Path):
    cfg = compose_cfg([*INSTRUCT, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c", *overrides])
    with pytest.raises(ConfigError, match=message) as refused:
        prepare(cfg)
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_the_file_keeps_one_row_per_seed_and_a_greedy_file_its_layout(tmp_path: Path):
    greedy = TaskSamples("h", np.arange(3), {"acc": np.array([1.0, 0.0, 1.0])})
    sampled = TaskSamples("h2", np.arange(2), {"rouge_l": np.array([[0.5, 1.0], [0.0, 1.0], [0.25, 0.0]])}, [4, 9, 7])
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    write_samples(tmp_path / "a", {"c": greedy})
    write_samples(tmp_path / "b", {"c": greedy, "g": sampled})
    assert [read_checked_npz(tmp_path / d / SAMPLES, lambda m: None)[0]["version"] for d in "ab"] == [1, 2]
    got = read_samples(tmp_path / "b")
    assert got is not None and got["c"].seeds is None and got["g"].seeds == [4, 9, 7]
    assert np.array_equal(got["g"].metrics["rouge_l"], sampled.metrics["rouge_l"])
    # per document: the mean over the seeds, (0.5+0+0.25)/3 and (1+1+0)/3; a greedy task's own values
    assert np.allclose(got["g"].per_document("rouge_l"), [0.25, 2 / 3], atol=1e-12)
    assert list(got["c"].per_document("acc")) == [1.0, 0.0, 1.0]


def test_a_task_whose_data_file_is_missing_or_malformed_is_refused_before_any_training(tmp_path: Path):
    """The task's YAML parses and names a data file: a file that is not there, or not JSON lines, is one line at
    the job's check (the stage would only find it after training)."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    for name, data in (("gone", tmp_path / "no_such.jsonl"), ("broken", tmp_path / "bad.jsonl")):
        (tmp_path / "tasks" / f"{name}.yaml").write_text(
            f"task: my_{name}\ndataset_path: json\ndataset_kwargs: {{data_files: {{test: {data}}}}}\n"
            "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{prompt}}'\n"
            "doc_to_choice: '{{choices}}'\ndoc_to_target: '{{label}}'\nmetric_list: [{metric: acc}]\n")
    for name in ("gone", "broken"):
        cfg = compose_cfg([*INSTRUCT, f"results_dir={tmp_path}/r", f"cache_dir={tmp_path}/c",
                           f"procedure.lm_eval.tasks=[toy_instruct_rouge,my_{name}]",
                           f"procedure.lm_eval.include_path={tmp_path / 'tasks'}"])
        with pytest.raises(ConfigError, match=rf"procedure.lm_eval.tasks: 'my_{name}' \(.*{name}.yaml\) does not "
                                              r"load: \w+") as refused:
            prepare(cfg)
        assert "\n" not in str(refused.value) and not (tmp_path / "r").exists()
