"""The decoder table's lm-eval section (report/decoder_lm_eval.py): the records' lm-eval scores, mean±std over seeds
per objective, init and data source; records without them left out."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from distill_sweep.report import decoder_lm_eval

ACC = {("fkl", 1): 0.5, ("fkl", 2): 0.75, ("fkl", 3): 0.25, ("rkl", 1): 0.4, ("rkl", 2): 0.6}


def _part(tmp_path: Path, with_block: bool = True) -> pd.DataFrame:
    rows = []
    for (objective, seed), acc in ACC.items():
        path = tmp_path / f"{objective}{seed}" / "result.json"
        path.parent.mkdir()
        block = {"lm_eval": {"scores": {"toy_instruct_choice": {"acc": acc},
                                        "toy_instruct_rouge": {"rouge_l": seed / 4}}}} if with_block else {}
        path.write_text(json.dumps(block))
        rows.append({"setting": "s", "objective": objective, "init": "skip", "data": "fixed", "seed": seed,
                     "path": str(path)})
    return pd.DataFrame(rows)


def test_the_lm_eval_table_is_mean_and_std_over_seeds_per_task_and_metric(tmp_path: Path):
    headers, rows = decoder_lm_eval.table(_part(tmp_path), ddof=1)
    assert headers == ["objective", "init", "toy_instruct_choice: acc", "toy_instruct_rouge: rouge_l"]
    cells = {r[0]: r for r in rows}
    assert list(cells) == ["fkl", "rkl"]  # fkl (the baseline objective) first
    assert cells["fkl"][2] == f"0.500±{np.std([0.5, 0.75, 0.25], ddof=1):.3f} (3)"  # std 0.25
    assert cells["fkl"][3] == "0.500±0.250 (3)"  # rouge_l = seed / 4: 0.25, 0.5, 0.75
    assert cells["rkl"][2] == f"0.500±{np.std([0.4, 0.6], ddof=1):.3f} (2)"


def test_records_without_lm_eval_scores_give_no_section(tmp_path: Path):
    assert decoder_lm_eval.table(_part(tmp_path, with_block=False), ddof=1) is None
