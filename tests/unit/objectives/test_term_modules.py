"""Each loss term's settings sit beside its declaration, in the torch-free objectives/<code>_settings.py named after
the module of its code, and the registry finds every such module by its name: a new term is its code, its settings
module and an objective preset (docs/guide/add-objective.md), with no list to add it to."""

from __future__ import annotations

import sys
from pathlib import Path

import distill_sweep.objectives as objectives
from distill_sweep.objectives import TERMS, TermSettings
from distill_sweep.objectives.registry import declaring_modules

PACKAGE = Path(objectives.__file__).parent


def test_the_declaring_modules_are_found_by_their_name(tmp_path: Path) -> None:
    for name in ("hidden.py", "hidden_settings.py", "zeta_settings.py", "settings.py", "notes_settings.txt"):
        (tmp_path / name).write_text("")
    assert declaring_modules(tmp_path) == ["hidden_settings", "zeta_settings"]


def test_every_declaring_module_of_the_package_is_imported_by_the_registry() -> None:
    found = declaring_modules(PACKAGE)
    assert "hidden_settings" in found and "causal_settings" in found
    assert all(f"distill_sweep.objectives.{name}" in sys.modules for name in found)


def test_each_term_is_declared_beside_its_settings_next_to_its_code() -> None:
    found = set(declaring_modules(PACKAGE))
    for name, term in TERMS.items():
        code = term.target.partition(":")[0]
        settings_module = f"{code}_settings"
        assert settings_module.rpartition(".")[2] in found, (name, term.target)
        if term.settings is not TermSettings:  # a term with settings of its own: in the same module
            assert term.settings.__module__ == settings_module, (name, term.settings)
    # and no declaring module is left without a term of its code
    codes = {term.target.partition(":")[0].rpartition(".")[2] for term in TERMS.values()}
    assert {module.removesuffix("_settings") for module in found} == codes
