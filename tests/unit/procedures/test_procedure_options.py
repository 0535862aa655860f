"""A procedure's defaults have one home, its settings dataclass: `procedure=<name>` composes them (with the corpus
its declaration names), and conf/ holds no procedure YAML but presets."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import yaml
from helpers import ROOT, compose_cfg, plain
from hydra.core.config_store import ConfigStore

from distill_sweep.config.space import CODE_CHOICES, CODE_OPTIONS, group_options, option_defaults
from distill_sweep.procedures import PROCEDURES, Procedure, ProcedureSettings, declare


@pytest.mark.parametrize("name", sorted(PROCEDURES))
def test_a_procedure_composes_its_settings_defaults(name: str) -> None:
    # before: conf/procedure/ptp.yaml held the paper's thresholds where PTPSettings said {} (two homes that
    # disagreed); asdict of the settings made with their defaults is what the option must compose
    expected = dataclasses.asdict(PROCEDURES[name].settings(name=name))
    assert plain(compose_cfg([f"procedure={name}"]).procedure) == expected


def test_ptp_knows_the_papers_thresholds_without_a_yaml() -> None:
    thresholds = PROCEDURES["ptp"].settings(name="ptp").thresholds
    assert (thresholds["rte"].correct, thresholds["rte"].wrong) == (0.8, 0.6)  # PEA-KD's code
    assert sorted(thresholds) == ["cola", "mrpc", "qnli", "rte", "sst2", "toy"]


@pytest.mark.parametrize("name", ["causal_lm", "task_agnostic"])
def test_a_procedure_that_reads_a_corpus_composes_the_one_its_declaration_names(name: str) -> None:
    assert PROCEDURES[name].corpus == "toy" and option_defaults("procedure", name) == {"corpus": "toy"}
    assert plain(compose_cfg([f"procedure={name}"]).corpus)["name"] == "toy"
    assert plain(compose_cfg([f"procedure={name}", "corpus=wikitext103"]).corpus)["name"] == "wikitext103"


def test_a_procedure_that_names_no_corpus_composes_none() -> None:
    assert "corpus" not in compose_cfg(["procedure=fastbert"]) and option_defaults("procedure", "fastbert") == {}


def test_conf_holds_no_procedure_but_presets() -> None:
    """A YAML in conf/procedure/, if one is added, extends a procedure's option and sets a value of its own."""
    for path in sorted((ROOT / "conf" / "procedure").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        base = (data.get("defaults") or [None])[0]
        assert base in PROCEDURES, f"{path.name}: not a preset of a procedure (defaults: {data.get('defaults')})"
        assert "name" not in data and set(data) - {"defaults"}, path.name


@dataclass
class ProbeTestSettings(ProcedureSettings):
    lr_scale: float = field(default=10.0, metadata={"gt": 0.0})
    steps: list[int] = field(default_factory=lambda: [1, 2])


@pytest.fixture
def probe() -> Iterator[str]:
    declare(Procedure("probe_test", distils=False, settings=ProbeTestSettings, corpus="toy"))
    try:
        yield "probe_test"
    finally:  # the registration must not outlive the test
        del PROCEDURES["probe_test"], CODE_OPTIONS["procedure"]["probe_test"], CODE_CHOICES["procedure"]["probe_test"]
        ConfigStore.instance().repo["procedure"].pop("probe_test.yaml")


def test_a_declared_procedure_is_an_option_without_a_yaml(probe: str) -> None:
    assert probe in group_options("procedure") and not (ROOT / "conf" / "procedure" / f"{probe}.yaml").exists()
    cfg = compose_cfg([f"procedure={probe}", "procedure.lr_scale=3"])
    assert plain(cfg.procedure) == {"name": "probe_test", "lr_scale": 3, "steps": [1, 2]}
    assert plain(cfg.corpus)["name"] == "toy"


def test_each_listed_module_declares_the_procedure_it_is_named_after() -> None:
    from distill_sweep.procedures.declarations import MODULES

    named = {m.__name__.rpartition(".")[2].removesuffix("_settings") for m in MODULES}
    assert named == set(PROCEDURES)
    for module in MODULES:
        procedure = PROCEDURES[module.__name__.rpartition(".")[2].removesuffix("_settings")]
        assert procedure.module == module.__name__.removesuffix("_settings")
        if procedure.settings is not ProcedureSettings:
            assert procedure.settings.__module__ == module.__name__
