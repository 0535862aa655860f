"""transformers' load report in one line.

When a checkpoint lacks weights the model has (a backbone given to a classifier: its new head) or holds weights
the model does not use, transformers logs a table headed "<Model> LOAD REPORT", with terminal colour codes even
into a file or a SLURM log, and notes that repeat on every load. `one_line_load_reports` turns that record into
one line: the model, where it came from, and each status with its keys.
"""

from __future__ import annotations

import logging
import re

ANSI = re.compile(r"\x1b\[[0-9;]*m")
REPORTING_LOGGER = "transformers.modeling_utils"  # the logger transformers' report is written through
SHOWN_KEYS = 4  # keys named per status; the rest counted


def one_line(message: str) -> str:
    """The report `message` as one line: "<Model> loaded from <path>: missing 2 (classifier.weight, ...)"."""
    lines = ANSI.sub("", message).splitlines()
    head = lines[0].replace(" LOAD REPORT from:", " loaded from") if lines else ""
    by_status: dict[str, list[str]] = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.split("|")]
        if len(cells) >= 2 and cells[0] and cells[1] and cells[0] != "Key" and not set(cells[0]) <= {"-", "+"}:
            by_status.setdefault(cells[1].lower(), []).append(cells[0])
    parts = [f"{status} {len(keys)} ({', '.join(keys[:SHOWN_KEYS])}{', ...' if len(keys) > SHOWN_KEYS else ''})"
             for status, keys in by_status.items()]
    return head + (": " + "; ".join(parts) if parts else "")


class OneLineLoadReport(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "LOAD REPORT" in message:
            record.msg, record.args = one_line(message), ()
        return True


def one_line_load_reports() -> None:
    """From now on in this process, transformers' load reports are one line each (idempotent)."""
    logger = logging.getLogger(REPORTING_LOGGER)
    if not any(isinstance(f, OneLineLoadReport) for f in logger.filters):
        logger.addFilter(OneLineLoadReport())
