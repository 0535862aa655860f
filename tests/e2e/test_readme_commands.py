"""Every `python -m distill_sweep...` command in README.md, the documentation (docs/**/*.md) and the config
comments, run as written.

The commands are read from the files themselves, so a new one is covered without touching this test. They
run through `python -m` with the written argv, two at a time, forked from a preloaded interpreter
(`test_bad_inputs.PreloadedPython`). What is appended, never changed:
- offline toy commands (`task=toy teacher=tiny`) run for real, with the fast test settings appended (a tuned grid:
  two trials per arm);
- anything that needs the hub, a GPU cluster, or a preset's grid is run up to its plan with `+dry_run=true`
  (and `-m`), an experiment preset's grid narrowed to its first job (planning reads no model config);
- `--cfg`/`--help` commands run exactly as written;
- report commands (and the status and the export) run on the store the toy commands wrote; the report's synopsis
  runs with the first value of every bracket, and every other value it lists is parsed in-process;
- bench commands run on the tiny bench configuration of tests/unit/bench/test_bench.py (bench_cli: one repeat, the demo
  grid, without its busy-machine rows).
A command whose group option (or report table) is created by a worked example of the same page runs
in-process with that page's code and YAML (tests/e2e/test_readme_commands.py::test_worked_example).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import FAST, ROOT, TINY_AGNOSTIC, PreloadedPython, path_without_sbatch, records
from helpers import TINY as TINY_BENCH
from omegaconf import OmegaConf

from distill_sweep.config.space import CODE_OPTIONS, GROUPS, VERSION_BASE, group_options
from distill_sweep.sweep.compose import expand

README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONF = ROOT / "conf"
PYTHON = re.compile(r"^(?:\S*/)?python3? -m (distill_sweep\S*)")
# values for the placeholders of the report synopsis (NAME, DIR), by key; None: leave the key out (its default)
SYNOPSIS_VALUES = {"preset": "demo", "paper_dir": None, "out": "{work}/synopsis-out", "baseline": None,
                   "wandb_group": "synopsis"}


@dataclass(frozen=True)
class Command:
    text: str  # as written
    where: str  # file:line

    @property
    def module(self) -> str:
        match = PYTHON.match(self.text)
        assert match, self.text
        return match.group(1)

    @property
    def args(self) -> list[str]:
        return shlex.split(self.text)[3:]


# ----------------------------------------------------------------------------------------- extraction
def _cut(text: str) -> str:
    """A command up to the remark after it (`cmd      # remark`, `cmd   (remark)`: two spaces or more)."""
    return re.split(r"\s{2,}", text.strip(), maxsplit=1)[0]


def _continues(parts: list[str], following: str) -> bool:
    """A shell line continuation (`\\`), or a synopsis going on with more `[options]`."""
    return parts[-1].endswith("\\") or following.strip().startswith("[")


def _joined(parts: list[str]) -> str:
    return " ".join(p.removesuffix("\\").strip() for p in parts)


def readme_commands(text: str, name: str = "README.md") -> list[Command]:
    """Commands in fenced code blocks (a line starting with python, plus its continuation lines) and in
    inline code spans."""
    found: list[Command] = []
    lines = text.splitlines()
    in_block = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            in_block = not in_block
        elif in_block and PYTHON.match(line.strip().removeprefix("$ ")):
            parts, start = [_cut(line.strip().removeprefix("$ "))], i
            while i + 1 < len(lines) and _continues(parts, lines[i + 1]):
                i += 1
                parts.append(_cut(lines[i]))
            found.append(Command(_joined(parts), f"{name}:{start + 1}"))
        elif not in_block:
            for span in re.findall(r"`([^`]+)`", line):
                if PYTHON.match(span.strip()):
                    found.append(Command(span.strip(), f"{name}:{i + 1}"))
        i += 1
    return found


def conf_commands(root: Path = CONF) -> list[Command]:
    """Commands in comments of the config files: in backticks, or the rest of the comment line."""
    found: list[Command] = []
    for path in sorted([*root.rglob("*.yaml"), *root.rglob("*.py")]):
        comments = [line.split("#", 1)[1] if "#" in line else "" for line in path.read_text().splitlines()]
        for n, comment in enumerate(comments):
            spans = [s.strip() for s in re.findall(r"`([^`]+)`", comment) if PYTHON.match(s.strip())]
            if not spans and "python -m distill_sweep" in comment:
                parts = [_cut(comment[comment.index("python -m distill_sweep"):])]
                while parts[-1].endswith("\\") and n + len(parts) < len(comments):
                    parts.append(_cut(comments[n + len(parts)]))
                spans = [_joined(parts)]
            found += [Command(s, f"{path.relative_to(root.parent)}:{n + 1}") for s in spans]
    return found


def doc_files() -> list[Path]:
    """README.md and every Markdown page of the documentation (the snippets its pages include too)."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def doc_commands() -> list[Command]:
    return [c for path in doc_files() for c in readme_commands(path.read_text(), str(path.relative_to(ROOT)))]


