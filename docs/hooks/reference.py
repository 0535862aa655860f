"""mkdocs hook: the config reference and the record schema, generated from the typed schema while the site builds.

A page asks for them with a marker line: `<!-- config-reference -->` (every key of every settings dataclass:
type, range, default, meaning) and `<!-- record-schema -->` (the fields of `distill_sweep.records.record.Record`).

Nothing here names a file of the package: the settings dataclasses are found at run time, from the typed schema
(`distill_sweep.config.schema.ConfigSettings`), the registries (procedures, students, objective terms) and, for the
parts that no registry lists, by walking the package's modules (`PLACES` says where those are set). A
`*Settings` dataclass that none of these reach stops the build, so a new part cannot be left out.

A key's meaning is the comment on its field's line(s) in the dataclass, or the comment lines right above the
field (docs/design.md, "Settings and their descriptions"); tests/repo/test_docs.py fails when a key has none.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import io
import pkgutil
import textwrap
import tokenize
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

CONFIG_MARKER = "<!-- config-reference -->"
RECORD_MARKER = "<!-- record-schema -->"
# Settings dataclasses that no registry lists, by class name: the config key where they are set. Found by
# walking the package's modules, so they may live in any module.
PLACES = {"AugmentSettings": "task.augment", "CorpusSettings": "corpus"}
# Containers, not settings of their own: their fields are the sections below.
CONTAINERS = ("ConfigSettings",)
# Modules that run something when imported (the command line itself), left out of the walk.
SKIP_MODULES = ("__main__",)


# ----------------------------------------------------------------------------------- field descriptions
@functools.cache
def _own_docs(cls: type) -> dict[str, str]:
    """{field: description} for the fields `cls` itself declares: the comment after the field's code on its
    line(s), or the comment lines directly above it (no blank line between)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and not tok.string.lstrip("# ").startswith(("type:", "noqa")):
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    (node,) = ast.parse(source).body
    docs: dict[str, str] = {}
    for item in node.body:  # type: ignore[attr-defined]
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        above: list[str] = []
        line = item.lineno - 1
        while line in comments and line not in code_lines:
            above.insert(0, comments[line])
            line -= 1
        after = [comments[n] for n in range(item.lineno, (item.end_lineno or item.lineno) + 1) if n in comments]
        docs[item.target.id] = " ".join(text for text in [*above, *after] if text)
    return docs


def field_doc(cls: type, name: str) -> str:
    """The description of field `name` of dataclass `cls` (declared by it or a base class), or ""."""
    for klass in cls.__mro__:
        if name in _own_docs(klass):
            return _own_docs(klass)[name]
    return ""


# ------------------------------------------------------------------------------------------ type, range
def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _optional_of(tp: Any) -> Any:
    """X for `X | None` (else None)."""
    if _is_union(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


def nested_dataclass(tp: Any) -> type | None:
    """The settings dataclass a field holds (itself, optional, or as list/dict items), if any."""
    candidates = [_optional_of(tp) or tp]
    origin = typing.get_origin(candidates[0])
    if origin in (list, dict):
        candidates = [typing.get_args(candidates[0])[-1]]
    return candidates[0] if dataclasses.is_dataclass(candidates[0]) else None


def describe_type(tp: Any) -> str:
    inner = _optional_of(tp)
    if inner is not None:
        return f"{describe_type(inner)} or null"
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " / ".join(f"`{a}`" for a in typing.get_args(tp))
    if _is_union(tp):
        return " or ".join(describe_type(a) for a in typing.get_args(tp))
    if origin in (list, tuple):
        args = typing.get_args(tp)
        return f"list of {describe_type(args[0])}" if args and args[0] is not Any else "list"
    if origin is dict:
        args = typing.get_args(tp)
        return f"mapping to {describe_type(args[1])}" if len(args) == 2 and args[1] is not Any else "mapping"
    if tp is Any:
        return "any"
    if dataclasses.is_dataclass(tp):
        return "settings (below)"
    return {int: "int", float: "float", bool: "bool", str: "string"}.get(tp, str(tp))


def _number(value: float) -> str:
    if isinstance(value, int) and value >= 2**16 and value & (value - 1) == 0:
        return f"2^{value.bit_length() - 1}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def describe_range(metadata: typing.Mapping[str, Any]) -> str:
    signs = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))
    return ", ".join(f"{sign} {_number(metadata[key])}" for key, sign in signs if key in metadata)


