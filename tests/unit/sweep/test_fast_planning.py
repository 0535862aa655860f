"""Planning a grid fast gives the configs and config hashes that composing every job through Hydra gives.

The sweeper composes once per set of group choices, through Hydra's loader reading each config file once and
resuming merges from a shared prefix (sweep/loads.py), then sets each job's values in plain dicts
(sweep/plain_overrides.py) and identifies the job from them. Each test compares with the path that composes
the job whole through Hydra (`compose` with all its overrides) and types it with `identify`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from distill_sweep.config.space import CONF_DIR, VERSION_BASE
from distill_sweep.job.identity import identify, identify_plain
from distill_sweep.job.plain_config import plain_config
from distill_sweep.sweep import loads, plain_overrides
from distill_sweep.sweep.compose import JobComposer, expand
from distill_sweep.sweep.loads import SHARED, SweepComposes, shared_loads

# Config hashes of three Table 3 jobs as the planning before this change computed them (identify of the job
# composed whole): a job's hash names its result directory, so these may never change. A config hash is the sha256 of
# the settings' JSON (no float results), so it is the same on any machine.
TABLE3_HASHES = {
    ("task=rte", "objective=att_kl", "init=2", "seed=3"):
        "686c10e76d04f0b088d3238e1c8c185b8b7466477a5ad02705098cbbf4b05e9e",
    ("task=qqp", "objective=hid_cls_contrast", "init=1", "seed=1"):
        "5bf2deac7f59ebe88ce49ed7338e3c6e99ce886bb228118caac82ddead612828",
    ("task=cola", "objective=vanilla_kd", "init=3", "seed=4"):
        "464158c6748a83c2580c0d87a42715088dd444290cc05a783156c9f5af82a9c1",
}


def _typed(value: Any) -> str:
    """A plain config as text that tells 1 from 1.0 and True (dict equality does not)."""
    def tag(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: tag(x) for k, x in v.items()}
        if isinstance(v, list):
            return [tag(x) for x in v]
        return [type(v).__name__, v]
    return json.dumps(tag(value), sort_keys=True, default=repr)


def _sweep_composer() -> tuple[JobComposer, SweepComposes]:
    """A composer as a sweep's (inside initialize_config_dir): shared loads and merges."""
    loader, shared = GlobalHydra.instance().config_loader(), SweepComposes()

    def load(groups: Any) -> Any:
        with shared_loads(loader, shared):
            return compose("config", overrides=list(groups), return_hydra_config=True)

    return JobComposer(load), shared


ONLY_HYDRA_13 = pytest.mark.skipif(not SHARED, reason="the shared loads replace Hydra 1.3's loader parts only")


@ONLY_HYDRA_13
@pytest.mark.slow  # composes every sampled job whole, as the reference
def test_a_table3_sample_plans_to_the_configs_and_hashes_of_jobs_composed_whole(tmp_path: Any) -> None:
    extra = ["+dry_run=true", f"results_dir={tmp_path / 'r'}", "objective.temperature=2.0", "~task.subset_seed"]
    grid = expand(["experiment=paper_table3", "task=rte,qqp,cola", "objective=att_kl,hid_cls_contrast,vanilla_kd",
                   "init=1,2,3", "seed=1,3,4", *extra])
    jobs = grid[::5]  # every fifth of the 81: each task, objective, init and seed more than once
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        composer, shared = _sweep_composer()
        for overrides in jobs:
            ours = composer.plain(overrides)
            whole = compose("config", overrides=list(overrides))  # the job composed whole, by Hydra
            assert _typed(ours) == _typed(plain_config(whole)), overrides
            assert identify_plain(ours).digest == identify(whole).digest, overrides
        # every job took the plain path (none fell back to OmegaConf's), and composes shared files and merges
        assert None not in composer.bases.values() and len(composer.bases) == 9
        edits = [[o for o in composer.parse(ov) if o.key_or_group in ("init", "seed", "dry_run", "results_dir",
                                                                        "objective.temperature", "task.subset_seed")]
                 for ov in jobs]
        assert all(plain_overrides.apply(composer.bases[composer._composed(composer.parse(ov))], e) is not None
                   for ov, e in zip(jobs, edits, strict=True))
        assert shared.loads and shared.merges is not None and shared.merges.merged
        for choices, digest in TABLE3_HASHES.items():
            assert identify_plain(composer.plain(["experiment=paper_table3", *choices])).digest == digest


