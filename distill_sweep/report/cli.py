"""`python -m distill_sweep.report [results_dir] [key=value ...]`: the command line and main.

Arguments are Hydra overrides (Hydra's own grammar) on `ReportOptions`, so `table=1`, `paper=false`,
`alpha=0.01`, `+preset=paper_table3` parse as in the main command; a bare first argument is the
results_dir. Any bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import sys
import tempfile
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from distill_sweep.analysis.frames import SCORE_KEYS, load_store
from distill_sweep.analysis.frames import scores as load_scores
from distill_sweep.report.build import build_report
from distill_sweep.report.html_page import header, render_html
from distill_sweep.report.options import ReportOptions, UsageError
from distill_sweep.report.plots import plot_curves, plot_speed_accuracy

PROG = "distill_sweep.report"
# each option's declared types (`str | None` -> {str, NoneType}): a number is converted to them (_as_declared)
OPTION_TYPES = {name: set(typing.get_args(hint)) or {hint}
                for name, hint in typing.get_type_hints(ReportOptions).items()}
HTML_NAME = "report.html"
USAGE = f"""usage: python -m {PROG} [results_dir] [key=value ...]

Tables, paired t-tests, the paper comparison and dev curves from the result.json records under
results_dir; printed, and written to <results_dir>/tables/ (or out=DIR). Arguments are Hydra overrides.

  results_dir=DIR     the result store (default: results); also accepted as the first bare argument
  table=1|2|3|4|all   which tables (default: all; 2 and 4: students distilled on a corpus, then fine-tuned)
  table=peakd4|peakd5|bilstm|fastbert
                      another system's own table instead: PEA-KD's Tables 4 and 5, BiLSTM vs BERT students vs
                      the teacher, FastBERT's speed-accuracy section; with table=all, preset= shows its own first
  metric=header|paper column metrics: as the paper's headers (MRPC F1, CoLA MCC) or what its numbers are (accuracy)
  which=best|primary|final|max
                      the epoch a score comes from: best = the best epoch by the metric shown (default; max is
                      the same); primary = the run's best epoch by its primary metric; final = the last epoch
  ddof=1              std over seeds with this ddof
  paper=true|false    compare with the paper's numbers (default: true)
  preset=NAME         compare the completed/failed/missing jobs with an experiment preset's grid; the presets
                      peakd_table4, peakd_table5, peakd_demo, bilstm and fastbert also select their layouts
  alpha=0.05          significance level of the t-tests (the paired CIs are at 1 - alpha)
  ci=t|bootstrap|bca  a cell's 95% CI: the Student t-interval of the mean (default); the bootstraps cover far
                      less than 95% at few seeds (under 20), so they are only for large cells, by choice
  table1_init=skip    the init of Table 1 (a rule name, spec or layers)
  curves=scored|all   the dev curves' epochs: the scored stage's only (default), or the earlier stages' too
  out=DIR             where to write the files (default: <results_dir>/tables)
  paper_dir=DIR       the paper's CSVs (default: results/paper)
  format=all|html|text
                      all (default): Markdown, LaTeX, CSV, PNG and report.html, one self-contained page with the
                      CIs, heatmaps, test matrices, curves and jobs; html: report.html only; text: all but report.html
  baseline=ROW        the row the HTML heatmap of differences compares with (default: no KD (fine-tuning))
  wandb=true          also log the tables, plots and page to wandb as one summary run (wandb_mode=offline|online,
                      wandb_group=NAME, default the results_dir)"""

TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
              "str | None": "a string or null"}


def _type_word(key: str) -> str:
    kind = {f.name: f.type for f in dataclasses.fields(ReportOptions)}[key]
    return TYPE_WORDS.get(str(kind), str(kind))


def _as_declared(key: str, value: Any) -> Any:
    """A number given for a text option is its text (`table=9`), an int for a float option a float (`alpha=1`):
    OmegaConf 2.3 converted both silently, 2.4 warns on stderr first (and says a later version will not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    declared = OPTION_TYPES.get(key, set())
    if str in declared:
        return str(value)
    if float in declared and isinstance(value, int):
        return float(value)
    return value


def parse_args(argv: Sequence[str]) -> ReportOptions:
    """Hydra overrides plus at most one bare results_dir; raises UsageError."""
    known = [f.name for f in dataclasses.fields(ReportOptions)]
    cfg = OmegaConf.structured(ReportOptions)
    positional = [a for a in argv if "=" not in a and not a.startswith(("~", "-"))]
    if len(positional) > 1:
        raise UsageError(f"expected at most one results_dir, got {positional}")
    if positional:
        cfg.results_dir = positional[0]
    parser = OverridesParser.create()
    for arg in argv:
        if arg in positional:
            continue
        if arg.startswith("-"):
            raise UsageError(f"unknown option {arg!r} (arguments are key=value overrides; see --help)")
        try:
            (override,) = parser.parse_overrides([arg])
        except HydraException as exc:
            raise UsageError(f"cannot parse {arg!r}: {str(exc).splitlines()[0]}") from None
        key = override.key_or_group
        if override.package is not None or key not in known:
            raise UsageError(f"unknown argument {key!r} (expected {', '.join(known)})")
        if override.is_delete():  # ~key: back to the default
            cfg[key] = getattr(ReportOptions(), key)
            continue
        if override.is_sweep_override():
            raise UsageError(f"{arg!r}: the report takes one value per key, not a sweep")
        value: Any = override.value()
        if isinstance(value, str) and "${" in value:
            raise UsageError(f"{arg!r}: interpolations are not supported here")
        value = _as_declared(key, value)
        try:
            cfg[key] = value  # `+key=` and `++key=` set it too: every option always exists
        except OmegaConfBaseException:
            raise UsageError(f"{key} must be {_type_word(key)}, got {arg.split('=', 1)[1]!r}") from None
    opts: ReportOptions = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    opts.check()
    return opts


def write_files(out_dir: Path, files: dict[str, Any]) -> list[Path]:
    """Write the report's artefacts: text, CSV frames, and plots (("plot", curves, title, systems, inits) and
    ("speed_plot", early-exit summary)). All are written into a directory of their own inside `out_dir` first
    and moved into place once every one is whole: a write that fails (a full or read-only disk: OSError) leaves
    `out_dir` as it was."""
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".report-partial-", dir=out_dir))
    try:
        written = _write_all(staging, files)
        for path in written:
            os.replace(path, out_dir / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [out_dir / path.name for path in written]


def _write_all(out_dir: Path, files: dict[str, Any]) -> list[Path]:
    written = []
    for name, payload in files.items():
        path = out_dir / name
        if isinstance(payload, tuple) and payload and payload[0] == "plot":
            _, curves, title, systems, inits = payload
            if not plot_curves(curves, path, title, systems, inits):
                continue
        elif isinstance(payload, tuple) and payload and payload[0] == "speed_plot":
            if not plot_speed_accuracy(payload[1], path):
                continue
        elif isinstance(payload, pd.DataFrame):
            payload.to_csv(path, index=False)
        else:
            path.write_text(str(payload), encoding="utf-8")
        written.append(path)
    return written


def _expanded(opts: ReportOptions) -> ReportOptions:
    """The options' paths with `~` as the home directory, as the main command reads every path."""
    home = {key: os.path.expanduser(value) for key in ("results_dir", "out", "paper_dir")
            if isinstance(value := getattr(opts, key), str)}
    return dataclasses.replace(opts, **home)


def _warn_ddof(records: pd.DataFrame, opts: ReportOptions) -> None:
    """A warning on stderr where a cell has too few seeds for a std with this ddof (it is then left out)."""
    scores, _ = load_scores(records, opts.metric)
    if scores.empty:
        return
    cell = [k for k in SCORE_KEYS if k not in ("seed", "config_hash", "path")]  # the runs of one table cell
    per_cell = scores.groupby([*cell, "metric"], dropna=False).size()
    short = int((per_cell <= opts.ddof).sum())
    if short:
        print(f"{PROG}: warning: ddof={opts.ddof}: {short} of {len(per_cell)} cells have at most {opts.ddof} seed(s), "
              "so their std is left out (a std with ddof=d needs more than d runs)", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        return 0
    try:
        opts = _expanded(parse_args(argv))
        if not opts.results_path.is_dir():
            raise UsageError(f"results_dir {opts.results_dir!r} does not exist or is not a directory")
        if opts.paper and not Path(opts.paper_dir).is_dir():
            print(f"{PROG}: warning: paper_dir {opts.paper_dir!r} does not exist: the comparison with the paper's "
                  "numbers is left out (paper=false says so without this warning)", file=sys.stderr)
        store = load_store(opts.results_path, opts.which)
        for why in store.skipped:
            print(f"{PROG}: warning: skipped {why}", file=sys.stderr)
        if store.records.empty:
            print(f"no readable result.json under {opts.results_dir}; nothing to report")
            return 0
        _warn_ddof(store.records, opts)
        doc, files = build_report(opts, store)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    report = doc.render(markdown=False)
    files = {} if opts.format == "html" else {**files, "report.md": doc.render(markdown=True)}
    if opts.format != "text":
        files[HTML_NAME] = render_html(doc, f"distill_sweep report: {opts.results_dir}", header(opts, store.records))
    try:
        written = write_files(opts.out_dir, files)
    except OSError as err:  # a full or read-only disk: one line, and no file of this report in out_dir
        why = f"{err.strerror} [{errno.errorcode.get(err.errno, err.errno)}]" if err.strerror else str(err)
        print(f"{PROG}: error: cannot write the report to {opts.out_dir}: {why}; nothing was written there (out=DIR "
              "writes it elsewhere)", file=sys.stderr)
        return 1
    print(report)
    print(f"wrote {len(written)} files to {opts.out_dir}: " + ", ".join(p.name for p in written))
    if opts.wandb:
        # tracking imports torch (through distributed): only a report logged to wandb pays for it
        from distill_sweep.training.tracking import log_report

        where = log_report(project="distill_sweep", group=opts.wandb_group or opts.results_dir, mode=opts.wandb_mode,
                           run_dir=opts.out_dir, name=f"report {opts.results_dir}", files=written)
        print(f"wandb summary run ({opts.wandb_mode}): {where}" if where else "wandb summary run: not logged (see the "
              "warning above)")
    if opts.format != "text":
        print(f"HTML report: {opts.out_dir / HTML_NAME}")
    return 0