def describe_default(f: dataclasses.Field) -> str:
    if "shown_default" in f.metadata:  # a default taken from the environment, described rather than computed here
        return f"`{f.metadata['shown_default']}`"
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        return "(below)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`".replace("e-0", "e-")
    if isinstance(value, (list, dict)) and not value:
        return "`[]`" if isinstance(value, list) else "`{}`"
    return f"`{value}`"


# --------------------------------------------------------------------------------------- the key tree
@dataclass
class Key:
    path: str  # as set on the command line: `optimizer.lr`, `procedure.kd.positions`
    cls: type  # the dataclass that declares it
    field: dataclasses.Field
    tp: Any

    @property
    def doc(self) -> str:
        return field_doc(self.cls, self.field.name)


@dataclass
class Section:
    title: str  # the heading
    prefix: str  # the key path its keys start with ("" for top-level keys)
    cls: type | None  # None: a heading with its intro only
    intro: str = ""
    level: int = 2

    def keys(self) -> list[Key]:
        if self.cls is None:
            return []
        hints = typing.get_type_hints(self.cls)
        return [Key(f"{self.prefix}.{f.name}" if self.prefix else f.name, self.cls, f, hints[f.name])
                for f in dataclasses.fields(self.cls) if f.init]


def _walk_modules() -> list[types.ModuleType]:
    import distill_sweep

    modules = [distill_sweep]
    for info in pkgutil.walk_packages(distill_sweep.__path__, "distill_sweep."):
        if info.name.rsplit(".", 1)[-1] in SKIP_MODULES:
            continue
        modules.append(importlib.import_module(info.name))
    return modules