def all_commands() -> list[Command]:
    seen: dict[str, Command] = {}
    for command in [*doc_commands(), *conf_commands()]:
        seen.setdefault(" ".join(command.text.split()), command)
    return list(seen.values())


def test_extraction_finds_blocks_continuations_inline_code_and_comments(tmp_path: Path) -> None:
    text = ("```bash\npython -m distill_sweep a=1 -m      # remark\npython -m distill_sweep.report [x]\n"
            "                               [y=1|2]\nmake demo\npython -m distill_sweep e=5 \\\n  f=6 -m\n```\n"
            "prose `python -m distill_sweep b=2` and `python3 -m venv .venv`\n"
            "```\n.venv/bin/python -m distill_sweep.bench.step --threads 1\n  not.a(continuation)\n```\n")
    assert [c.text for c in readme_commands(text)] == [
        "python -m distill_sweep a=1 -m", "python -m distill_sweep.report [x] [y=1|2]",
        "python -m distill_sweep e=5 f=6 -m", "python -m distill_sweep b=2",
        ".venv/bin/python -m distill_sweep.bench.step --threads 1"]
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "x.yaml").write_text("# python -m distill_sweep c=3 -m   (remark)\n"
                                           "key: 1  # e.g. `python -m distill_sweep d=4`.\n"
                                           "#   python -m distill_sweep g=7 \\\n#     h=8 -m\n")
    assert [c.text for c in conf_commands(tmp_path)] == [
        "python -m distill_sweep c=3 -m", "python -m distill_sweep d=4", "python -m distill_sweep g=7 h=8 -m"]
    # the files of this repository: the commands every section relies on are found
    texts = {c.text for c in all_commands()}
    assert "python -m distill_sweep.report" in texts
    assert any("experiment=paper_table3" in t and "hydra/launcher=slurm" in t for t in texts)


# ------------------------------------------------------------------------------------------- running
@dataclass
class Run:
    command: Command
    kind: str  # real | plan | print | report | bench | bench_memory | bench_cli | bench_sweep | bench_pack | bench_ddp | ...
    #   | bench_report | example | schematic
    argv: list[str] = field(default_factory=list)
    cwd: Path = Path()
    seconds: float = 0.0
    proc: subprocess.CompletedProcess | None = None


def _set_keys(args: list[str]) -> set[str]:
    return {a.split("=", 1)[0].lstrip("+~") for a in args if "=" in a and not a.startswith("-")}


def _missing_group_option(args: list[str]) -> tuple[str, str] | None:
    """(group, option) of a group choice that neither a file of conf/ nor the code provides (a worked example's)."""
    for arg in args:
        key, _, value = arg.partition("=")
        if key in GROUPS and "," not in value and value not in group_options(key):
            return key, value
    return None


def _missing_report_table(args: list[str]) -> str | None:
    """A `table=` value the report does not know (a worked example's layout)."""
    from distill_sweep.report.options import TABLE_CHOICES

    for arg in args:
        key, _, value = arg.partition("=")
        if key == "table" and "|" not in value and value not in TABLE_CHOICES:
            return value
    return None


