"""The loss terms are declared without torch (objectives/registry.py) and their code is loaded by target.

- Every conf/objective/*.yaml is parsed, and bad settings refused, in a process that never imports torch,
  transformers or datasets.
- Each declaration's target is the term's code: it loads, it is a term (an nn.Module class or a loss
  function over LossInputs), every such term in the package is declared, and the flags it carries agree.
- A declaration that names no code fails loudly when the term is first built, not silently.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import subprocess
import sys

import pytest
from helpers import ROOT
from torch import nn

import distill_sweep.objectives as objectives
from distill_sweep.objectives import NEXT_TOKEN_TERMS, TERMS, TermInfo, declare
from distill_sweep.objectives.spec import FunctionTerm

CHECK_WITHOUT_TORCH = """
import json, sys
from pathlib import Path
import yaml
import distill_sweep.objectives as o
from distill_sweep.errors import ConfigError

conf = Path("conf/objective")
base = yaml.safe_load((conf / "base.yaml").read_text())
parsed = {}
for path in sorted(conf.glob("*.yaml")):
    if path.stem != "base":
        node = {**base, **yaml.safe_load(path.read_text())}
        node.pop("defaults", None)
        parsed[path.stem] = sorted(o.parse_objective(node).terms)
refused = {}
for key, bad in [("alpha", 7), ("terms", {"hid_seq": {"projection": "nope"}}), ("terms", {"no_such_term": 1.0})]:
    try:
        o.parse_objective({**base, "name": "bad", key: bad})
    except ConfigError as e:
        refused[key + "=" + json.dumps(bad)] = str(e)
print(json.dumps({"parsed": parsed, "refused": refused,
                  "heavy": [m for m in ("torch", "transformers", "datasets") if m in sys.modules]}))
"""


def test_objectives_are_parsed_and_refused_without_torch() -> None:
    run = subprocess.run([sys.executable, "-c", CHECK_WITHOUT_TORCH], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    print(json.dumps(result, indent=1))
    assert result["heavy"] == []
    assert len(result["parsed"]) == len(list((ROOT / "conf" / "objective").glob("*.yaml"))) - 1
    assert result["parsed"]["tinybert"] == ["att_mse", "hid_seq"] and result["parsed"]["vanilla_kd"] == []
    assert len(result["refused"]) == 3, result["refused"]  # each bad value raised ConfigError
    assert "alpha" in result["refused"]["alpha=7"]
    assert "no_such_term" in result["refused"]['terms={"no_such_term": 1.0}']


def _reads_loss_inputs(fn: object) -> bool:
    params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]  # type: ignore[arg-type]
    return bool(params) and params[0].annotation == "LossInputs"


def _implementations() -> dict[str, object]:
    """Every public term in the package's modules, by target: an nn.Module class whose forward reads
    LossInputs, or a function of one LossInputs argument."""
    found = {}
    for info in pkgutil.iter_modules(objectives.__path__):
        module = importlib.import_module(f"distill_sweep.objectives.{info.name}")
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            is_class = isinstance(obj, type) and issubclass(obj, nn.Module) and _reads_loss_inputs(obj.forward)
            is_function = inspect.isfunction(obj) and _reads_loss_inputs(obj) and \
                len(inspect.signature(obj).parameters) == 1
            if is_class or is_function:
                found[f"{module.__name__}:{name}"] = obj
    return found


def test_every_declared_target_is_a_term_and_every_term_is_declared() -> None:
    found = _implementations()
    assert sorted(t.target for t in TERMS.values()) == sorted(found)
    for name, term in TERMS.items():
        code = found[term.target]
        assert (code.__doc__ or "").strip().splitlines()[0] == term.doc, name  # the right code, not a neighbour
        assert getattr(code, "cls_only", term.cls_only) == term.cls_only, name  # HidCLS / HidSeq say it too
        if isinstance(code, type):
            assert term.factory is code
        else:  # a loss function sits in the objective as a FunctionTerm around it
            module = term.factory(None)  # type: ignore[arg-type]
            assert isinstance(module, FunctionTerm) and module.fn is code
    assert NEXT_TOKEN_TERMS == ("fkl", "rkl", "gjsd", "uld", "nll")
    assert all(not (TERMS[t].uses_hidden or TERMS[t].uses_qkv) for t in NEXT_TOKEN_TERMS)


@pytest.mark.parametrize(("target", "error"), [
    ("distill_sweep.objectives.hidden:NoSuchTerm", AttributeError),
    ("distill_sweep.objectives.no_such_module:HidCLS", ModuleNotFoundError),
    ("distill_sweep.objectives.causal:IGNORE", TypeError),  # a constant: neither a class nor a function
])
def test_a_declaration_that_names_no_term_fails_when_the_term_is_built(target: str, error: type) -> None:
    term = TermInfo("misdeclared", target, "names no term's code")
    with pytest.raises(error) as raised:
        term.factory  # noqa: B018  (the property loads the code)
    print(f"{target}: {raised.value!r}")


def test_a_term_declared_twice_is_refused() -> None:
    before = dict(TERMS)
    with pytest.raises(ValueError, match="'hid_cls' declared twice"):
        declare(TermInfo("hid_cls", "distill_sweep.objectives.hidden:HidSeq", "a second hid_cls"))
    assert TERMS == before