@ONLY_HYDRA_13
def test_composes_through_shared_loads_equal_hydras_own() -> None:
    sets = [["task=rte", "objective=att_kl"], ["task=rte", "objective=hid_seq"], ["task=toy", "objective=att_kl"],
            ["task=toy", "teacher=tiny", "objective=vanilla_kd", "student=fresh"], ["task=rte", "objective=att_kl"]]
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        loader, shared = GlobalHydra.instance().config_loader(), SweepComposes()
        repository, method = loader.repository, loader._compose_config_from_defaults_list
        for groups in sets:
            with shared_loads(loader, shared):
                ours = compose("config", overrides=groups, return_hydra_config=True)
            hydra = compose("config", overrides=groups, return_hydra_config=True)
            assert OmegaConf.to_container(ours, resolve=False) == OmegaConf.to_container(hydra, resolve=False)
            assert OmegaConf.is_struct(ours) and not ours._get_flag("no_deepcopy_set_nodes")
        # each file read once for all five; merges resumed from a kept prefix; the loader as it was after
        assert len(shared.loads) < 30 and shared.merges is not None and shared.merges.merged
        assert loader.repository is repository and loader._compose_config_from_defaults_list == method


BASE = {"seed": 1, "results_dir": "results", "cache_dir": "${oc.env:NO_SUCH_VARIABLE_HERE,/tmp}/cache",
        "task": {"name": "toy"}, "alias": "${task.name}", "data": {"n": 3, "labels": ["a", "b"]}, "objective": None}


@pytest.mark.parametrize(("overrides", "plain_path"), [
    (["seed=2", "results_dir=/tmp/r"], True),
    (["+a.b.c=1"], True),  # new keys on the way made
    (["seed.inner=5"], True),  # a value on the way becomes a mapping (OmegaConf.update's force_add)
    (["objective.alpha=0.5"], True),  # null on the way, too
    (["~data.n", "~nothing.here"], True),
    (["data.labels=[x,y,z]", "extra={k: 1, l: [true, null]}"], True),
    (["seed=1.0"], True),  # a float stays a float
    (["cache_dir=/elsewhere"], True),  # an interpolated value replaced whole
    (["task.name=other"], False),  # a key an interpolation reads: resolved per job
    (["task={name: other}"], False),
    (["cache_dir.x=1"], False),  # through an interpolated value
    (["seed=${data.n}"], False),  # an interpolation as the value
    (["seed='???'"], False),  # the missing-value marker
    (["data.labels.0=z"], False),  # a list's index
    (["~seed.inner"], False),  # a deletion under a value (OmegaConf's error, as before)
])
def test_value_overrides_in_plain_dicts_equal_omegaconfs(overrides: list[str], plain_path: bool) -> None:
    composer = JobComposer(lambda groups: OmegaConf.create(BASE))
    parsed = composer.parse(overrides)
    base = plain_overrides.plain_base(OmegaConf.create(BASE))
    assert base is not None
    assert (plain_overrides.apply(base, parsed) is not None) == plain_path
    try:
        expected = _typed(plain_config(composer(overrides)))
    except Exception as err:  # noqa: BLE001 - the OmegaConf way's own error: the plain path raises it too
        with pytest.raises(type(err)):
            composer.plain(overrides)
        return
    assert _typed(composer.plain(overrides)) == expected


def test_a_typed_node_or_a_resolver_that_may_read_the_config_is_left_to_omegaconf() -> None:
    from omegaconf.nodes import IntegerNode

    typed = OmegaConf.create({"seed": IntegerNode(1), "task": {"name": "x"}})
    assert plain_overrides.plain_base(typed) is None  # OmegaConf would check (and convert) on assignment
    other = OmegaConf.create({"x": "${oc.select:task.name,none}", "task": {"name": "x"}})
    assert plain_overrides.plain_base(other) is None
    assert plain_overrides.plain_base(OmegaConf.create({"x": "${oc.env:HOME,/}", "task": {"name": "x"}})) is not None


def test_under_another_hydra_a_sweep_composes_through_hydras_loader_as_it_is(monkeypatch: Any) -> None:
    monkeypatch.setattr(loads, "SHARED", False)  # as under Hydra 1.4 (make test-hydra14)
    with initialize_config_dir(config_dir=CONF_DIR, **VERSION_BASE):
        loader, shared = GlobalHydra.instance().config_loader(), SweepComposes()
        repository = loader.repository
        with shared_loads(loader, shared):
            assert loader.repository is repository and "_compose_config_from_defaults_list" not in vars(loader)
            ours = compose("config", overrides=["task=toy", "objective=att_kl"], return_hydra_config=True)
        hydra = compose("config", overrides=["task=toy", "objective=att_kl"], return_hydra_config=True)
        assert OmegaConf.to_container(ours, resolve=False) == OmegaConf.to_container(hydra, resolve=False)
        assert not shared.loads and shared.merges is None
