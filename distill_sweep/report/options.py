"""The report's options: an OmegaConf structured config, set on the command line with Hydra overrides."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from distill_sweep.analysis.curves import CURVE_STAGES
from distill_sweep.analysis.frames import NO_KD_LABEL, WHICH_CHOICES
from distill_sweep.analysis.paper import DEFAULT_PAPER_DIR, METRIC_MODES
from distill_sweep.analysis.stats import CI_METHODS
from distill_sweep.report.layouts import LAYOUT_CHOICES, PRESET_LAYOUTS

TABLE_CHOICES = ("1", "2", "3", "4", "all", *LAYOUT_CHOICES)  # layouts: other systems' tables (report.layouts)
FORMAT_CHOICES = ("all", "html", "text")
WANDB_MODES = ("offline", "online")


class UsageError(ValueError):
    """A bad command line: reported as one line on stderr, exit code 2."""


@dataclass
class ReportOptions:
    results_dir: str = "results"
    table: str = "all"  # "1" | "2" | "3" | "4" | "all" | a layout (LAYOUT_CHOICES)
    metric: str = "header"  # column metrics: the paper's headers (MRPC F1, CoLA MCC) or "paper" (accuracy)
    which: str = "best"  # which epoch a score comes from: see distill_sweep.analysis.frames
    ddof: int = 1
    paper: bool = True
    preset: str | None = None
    alpha: float = 0.05
    # a cell's 95% CI: t = Student t-interval (default); bootstrap | bca undercover at few seeds (docs/guide/report.md)
    ci: str = "t"
    table1_init: str = "skip"
    # the dev curves' epochs: scored = the scored stage's only; all = the earlier stages' too (their own line)
    curves: str = "scored"
    out: str | None = None  # default <results_dir>/tables
    paper_dir: str = str(DEFAULT_PAPER_DIR)
    # what is written: all = Markdown, LaTeX, CSV, PNG and report.html; html = report.html only; text = all but it
    format: str = "all"
    baseline: str = NO_KD_LABEL  # the row the HTML heatmaps' differences are to (same init); absent: no such heatmap
    wandb: bool = False  # also log the tables and plots to wandb as one summary run (job_type report)
    wandb_mode: str = "offline"  # offline (no network; `wandb sync` later) | online
    wandb_group: str | None = None  # the wandb group of the summary run (default: the results_dir)

    @property
    def tables(self) -> list[str]:
        if self.table in LAYOUT_CHOICES:
            return []
        return ["1", "2", "3", "4"] if self.table == "all" else [self.table]

    @property
    def layouts(self) -> list[str]:
        """Other systems' layouts: the one asked for, or with table=all those of the preset (shown first)."""
        if self.table in LAYOUT_CHOICES:
            return [self.table]
        return list(PRESET_LAYOUTS.get(self.preset or "", ())) if self.table == "all" else []

    @property
    def results_path(self) -> Path:
        return Path(self.results_dir)

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out is not None else self.results_path / "tables"

    def check(self) -> None:
        """Values the types alone do not restrict; raises UsageError."""
        for key, choices in (("table", TABLE_CHOICES), ("metric", METRIC_MODES), ("which", WHICH_CHOICES),
                             ("format", FORMAT_CHOICES), ("wandb_mode", WANDB_MODES), ("ci", CI_METHODS),
                             ("curves", CURVE_STAGES)):
            if getattr(self, key) not in choices:
                raise UsageError(f"{key} must be one of {'|'.join(choices)}, got {getattr(self, key)!r}")
        if self.ddof < 0:
            raise UsageError(f"ddof must be a non-negative integer, got {self.ddof}")
        if not 0.0 < self.alpha < 1.0:
            raise UsageError(f"alpha must be a number in (0, 1), got {self.alpha}")
        if not self.results_dir:
            raise UsageError("results_dir is empty")
