"""The decoder table: students of decoder LMs (procedure causal_lm), objective x init, per teacher and data.

A cell is mean±std over seeds (n) of the final epoch's dev value: perplexity (lower is better), next-token
accuracy and, for classification-style instruction data, the next-token choice accuracy. Paired t-tests
compare each objective with plain forward KL (fkl) under the same init, paired by seed, on perplexity, with
Holm's correction over the table's tests, the 1 - alpha t-interval of the mean difference and Cohen's d_z
(stats.py, as for the encoder tables). The teacher's own dev values head each table.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from distill_sweep.analysis import stats

PROCEDURE = "causal_lm"
BASELINE = "fkl"  # the objective every other is tested against
METRICS = (("perplexity", "perplexity"), ("token_accuracy", "token acc"), ("choice_accuracy", "choice acc"))
INIT_ORDER = ("bottom", "skip", "mixed", "prune", "random", "custom", "fresh")


def is_own(records: pd.DataFrame) -> pd.Series:
    """Which records this table holds (the generic tables leave them out)."""
    if records.empty:
        return pd.Series(False, index=records.index, dtype=bool)
    return records["procedure"] == PROCEDURE


def runs(records: pd.DataFrame) -> pd.DataFrame:
    """One row per completed causal_lm job: its setting, objective, init, seed, final dev values and teacher's."""
    out = []
    for r in records[(records["procedure"] == PROCEDURE) & (records["status"] == "completed")].to_dict("records"):
        rec = json.loads(Path(r["path"]).read_text())
        dev = (rec.get("final") or {}).get("dev") or {}
        teacher = rec.get("teacher") or {}
        layers = ",".join(str(x) for x in (rec.get("init") or {}).get("layers") or [])
        init = str(r["init_name"] or r["student_name"])
        out.append({"setting": f"{rec.get('task', r['task'])}, teacher {r['teacher_name']} -> {r['student_name']} "
                               f"{r['student_layers']}L", "objective": str(r["objective"]),
                    "init": init, "layers": layers, "seed": int(r["seed"]),
                    "teacher_dev": teacher.get("dev") or {},
                    **{key: dev.get(key) for key, _ in METRICS}})
    return pd.DataFrame(out)


def _cell(values: pd.Series, ddof: int) -> str:
    v = values.dropna().astype(float)
    if v.empty:
        return "—"
    std = float(v.std(ddof=ddof)) if len(v) > ddof else math.nan
    fmt = "{:.3f}" if v.abs().max() < 10 else "{:.2f}"
    return (fmt.format(v.mean()) + ("" if math.isnan(std) else "±" + fmt.format(std)) + f" ({len(v)})")


def tables(frame: pd.DataFrame, ddof: int, alpha: float
           ) -> list[tuple[str, list[str], list[list[str]], list[str], list[list[str]], str]]:
    """Per setting: (title, headers, rows, test headers, test rows, teacher line)."""
    out = []
    for setting, part in frame.groupby("setting", sort=True):
        metrics = [(k, label) for k, label in METRICS if part[k].notna().any()]
        headers = ["objective", "init", "layers"] + [label for _, label in metrics]
        rows = []
        inits = sorted(part["init"].unique(), key=lambda x: (INIT_ORDER.index(x) if x in INIT_ORDER else 99, x))
        for objective in sorted(part["objective"].unique(), key=lambda o: (o != BASELINE, o)):
            for init in inits:
                cell = part[(part["objective"] == objective) & (part["init"] == init)]
                if cell.empty:
                    continue
                layers = "/".join(sorted(set(cell["layers"])))
                rows.append([objective, init, layers] + [_cell(cell[k], ddof) for k, _ in metrics])
        tests, pvalues = [], []
        for init in inits:
            base = part[(part["objective"] == BASELINE) & (part["init"] == init)].set_index("seed")["perplexity"]
            for objective in sorted(set(part["objective"]) - {BASELINE}):
                other = part[(part["objective"] == objective) & (part["init"] == init)].set_index("seed")["perplexity"]
                seeds = sorted(set(base.index) & set(other.index))
                if not seeds:
                    continue
                a, b = other.loc[seeds].astype(float).to_numpy(), base.loc[seeds].astype(float).to_numpy()
                t, p, note = stats.paired_ttest(a, b)
                lo, hi = stats.paired_t_ci(a, b, 1.0 - alpha)
                d = stats.cohens_dz(a, b)
                tests.append([f"{objective} vs {BASELINE}", init, str(len(seeds)), f"{float(np.mean(a - b)):+.3f}",
                              "—" if math.isnan(lo) else f"[{lo:+.3f}, {hi:+.3f}]", "—" if math.isnan(d) else f"{d:.2f}",
                              "—" if math.isnan(t) else f"{t:.2f}", "—" if math.isnan(p) else f"{p:.3g}", note])
                pvalues.append(p)
        for row, adj in zip(tests, stats.holm(pvalues), strict=True):
            row.insert(8, "—" if math.isnan(adj) else f"{adj:.3g}" + (" *" if adj < alpha else ""))
        test_headers = ["comparison (perplexity)", "init", "pairs", "mean diff", f"{100 * (1 - alpha):g}% CI", "d",
                        "t", "p", "p (Holm)", "note"]
        teacher = part["teacher_dev"].iloc[0]
        line = "teacher dev: " + ", ".join(f"{label} {teacher[k]:.3f}" for k, label in metrics if k in teacher)
        out.append((f"Decoder distillation: {setting}", headers, rows, test_headers, tests, line))
    return out