def plan(command: Command, work: Path) -> Run:
    module, args = command.module, command.args
    python = [sys.executable, "-m", module]
    if "..." in args:
        return Run(command, "schematic")  # e.g. the architecture diagram's `python -m distill_sweep ...`
    if module == "distill_sweep.report":
        if _missing_report_table(args):
            return Run(command, "example")
        return Run(command, "report", [*python, *_expand_synopsis(args, work)])
    if module == "distill_sweep.analysis.aso_calibration":  # the full table takes minutes: two n, few pairs
        return Run(command, "print", [*python, *args, "--ns", "2", "3", "--reps", "20"])
    if module == "distill_sweep.report.compare":  # the toy commands' store against itself (a second one is
        return Run(command, "report", [*python, args[0], *args[:1], *args[2:]])  # the user's own)
    if module in ("distill_sweep.status", "distill_sweep.report.checklist", "distill_sweep.export"):
        # on the toy commands' store, after they ran
        return Run(command, "report", [*python, *args])
    if module == "distill_sweep.bench.step":
        # one thread: torch's default threads stall on a machine the other tests keep busy (2x slower here)
        return Run(command, "bench", [*python, *args, "--objectives", "vanilla_kd", *TINY_BENCH, "--steps", "1",
                                      "--threads", "1"])
    if module == "distill_sweep.bench.cli":  # one repeat, the demo grid planned instead of Table 3's; not the
        # busy-machine rows: seven toy jobs beside a spinning process, the most expensive run of this test
        return Run(command, "bench_cli", [*python, *args, "--repeats", "1", "--preset", "demo", "--no-busy"])
    if module == "distill_sweep.bench.sweep":  # one job per sweep, a few steps
        return Run(command, "bench_sweep", [*python, *args, "--objectives", "vanilla_kd", "--inits", "3", "--seeds", "1",
                                      "--num-train", "64", "--epochs", "1"])
    if module == "distill_sweep.bench.pack" and "--decoder" in args:  # two decoder members, two steps
        return Run(command, "bench_pack", [*python, "--decoder", "--device", "cpu", "--objectives", "fkl,rkl",
                                           "--steps", "2", "--batch", "8", "--threads", "1"])
    if module == "distill_sweep.bench.pack":  # a device measurement: on CPU, two tiny members, two steps
        return Run(command, "bench_pack", [*python, *args, "--device", "cpu", "--precision", "fp32", "--objectives",
                                           "hid_seq,vanilla_kd", "--teacher", "tiny", "--teacher-layers", "6",
                                           "--hidden", "64", "--heads", "4", "--ffn", "128", "--batch", "32",
                                           "--steps", "2", "--num-dev", "32", "--threads", "1"])
    if module == "distill_sweep.bench.memory":  # one short sequence over a small vocabulary in each table: a
        # point is two fresh processes (~8 CPU-s each), the table's rows are the same code
        return Run(command, "bench_memory", [*python, *args, "--seqs", "32", "--vocabs", "256", "--vocab", "256",
                                             "--seq", "32", "--chunk", "16", "--hidden", "16"])
    if module == "distill_sweep.bench.ddp":  # a small corpus
        return Run(command, "bench_ddp", [*python, *args, "--documents", "60"])
    if module == "distill_sweep.bench.agnostic":  # tiny models, one objective
        return Run(command, "bench_agnostic", [*python, *args, "--objectives", "att_mse", *TINY_AGNOSTIC])
    if module == "distill_sweep.bench.report":  # a small store, one repeat
        return Run(command, "bench_report", [*python, *args, "--jobs", "40", "--repeats", "1"])
    if module == "distill_sweep.bench.teacher_stores":  # one small vocabulary, a short sequence, one repeat
        return Run(command, "bench_stores", [*python, *args, "--vocabs", "256", "--seq", "32", "--hidden", "16",
                                             "--chunk", "16", "--repeats", "1"])
    if module == "distill_sweep.bench.job_memory":  # one short sequence, the hidden store's row: two jobs
        return Run(command, "bench_job_memory", [*python, *args, "--seqs", "32", "--vocab", "256", "--chunk", "16",
                                                 "--logits", "hidden"])
    if module == "distill_sweep.bench.tuning_round":  # one study per arm, one step, the 2-layer teacher
        return Run(command, "bench_tuning_round", [*python, *args, "--studies", "1", "--steps", "1", "--train", "64",
                                                   "--teacher", "tiny"])
    assert module == "distill_sweep", f"{command.where}: no rule for module {module} (add one to this test)"
    if _missing_group_option(args):
        return Run(command, "example")
    if any(a in ("--cfg", "-c", "--help", "-h", "--info", "-i") or a.startswith("--cfg=") for a in args):
        return Run(command, "print", [*python, *args])
    offline = "task=toy" in args and "teacher=tiny" in args
    elsewhere = [a for a in args if a.startswith(("experiment=", "hydra/launcher=")) and a != "hydra/launcher=local"]
    if offline and not elsewhere:
        # a tuned grid: two trials per arm still tune then run the grid (16 per arm took half of this command's time)
        trials = ["tune.trials=2"] if any(a.startswith("tune.trials=") for a in args) else []
        return Run(command, "real", [*python, *args, *FAST, "max_steps_per_epoch=2", *trials])
    extra = [] if "-m" in args or "--multirun" in args else ["-m"]
    extra += [] if "+dry_run=true" in args else ["+dry_run=true"]
    return Run(command, "plan", [*python, *args, *extra, *_first_job_of_the_preset(args)])