def settings_classes() -> dict[str, type]:
    """Every dataclass named `*Settings` in the package, by `module.qualname` (the modules are walked)."""
    found: dict[str, type] = {}
    for module in _walk_modules():
        for obj in vars(module).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__name__.endswith("Settings"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def _with_nested(section: Section) -> list[Section]:
    """The section, then one for every settings dataclass its keys hold (depth first)."""
    out = [section]
    for key in section.keys():
        inner = nested_dataclass(key.tp)
        if inner is not None:
            many = typing.get_origin(_optional_of(key.tp) or key.tp) in (list, dict)
            path = key.path + (".<name>" if typing.get_origin(key.tp) is dict else ".<i>" if many else "")
            out += _with_nested(Section(f"`{path}`", path, inner, key.doc, min(section.level + 1, 4)))
    return out


def config_sections() -> list[Section]:
    """The whole config surface, in the order of the page."""
    from distill_sweep import objectives, procedures, students
    from distill_sweep.config import schema
    from distill_sweep.config.space import group_options

    def options(group: str) -> str:
        names = ", ".join(f"`{o}`" for o in group_options(group))
        return f"Options (`conf/{group}/`): {names}." if names else ""

    sections: list[Section] = []
    hints = typing.get_type_hints(schema.ConfigSettings)
    for f in dataclasses.fields(schema.ConfigSettings):
        cls = hints[f.name]
        if f.name == "run":
            sections += _with_nested(Section("Top-level keys", "", cls, "Set as `key=value` (conf/config.yaml)."))
        else:
            sections += _with_nested(Section(f"`{f.name}`", f.name, cls, options(f.name)))
    by_name = {cls.__name__: cls for cls in settings_classes().values()}
    for name, path in PLACES.items():
        if name not in by_name:
            raise LookupError(f"docs/hooks/reference.py: PLACES names {name}, which no module of the package defines")
        group = path.split(".")[0]
        intro = options(group) if path == group else f"Set under `{path}` (a name or a mapping of these keys)."
        sections += _with_nested(Section(f"`{path}`", path, by_name[name], intro))
    sections += _with_nested(Section("`objective`", "objective", objectives.ObjectiveSettings, options("objective")))
    sections.append(Section("Objective terms", "", None, "Each term's own settings, under "
                            "`objective.terms.<term>` (`objective.terms.hid_seq.projection=none`).", 2))
    for name, term in sorted(objectives.TERMS.items()):
        sections += _with_nested(Section(f"`objective.terms.{name}`", f"objective.terms.{name}", term.settings,
                                         term.doc, 3))
    sections.append(Section("`procedure`", "", None, options("procedure") + " Each procedure's own keys, "
                            "under `procedure.` (`procedure=<name>` picks it).", 2))
    for name, proc in sorted(procedures.PROCEDURES.items()):
        sections += _with_nested(Section(f"`procedure={name}`", "procedure", proc.settings, "", 3))
    presets = ", ".join(f"`{o}`" for o in group_options("student") if o not in students.STUDENTS)
    sections.append(Section("`student`", "", None, "Options: each type below (`student=<type>`, its keys at their "
                            f"defaults) and the presets of `conf/student/`: {presets}. A student type's own keys, "
                            "under `student.`.", 2))
    for name, kind in sorted(students.STUDENTS.items()):
        sections += _with_nested(Section(f"`student.name={name}`", "student", kind.settings, "", 3))
    _check_every_settings_class_is_placed(sections)
    return sections


def _check_every_settings_class_is_placed(sections: list[Section]) -> None:
    placed = {s.cls for s in sections if s.cls is not None}
    bases = {base for cls in placed for base in cls.__mro__[1:]}
    missing = [name for name, cls in settings_classes().items()
               if cls not in placed and cls not in bases and cls.__name__ not in CONTAINERS]
    if missing:
        raise LookupError(f"settings dataclasses with no place in the config reference: {', '.join(missing)} "
                          "(reach them from a registry, or add them to PLACES in docs/hooks/reference.py)")


def config_keys() -> list[Key]:
    return [key for section in config_sections() for key in section.keys()]


# ------------------------------------------------------------------------------------------- Markdown
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _prose(text: str) -> str:
    """A description as table-cell text: `<` would open an HTML tag."""
    return _cell(text).replace("<", "&lt;")


def describe_kind(f: dataclasses.Field) -> str:
    """What the key is to the job's results (config/parse.py's kinds; design.md's "What a job's results depend on")."""
    kind = f.metadata.get("kind", "")
    return f"{kind}: {f.metadata['why']}" if kind == "nondeterministic" else kind


def _table(keys: list[Key], *, ranges: bool = True) -> str:
    head = "| key | type | range | default | kind | meaning |\n|---|---|---|---|---|---|" if ranges else \
        "| key | type | meaning |\n|---|---|---|"
    rows = []
    for key in keys:
        cells = [f"`{key.path}`", describe_type(key.tp)]
        if ranges:
            cells += [describe_range(key.field.metadata), describe_default(key.field), describe_kind(key.field)]
        rows.append("| " + " | ".join([*(_cell(c) for c in cells), _prose(key.doc)]) + " |")
    return "\n".join([head, *rows])


def render_sections(sections: list[Section], *, ranges: bool = True) -> str:
    out = []
    for section in sections:
        out.append(f"{'#' * section.level} {section.title}")
        if section.intro:
            out.append(section.intro)
        if section.cls is not None:
            out.append(_table(section.keys(), ranges=ranges))
    return "\n\n".join(out) + "\n"


def render_config_reference() -> str:
    return render_sections(config_sections())


def record_sections() -> list[Section]:
    from distill_sweep.records.record import Record

    return _with_nested(Section("`result.json`", "", Record, "", 2))


def record_keys() -> list[Key]:
    return [key for section in record_sections() for key in section.keys()]


def render_record_schema() -> str:
    return render_sections(record_sections(), ranges=False)


# ---------------------------------------------------------------------------------------- mkdocs hook
def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None) -> str:
    if CONFIG_MARKER in markdown:
        markdown = markdown.replace(CONFIG_MARKER, render_config_reference())
    if RECORD_MARKER in markdown:
        markdown = markdown.replace(RECORD_MARKER, render_record_schema())
    return markdown
