"""The documentation site's generated parts and the names the README and the docs mention.

- Every config key and record field has a description (the comment on its field's line, docs/design.md), and
  the generated config reference lists every key of the settings dataclasses, found through the registries.
- Every dotted code name (`distill_sweep.records.record.Record`, `loop.update_step`) and every repository path
  (`distill_sweep/teachers/output_store.py`) the README and the docs mention in backticks exists.
- The benchmark pages render the JSON the benches write, and every page marker has its data file.
(`make docs` builds the site itself, strictly; tests/e2e/test_readme_commands.py runs the docs' commands.)
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import pkgutil
import re
import sys
import typing
from pathlib import Path
from types import ModuleType

import pytest
from helpers import ROOT

import distill_sweep
from distill_sweep.config.schema import RunSettings
from distill_sweep.config.space import GROUPS
from distill_sweep.procedures import PROCEDURES
from distill_sweep.records.record import Record
from distill_sweep.students import STUDENTS

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _hook(name: str) -> ModuleType:
    """A module of docs/hooks/ (mkdocs loads them by path; so does this test)."""
    if f"docs_hook_{name}" not in sys.modules:
        spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules[f"docs_hook_{name}"]


reference = _hook("reference")
benchmarks = _hook("benchmarks")


# ------------------------------------------------------------------------------------------ descriptions
def test_every_config_key_has_a_description() -> None:
    keys = reference.config_keys()
    assert len(keys) > 150, len(keys)  # the walk reached the registries' settings too
    missing = sorted({f"{k.path} ({k.cls.__module__}.{k.cls.__qualname__})" for k in keys if not k.doc})
    assert missing == [], "keys without a description (a comment on the field's line):\n" + "\n".join(missing)


def test_every_record_field_has_a_description() -> None:
    missing = sorted({k.path for k in reference.record_keys() if not k.doc})
    assert missing == [], missing


def test_a_field_is_described_by_its_own_comment_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The convention, on a module written here: a comment after the field or right above it describes it; a
    field with neither, or with only a type-checker comment, has no description (so the tests above fail)."""
    (tmp_path / "doc_convention_example.py").write_text(
        "from dataclasses import dataclass, field\n\n\n"
        "@dataclass\nclass ExampleSettings:\n"
        "    after: int = 1  # said after it\n"
        "    # said above it,\n    # on two lines\n    above: int = field(default=2, metadata={'ge': 1})\n"
        "    bare: int = 3\n\n"
        "    typed: int = 4  # type: ignore[assignment]\n"
        "    spans: int = field(  # said on its\n        default=5,  # own lines\n    )\n\n\n"
        "@dataclass\nclass Derived(ExampleSettings):\n    extra: bool = False  # its own\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("doc_convention_example")
    docs = {f.name: reference.field_doc(module.Derived, f.name) for f in dataclasses.fields(module.Derived)}
    assert docs == {"after": "said after it", "above": "said above it, on two lines", "bare": "", "typed": "",
                    "spans": "said on its own lines", "extra": "its own"}


def _reference_rows(heading: str) -> dict[str, list[str]]:
    """Key -> the cells of its row in one section of the generated reference (the heading's section and the
    sections nested in it)."""
    rows: dict[str, list[str]] = {}
    level = None
    for line in reference.render_config_reference().splitlines():
        title = re.match(r"^(#+) (.*)$", line)
        if title:
            if level is not None and len(title.group(1)) <= level:
                break
            if title.group(2) == heading:
                level = len(title.group(1))
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if level is not None and cells and cells[0].startswith("`") and cells[0] != "`key`":
            rows[cells[0].strip("`")] = cells
    assert rows, f"no section {heading!r} in the generated reference"
    return rows


def _leaf_paths(cls: type, prefix: str) -> list[str]:
    """Every key of a settings dataclass, nested ones included, derived from the dataclass itself."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        path = f"{prefix}.{f.name}" if prefix else f.name
        out.append(path)
        inner = reference.nested_dataclass(hints[f.name])
        if inner is not None and typing.get_origin(hints[f.name]) is not dict:
            many = typing.get_origin(typing.get_args(hints[f.name])[0] if reference._is_union(hints[f.name])
                                     else hints[f.name]) is list
            out += _leaf_paths(inner, path + (".<i>" if many else ""))
    return out


@pytest.mark.parametrize("heading, cls, prefix", [
    ("Top-level keys", RunSettings, ""),
    ("`procedure=task_agnostic`", PROCEDURES["task_agnostic"].settings, "procedure"),
    ("`student.name=bilstm`", STUDENTS["bilstm"].settings, "student"),
], ids=["top-level", "procedure=task_agnostic", "student=bilstm"])
def test_the_reference_lists_every_key_with_its_description(heading: str, cls: type, prefix: str) -> None:
    rows = _reference_rows(heading)
    for path in _leaf_paths(cls, prefix):
        assert path in rows, f"{path} is not in the generated config reference"
        name = path.rsplit(".", 1)[-1]
        assert reference.field_doc(_declaring(cls, path, prefix), name).replace("|", "\\|").replace("<", "&lt;") \
            in rows[path][-1], path


def _declaring(cls: type, path: str, prefix: str) -> type:
    """The dataclass whose field `path` is (walking nested settings)."""
    parts = [p for p in path.removeprefix(prefix).strip(".").split(".") if p != "<i>"]
    for part in parts[:-1]:
        cls = reference.nested_dataclass(typing.get_type_hints(cls)[part])
    return cls


def test_the_record_schema_lists_every_field() -> None:
    text = reference.render_record_schema()
    for f in dataclasses.fields(Record):
        assert f"| `{f.name}` |" in text, f.name


def test_a_settings_dataclass_no_registry_reaches_stops_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass
    class OrphanSettings:
        size: int = 1  # a part nobody registered

    found = reference.settings_classes()
    monkeypatch.setattr(reference, "settings_classes", lambda: {**found, "somewhere.OrphanSettings": OrphanSettings})
    with pytest.raises(LookupError, match="somewhere.OrphanSettings"):
        reference.config_sections()


# ----------------------------------------------------------------------------- names the docs mention
SPAN = re.compile(r"`([^`\n]+)`")
PATH_ROOTS = ("distill_sweep/", "tests/", "conf/", "docs/")
FILE_TYPES = ("py", "yaml", "json", "csv", "tsv", "npy", "md", "txt", "pt", "png", "svg", "tex", "parquet", "toml", "sh",
              "safetensors", "lock")
# every module and package by its own name -> its dotted paths under distill_sweep (`loop` -> training.loop; a
# name used twice, `decoder`, has several)
MODULES: dict[str, list[str]] = {}
for _m in pkgutil.walk_packages(distill_sweep.__path__, prefix="distill_sweep."):
    MODULES.setdefault(_m.name.rsplit(".", 1)[-1], []).append(_m.name.removeprefix("distill_sweep."))


def _code_spans(text: str) -> list[str]:
    """Backticked spans outside fenced code blocks."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return SPAN.findall(prose)


def _example_files() -> set[str]:
    """Files the worked examples create (their blocks' first line names them)."""
    return {m.group(1) for page in PAGES for m in re.finditer(r"^```\w+\n# ((?:conf|distill_sweep)/\S+)", page.read_text(),
                                                              flags=re.M)}


def _key_paths() -> list[tuple[list[str], bool]]:
    """Every config and record key: its path, and whether it holds keys of its own (a mapping or any value)."""
    def open_ended(tp: typing.Any) -> bool:
        inner = typing.get_args(tp)[0] if reference._is_union(tp) else tp
        return inner is typing.Any or typing.get_origin(inner) is dict or inner is dict

    return [(k.path.split("."), open_ended(k.tp)) for k in [*reference.config_keys(), *reference.record_keys()]]


def _is_key(parts: list[str], keys: list[tuple[list[str], bool]]) -> bool:
    """A config or record key, a prefix of one (`teacher.finetune`), or a path into a key that holds keys of its
    own (`student.settings.swap_qk`)."""
    def same(a: str, b: str) -> bool:
        return a == b or b.startswith("<")

    return any(all(same(a, b) for a, b in zip(parts, key)) and (len(parts) <= len(key) or open_)
               for key, open_ in keys)


def resolve(name: str) -> bool:
    """`distill_sweep.x.y`, `module.attr` (a module by its own name, in whichever package it is) or
    `objectives/config.check_compatible`: importable and gettable."""
    full = name.startswith("distill_sweep")
    parts = re.split(r"[./]", name.removeprefix("distill_sweep.").removeprefix("distill_sweep/").removesuffix("()"))
    if full:
        return _resolve(parts)
    return any(_resolve([*where.split("."), *parts[1:]]) for where in MODULES.get(parts[0], []))


def _resolve(parts: list[str]) -> bool:
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module("distill_sweep." + ".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def missing_names(spans: list[str], keys: list[list[str]], created: set[str]) -> list[str]:
    """The spans that name code or a repository file which does not exist."""
    ambiguous = {*GROUPS, *(f.name for f in dataclasses.fields(RunSettings)), *(f.name for f in dataclasses.fields(Record))}
    missing = []
    for span in spans:
        span = span.strip()
        if re.search(r"[\s=<>*{}\[\],:$~'\"]", span):
            continue  # a command, an override, a placeholder or a value
        if span.endswith("/") or span.rsplit(".", 1)[-1] in FILE_TYPES:  # a file or a folder
            if span.startswith(PATH_ROOTS) and span not in created and not (ROOT / span).exists():
                missing.append(span)
            continue
        if not re.fullmatch(r"(distill_sweep[./])?[a-z_][a-z0-9_]*([./][A-Za-z_][A-Za-z0-9_]*)+(\(\))?", span):
            continue
        first = re.split(r"[./]", span.removeprefix("distill_sweep.").removeprefix("distill_sweep/"))[0]
        if not span.startswith("distill_sweep") and first not in MODULES:
            continue  # another package's name (torch.distributed) or a file name (result.json)
        if resolve(span):
            continue
        if first in ambiguous and not span.startswith("distill_sweep") and _is_key(span.split("."), keys):
            continue  # a config or record key that shares its first word with a module (`teacher.finetune`)
        missing.append(span)
    return missing


def test_every_code_name_and_path_the_readme_and_docs_mention_exists() -> None:
    keys, created = _key_paths(), _example_files()
    found = {f"{page.relative_to(ROOT)}: {name}" for page in PAGES
             for name in missing_names(_code_spans(page.read_text()), keys, created)}
    assert sorted(found) == []


def test_the_name_check_catches_names_that_no_code_defines() -> None:
    keys, created = _key_paths(), _example_files()
    wrong = ["loop.intermediate_loss_fn", "distill_sweep.records.record.NoSuchRecord", "distill_sweep/no_such_module.py",
             "teacher.no_such_key", "objectives/core.no_such_check"]
    right = ["loop.update_step", "distill_sweep.records.record.Record.from_dict", "distill_sweep/teachers/output_store.py",
             "teacher.finetune.seed", "student.settings.swap_qk", "torch.distributed", "result.json",
             "objectives/config.check_compatible", "conf/objective/cls_cosine.yaml"]
    assert missing_names(wrong + right, keys, created) == wrong


# ----------------------------------------------------------------------------------------- benchmarks
def test_a_bench_writes_what_it_prints_as_json_and_the_docs_render_it(tmp_path: Path) -> None:
    from distill_sweep.bench.json_output import writes_json

    @writes_json("example")
    def main(argv: list[str] | None = None) -> int:
        print("# distill_sweep example: a header line\n| objective | ms/step | ratio |\n|---|---:|---:|\n"
              "| att_kl | 1867 | 1.001 |\n\nworst median step ratio: 1.001")
        return 0

    assert main(["--json", str(tmp_path / "example.json"), "--threads", "1"]) == 0
    data = json.loads((tmp_path / "example.json").read_text())
    assert {"bench", "command", "date", "commit", "machine", "blocks"} <= set(data)
    assert data["command"].endswith("--threads 1") and "--json" not in data["command"]
    assert data["blocks"][1] == {"table": {"columns": ["objective", "ms/step", "ratio"], "align": ["left", "right", "right"],
                                           "rows": [["att_kl", "1867", "1.001"]]}}
    page = benchmarks.render(data)
    assert "| att_kl | 1867 | 1.001 |" in page and "|---|---:|---:|" in page
    assert data["date"] in page and "worst median step ratio: 1.001" in page


def test_every_bench_marker_has_its_figures_with_machine_date_and_commit() -> None:
    markers = {m.group(1) for page in PAGES for m in benchmarks.MARKER.finditer(page.read_text())}
    assert {"step", "agnostic", "sweep", "cli", "ddp"} <= markers
    makefile = (ROOT / "Makefile").read_text()
    for name in markers:
        assert f"$(BENCH_DATA)/{name}.json" in makefile, f"make bench does not write {name}.json"
        data = benchmarks.load(DOCS, name)
        assert data["machine"] and data["date"] and data["commit"] and any("table" in b for b in data["blocks"]), name


def test_every_paper_table_marker_names_a_transcribed_table() -> None:
    for page in PAGES:
        for m in benchmarks.PAPER_MARKER.finditer(page.read_text()):
            assert "| objective |" in benchmarks.paper_table(ROOT / benchmarks.PAPER / m.group(1)) or \
                "| method |" in benchmarks.paper_table(ROOT / benchmarks.PAPER / m.group(1)) or \
                "| system |" in benchmarks.paper_table(ROOT / benchmarks.PAPER / m.group(1)), m.group(1)


def test_the_design_shows_a_jobs_path_in_at_most_five_steps() -> None:
    """docs/design.md's "A job's path" numbers its steps from the command line to the record: at most five, in
    order, each naming the function that does it (the names are checked to exist by the test above)."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("## A job's path", 1)[1].split("\n## ", 1)[0]
    steps = [int(m.group(1)) for m in re.finditer(r"^(\d+)\. ", section, re.MULTILINE)]
    assert steps == list(range(1, len(steps) + 1)) and 3 <= len(steps) <= 5, steps