def _first_job_of_the_preset(args: list[str]) -> list[str]:
    """`key=<first value>` for every key an experiment preset sweeps and the command does not set."""
    preset = next((a.split("=", 1)[1] for a in args if a.startswith("experiment=")), None)
    if preset is None:
        return []
    params = OmegaConf.select(OmegaConf.load(CONF / "experiment" / f"{preset}.yaml"), "hydra.sweeper.params") or {}
    set_keys = _set_keys(args)
    swept = [f"{k}={v}" for k, v in params.items() if k not in set_keys and "(" not in str(v)]
    return expand(swept)[0] if swept else []  # the sweeper's own parse: a value may hold commas ({a:1,b:2},...)


def _synopsis_tokens(args: list[str]) -> list[str]:
    """`[results_dir] [table=1|3|all] [out=DIR]` -> the bracketed options (brackets off)."""
    return [a[1:-1] for a in args if a.startswith("[") and a.endswith("]")]


def _expand_synopsis(args: list[str], work: Path) -> list[str]:
    """The report's synopsis as a command: the first value of every bracket, placeholders filled in."""
    out = [a for a in args if not (a.startswith("[") and a.endswith("]"))]
    for token in _synopsis_tokens(args):
        key, sep, values = token.partition("=")
        if not sep:
            out.insert(0, str(work / key if key != "results_dir" else work / "results"))
            continue
        value = values.split("|")[0]
        if value.isupper():  # a placeholder: NAME, DIR
            assert key in SYNOPSIS_VALUES, f"no value for the synopsis placeholder {token} (add it to this test)"
            filled = SYNOPSIS_VALUES[key]
            if filled is None:
                continue
            value = filled.format(work=work)
        out.append(f"{key}={value}")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> list[Run]:
    """Every command, two at a time: the jobs and plans first, then the reports on the store they wrote."""
    work = tmp_path_factory.mktemp("readme")
    env = {"DISTILL_SWEEP_CACHE": str(shared_cache),  # the session's fine-tuned toy teacher, if there is one yet
           "PATH": path_without_sbatch(work / "bin")}  # like a workstation: the SLURM commands stay plans
    planned = [plan(c, work) for c in all_commands()]
    # a control: a renamed option in a README-style command must fail this test's runner
    control = Run(Command("python -m distill_sweep experiment=paper_table3 -m +dry_run=true task=rtee", "control"),
                  "control", [sys.executable, "-m", "distill_sweep", "experiment=paper_table3", "-m", "+dry_run=true",
                              "task=rtee"])
    first = [r for r in planned if r.kind in ("real", "plan", "print", "bench", "bench_memory", "bench_cli", "bench_sweep", "bench_pack",
                                              "bench_ddp", "bench_agnostic", "bench_report", "bench_stores",
                                              "bench_job_memory", "bench_tuning_round")] + [control]
    first.sort(key=lambda r: r.kind != "real")  # the longest first
    with PreloadedPython(work / "logs", env) as python:
        for batch in (first, [r for r in planned if r.kind == "report"]):
            for run, (proc, seconds) in zip(batch, python.run([(r.argv[1:], work) for r in batch])):
                run.proc, run.seconds, run.cwd = proc, seconds, work
    return [*planned, control]


