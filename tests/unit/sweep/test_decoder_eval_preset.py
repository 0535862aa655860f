"""experiment=decoder_eval_demo composes to its grid, without running it: fkl/rkl/gjsd x the data sources (fixed,
on_policy 1, seq_kd) x 3 seeds, every job a distinct one scored by the lm-eval stage on both shipped tasks with
evaluation-sampling seeds."""

from __future__ import annotations

from collections import Counter

import pytest
from hydra import compose, initialize_config_dir

from distill_sweep.config.space import CONF_DIR, VERSION_BASE
from distill_sweep.job.identity import identify
from distill_sweep.sweep.compose import JobComposer, expand


@pytest.mark.slow  # composes 27 jobs (seconds)
def test_decoder_eval_demo_is_objective_x_data_source_x_seed_with_sampled_lm_eval():
    base = ["experiment=decoder_eval_demo"]
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        cfg = compose("config", overrides=base, return_hydra_config=True)
        params = [f"{k}={v}" for k, v in cfg.hydra.sweeper.params.items()]
        composer = JobComposer(lambda groups: compose("config", overrides=list(groups), return_hydra_config=True))
        idents = [identify(composer([*base, *job])) for job in expand(params)]
    assert len(idents) == 3 * 3 * 3 and len({i.digest for i in idents}) == 27
    sources = Counter((i.procedure_settings.on_policy, i.procedure_settings.seq_kd) for i in idents)
    assert sources == {(0.0, False): 9, (1.0, False): 9, (0.0, True): 9}
    assert Counter(i.objective_name for i in idents) == {"fkl": 9, "rkl": 9, "gjsd": 9}
    assert Counter(i.seed for i in idents) == {1: 9, 2: 9, 3: 9}
    for ident in idents:
        settings = ident.procedure_settings
        assert settings.data == "instructions" and ident.settings.teacher.name == "tiny_llama"
        assert ident.settings.run.threads == 1
        assert settings.lm_eval.tasks == ["toy_instruct_rouge", "toy_instruct_choice"]
        assert settings.lm_eval.sampling_seeds == [1, 2, 3, 4, 5]
        assert settings.lm_eval.gen_kwargs() == {"do_sample": True, "temperature": 1.0, "top_p": 1.0}
