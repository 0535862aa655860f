"""The report's options: an OmegaConf structured config, set on the command line with Hydra overrides."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from distill_sweep.paper import DEFAULT_PAPER_DIR, METRIC_MODES
from distill_sweep.store import WHICH_CHOICES

TABLE_CHOICES = ("1", "3", "all")


class UsageError(ValueError):
    """A bad command line: reported as one line on stderr, exit code 2."""


@dataclass
class ReportOptions:
    results_dir: str = "results"
    table: str = "all"  # "1" | "3" | "all"
    metric: str = "header"  # column metrics: the paper's headers (MRPC F1, CoLA MCC) or "paper" (accuracy)
    which: str = "best"  # which epoch a score comes from: see distill_sweep.store
    ddof: int = 1
    paper: bool = True
    preset: str | None = None
    alpha: float = 0.05
    table1_init: str = "skip"
    out: str | None = None  # default <results_dir>/tables
    paper_dir: str = str(DEFAULT_PAPER_DIR)

    @property
    def tables(self) -> list[str]:
        return ["1", "3"] if self.table == "all" else [self.table]

    @property
    def results_path(self) -> Path:
        return Path(self.results_dir)

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out is not None else self.results_path / "tables"

    def check(self) -> None:
        """Values the types alone do not restrict; raises UsageError."""
        for key, choices in (("table", TABLE_CHOICES), ("metric", METRIC_MODES), ("which", WHICH_CHOICES)):
            if getattr(self, key) not in choices:
                raise UsageError(f"{key} must be one of {'|'.join(choices)}, got {getattr(self, key)!r}")
        if self.ddof < 0:
            raise UsageError(f"ddof must be a non-negative integer, got {self.ddof}")
        if not 0.0 < self.alpha < 1.0:
            raise UsageError(f"alpha must be a number in (0, 1), got {self.alpha}")
        if not self.results_dir:
            raise UsageError("results_dir is empty")