def _explain(run: Run) -> str:
    proc = run.proc
    assert proc is not None
    return f"{run.command.where}: {run.command.text}\nran: {shlex.join(run.argv)}\nrc {proc.returncode} " \
           f"after {run.seconds} s\n" \
           f"{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}"


def test_every_command_runs_as_written(runs: list[Run]) -> None:
    failures = []
    for run in runs:
        proc = run.proc
        if run.kind in ("schematic", "example"):
            continue
        if run.kind == "control":
            ok = proc.returncode == 2 and "unknown task 'rtee'" in proc.stderr
        else:
            ok = proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr
            if run.kind == "plan":
                ok = ok and "jobs in the grid" in proc.stdout and "estimated cost" in proc.stdout
            elif run.kind == "bench":
                ok = ok and "| vanilla_kd |" in proc.stdout
            elif run.kind == "bench_memory":
                ok = ok and "| unchunked peak, MB |" in proc.stdout
            elif run.kind == "bench_cli":
                ok = ok and "| plan experiment=demo (dry run) |" in proc.stdout
            elif run.kind == "bench_ddp":
                ok = ok and "| 2 |" in proc.stdout
            elif run.kind == "bench_agnostic":
                ok = ok and "| att_mse |" in proc.stdout
            elif run.kind == "bench_report":
                ok = ok and "| the report command, whole process" in proc.stdout
            elif run.kind == "bench_sweep":
                ok = ok and "| sweep CPU-seconds" in proc.stdout and "in 1/1 pairs" in proc.stdout
            elif run.kind == "bench_pack":
                ok = ok and "| all 2 students |" in proc.stdout and "identical in 2/2 members" in proc.stdout
            elif run.kind == "bench_stores":
                ok = ok and "| hidden | " in proc.stdout and "| sampled, k = 32 |" in proc.stdout
            elif run.kind == "bench_job_memory":
                ok = ok and "| hidden | 32 |" in proc.stdout
            elif run.kind == "bench_tuning_round":
                ok = ok and "| packed (pack=auto) |" in proc.stdout and "identical packed and alone" in proc.stdout
            elif run.kind in ("print", "report"):
                ok = ok and bool(proc.stdout.strip())
        if not ok:
            failures.append(_explain(run))
    assert not failures, "\n\n".join(failures)


def test_the_toy_commands_wrote_completed_records(runs: list[Run]) -> None:
    real = [r for r in runs if r.kind == "real"]
    assert real, "no offline command in the README: nothing for the report commands to read"
    done = [r for r in records(real[0].cwd / "results") if r["status"] == "completed"]
    for run in real:
        wanted = {k: v for k, v in (a.split("=", 1) for a in run.command.args if "=" in a)
                  if k in ("objective", "procedure") and "," not in v}
        assert any(all(rec.get(k) == v for k, v in wanted.items()) for rec in done), (run.command.where, wanted)


def test_every_value_the_report_synopsis_lists_is_accepted() -> None:
    from distill_sweep.report.cli import parse_args

    synopses = [c for c in all_commands() if c.module == "distill_sweep.report" and _synopsis_tokens(c.args)]
    assert synopses, "the README has no report synopsis any more: drop this test"
    for command in synopses:
        for token in _synopsis_tokens(command.args):
            key, sep, values = token.partition("=")
            for value in values.split("|") if sep else ():
                if not value.isupper():
                    parse_args([f"{key}={value}"]).check()


# ------------------------------------------------------------------------------------------ worked examples
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
# how a record names the option a worked example adds
RECORD_NAMES = {"objective": lambda r: r.get("objective"), "procedure": lambda r: r.get("procedure"),
                "task": lambda r: r.get("task"), "student": lambda r: (r.get("student") or {}).get("name")}


