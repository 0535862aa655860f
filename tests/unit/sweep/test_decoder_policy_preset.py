"""experiment=decoder_policy_demo composes to its grid, without running it: the data sources (fixed, on_policy 0.5
and 1, seq_kd) x fkl/rkl/gjsd x 3 seeds, every job a distinct one on the toy instructions."""

from __future__ import annotations

from collections import Counter

import pytest
from hydra import compose, initialize_config_dir

from distill_sweep.config.space import CONF_DIR, VERSION_BASE
from distill_sweep.job.identity import identify
from distill_sweep.sweep.compose import JobComposer, expand


@pytest.mark.slow  # measured over 2 s: `make test-fast` leaves it out
def test_decoder_policy_demo_is_data_source_x_objective_x_seed():
    base = ["experiment=decoder_policy_demo"]
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        cfg = compose("config", overrides=base, return_hydra_config=True)
        params = [f"{k}={v}" for k, v in cfg.hydra.sweeper.params.items()]
        composer = JobComposer(lambda groups: compose("config", overrides=list(groups), return_hydra_config=True))
        idents = [identify(composer([*base, *job])) for job in expand(params)]
    assert len(idents) == 4 * 3 * 3 and len({i.digest for i in idents}) == 36
    sources = Counter((i.procedure_settings.on_policy, i.procedure_settings.seq_kd) for i in idents)
    assert sources == {(0.0, False): 9, (0.5, False): 9, (1.0, False): 9, (0.0, True): 9}
    assert Counter(i.objective_name for i in idents) == {"fkl": 12, "rkl": 12, "gjsd": 12}
    assert Counter(i.seed for i in idents) == {1: 12, 2: 12, 3: 12}
    for ident in idents:
        settings = ident.procedure_settings
        assert ident.procedure.name == "causal_lm" and settings.data == "instructions"
        assert settings.instructions.source == "toy" and ident.settings.teacher.name == "tiny_llama"
        assert ident.settings.run.threads == 1 and settings.generation.max_new_tokens == 4
    # the fixed jobs are the plain jobs: on_policy 0 and seq_kd false leave the hash as it was before the keys
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        plain = identify(compose("config", overrides=[*base, "objective=rkl", "seed=2"]))
    fixed = [i for i in idents if i.objective_name == "rkl" and i.seed == 2 and not i.procedure_settings.generates()]
    assert [i.digest for i in fixed] == [plain.digest]
