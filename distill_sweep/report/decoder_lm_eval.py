"""The decoder table's lm-eval section: the scores of the lm-eval stage (procedure.lm_eval, the record's `lm_eval`
block) per objective x init x data source, mean±std over seeds (n) as the decoder table's cells (report/decoder.py),
one column per task and metric. Records without the block (the stage off, or written before it) are left out; a
setting none of whose records has it gets no section.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from . import decoder

NOTE = ("lm-eval: the lm-evaluation-harness scores of the student after its last epoch (procedure.lm_eval), mean±std "
        "over seeds, (n) = runs; columns task: metric")


def scores(path: str) -> dict[str, float]:
    """A record's lm-eval scores as `task: metric` -> value ({} without the block)."""
    rec: dict[str, Any] = json.loads(Path(path).read_text())
    block = (rec.get("lm_eval") or {}).get("scores") or {}
    return {f"{task}: {metric}": float(v) for task, metrics in block.items() for metric, v in metrics.items()}


def table(part: pd.DataFrame, ddof: int) -> tuple[list[str], list[list[str]]] | None:
    """(headers, rows) for one setting's runs (decoder.runs' rows), None when none has lm-eval scores."""
    got = pd.DataFrame([scores(p) for p in part["path"]], index=part.index)
    if got.empty or got.shape[1] == 0:
        return None
    columns = sorted(got.columns)
    part = decoder._with_source(part.join(got))
    sources = decoder._sources(part)
    axis = sources != [decoder.FIXED]
    headers = ["objective", "init", *(["data"] if axis else []), *columns]
    rows = []
    for objective in sorted(part["objective"].unique(), key=lambda o: (o != decoder.BASELINE, o)):
        for init in decoder._inits(part):
            for source in sources:
                cell = part[(part["objective"] == objective) & (part["init"] == init) & (part["data"] == source)]
                if cell.empty or cell[columns].isna().all().all():
                    continue
                rows.append([objective, init, *([source] if axis else [])]
                            + [decoder._cell(cell[c], ddof) for c in columns])
    return headers, rows