@dataclass(frozen=True)
class Example:
    """A command whose group option (or report table) a page's own blocks create."""

    command: Command
    path: Path  # the page: its Python and YAML blocks are the example's code
    group: str  # a config group, or "table" for a report layout
    option: str

    def blocks(self, lang: str, first_line: str) -> list[str]:
        return [b for kind, b in BLOCK.findall(self.path.read_text()) if kind == lang and b.startswith(first_line)]

    @contextlib.contextmanager
    def code_added(self) -> Iterator[None]:
        """Each Python block run in the module its first line names (`# distill_sweep/students/fresh.py`), as
        if appended to that module: with its names, registering into its registries, and what it defines
        importable from there (a registry may name code by module); a module that does not exist yet is made.
        On exit the modules are as before (restoring the registries is the caller's)."""
        code = self.blocks("python", "# distill_sweep/")
        assert code, f"{self.command.where}: no Python block (# distill_sweep/...) for the example"
        saved: list[tuple[str, dict[str, Any] | None]] = []  # module, its names before (None: made here)
        try:
            for block in code:
                name = block.split()[1].removesuffix(".py").replace("/", ".").removesuffix(".__init__")
                module = sys.modules.get(name)
                if module is None and importlib.util.find_spec(name) is None:  # a module the example adds
                    module = sys.modules[name] = types.ModuleType(name)
                    module.__package__ = name.rpartition(".")[0]
                    saved.append((name, None))
                else:
                    module = importlib.import_module(name)
                    saved.append((name, dict(vars(module))))
                exec(compile(block, f"{self.command.where} ({name})", "exec"), vars(module))  # noqa: S102
            yield
        finally:
            for name, before in reversed(saved):
                if before is None:
                    sys.modules.pop(name, None)
                else:
                    vars(sys.modules[name]).clear()
                    vars(sys.modules[name]).update(before)


def worked_examples() -> list[Example]:
    found = []
    for path in doc_files():
        for command in readme_commands(path.read_text(), str(path.relative_to(ROOT))):
            option = _missing_group_option(command.args) if command.module == "distill_sweep" else None
            table = _missing_report_table(command.args) if command.module == "distill_sweep.report" else None
            if option:
                found.append(Example(command, path, *option))
            elif table:
                found.append(Example(command, path, "table", table))
    return found


EXAMPLES = worked_examples()


def test_every_extension_guide_has_a_worked_example() -> None:
    """Each "Add a ..." page of the guide has a worked example that test_worked_example runs: an example that
    loses its command or its blocks fails here or there, it is never skipped."""
    pages = sorted((DOCS / "guide").glob("add-*.md"))
    assert len(pages) >= 5, pages
    assert [p.name for p in pages if p not in {e.path for e in EXAMPLES}] == []


def _fast_for(args: list[str]) -> list[str]:
    """The fast test settings less what the command sets itself (a task of its own: the toy task's data keys)."""
    chosen = {a.split("=", 1)[0] for a in args if "=" in a}
    return [a for a in FAST if a.split("=", 1)[0] not in chosen
            and not ("task" in chosen and a.startswith("task."))]


def _write_task_data(task: dict, cwd: Path) -> None:
    """The task's TSV files where its YAML says, in the layout it declares, with the toy task's examples (the
    tiny teacher's tokenizer knows their words)."""
    from distill_sweep.data.toy import generate_toy

    tsv, fields = task["tsv"], task["text_fields"]
    columns = tsv["columns"]
    assert all(isinstance(c, str) for c in columns.values()), "write columns by position: not needed yet"
    root = cwd / task["data_dir"] / tsv.get("subdir", "")
    root.mkdir(parents=True)
    for split, rows in generate_toy(num_train=256, num_dev=128, seed=0).items():
        lines = ["\t".join(columns.values())] if tsv.get("header", True) else []
        for row in rows:
            values = {field: row[f"sentence{i + 1}"] for i, field in enumerate(fields)}
            values["label"] = task["label_names"][row["label"]] if tsv.get("label_type") == "str" else str(row["label"])
            lines.append("\t".join(values[key] for key in columns))
        (root / tsv["files"][split]).write_text("\n".join(lines) + "\n")


def _run_group_example(example: Example, tmp_path: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml
    from hydra import compose, initialize_config_dir
    from hydra.core.config_store import ConfigStore

    from distill_sweep.cli.run_job import run_job
    from distill_sweep.objectives import TERMS
    from distill_sweep.procedures import PROCEDURES
    from distill_sweep.students import STUDENTS

    group, option, command = example.group, example.option, example.command
    yaml_blocks = example.blocks("yaml", f"# conf/{group}/{option}.yaml")  # none: the option its code registers
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    assert len(yaml_blocks) == 1 or (group in ("student", "procedure") and not yaml_blocks), (command.where,
                                                                                                len(yaml_blocks))
    for yaml_block in yaml_blocks:
        (conf / group / f"{option}.yaml").write_text(yaml_block)
    if group == "task":
        _write_task_data(yaml.safe_load(yaml_blocks[0]), tmp_path)
    monkeypatch.chdir(tmp_path)  # the example's relative paths (data_dir) are taken from here
    registries = (TERMS, STUDENTS, PROCEDURES)
    before = [set(registry) for registry in registries]
    try:
        with contextlib.ExitStack() as added:
            if group != "task":  # a task is its YAML alone
                added.enter_context(example.code_added())
            with initialize_config_dir(config_dir=str(conf), **VERSION_BASE):
                cfg = compose("config", overrides=[*command.args, *_fast_for(command.args),
                                                   f"results_dir={tmp_path / 'r'}", f"cache_dir={shared_cache}"])
            record = run_job(cfg)
    finally:  # the example's registrations must not outlive it
        for registry, names in zip(registries, before):
            for name in set(registry) - names:
                del registry[name]
        if CODE_OPTIONS.get(group, {}).pop(option, None) is not None:  # and the config option it registered
            ConfigStore.instance().repo[group].pop(f"{option}.yaml")
    assert record["status"] == "completed", (command.where, record.get("error"))
    assert RECORD_NAMES[group](record) == option, (command.where, group, RECORD_NAMES[group](record))


def _run_table_example(example: Example, runs: list[Run], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A report layout: the page's block appended to its module (report.layouts), then the command on the
    records the documentation's toy commands wrote."""
    from distill_sweep.report import cli, layouts, options

    saved = {name: copy.copy(getattr(layouts, name)) for name in ("LAYOUTS", "LAYOUT_CHOICES", "PRESET_LAYOUTS")}
    # options' own names as imported: a reload makes new classes (UsageError), which cli and build, holding the
    # old ones, would not catch in the tests that follow in this process
    saved_options = dict(vars(options))
    try:
        with example.code_added():
            importlib.reload(options)  # as when the module is imported with the block in it
            store = next(r for r in runs if r.kind == "real").cwd / "results"
            code = cli.main([*example.command.args, str(store), f"out={tmp_path / 'tables'}"])
    finally:
        for name, value in saved.items():
            if isinstance(value, dict):
                getattr(layouts, name).clear()
                getattr(layouts, name).update(value)
            else:
                setattr(layouts, name, value)
        vars(options).clear()
        vars(options).update(saved_options)
    out = capsys.readouterr().out
    assert code == 0, (example.command.where, out[-2000:])
    layout = [line for line in example.blocks("python", "# distill_sweep/report/layouts.py")[0].splitlines()
              if "title=" in line]
    title = re.search(r'title="([^"]+)"', layout[0]).group(1)
    assert title in out, (example.command.where, out[-2000:])
    assert (tmp_path / "tables" / f"{example.option}.md").exists()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.command.where)
def test_worked_example(example: Example, tmp_path: Path, shared_cache: Path, monkeypatch: pytest.MonkeyPatch,
                        capsys: pytest.CaptureFixture, request: pytest.FixtureRequest) -> None:
    """A command whose option a page's example creates runs with that page's Python and YAML blocks, as
    written, and its record (or report) names what the example added."""
    if example.group == "table":
        _run_table_example(example, request.getfixturevalue("runs"), tmp_path, capsys)
    else:
        _run_group_example(example, tmp_path, shared_cache, monkeypatch)
