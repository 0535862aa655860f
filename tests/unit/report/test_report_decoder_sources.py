"""The decoder table's data-source axis (report/decoder.py): fixed / on_policy=x / seq_kd read from the records'
config, a column of its own, paired t-tests of each source against fixed beside those of each objective against
fkl, and the greedy responses' scores where the records have them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from distill_sweep.report import decoder


@pytest.mark.parametrize("procedure,source", [
    ({}, "fixed"),  # a record from before the keys
    ({"on_policy": 0.0, "seq_kd": False}, "fixed"),
    ({"on_policy": 0.5, "seq_kd": False}, "on_policy=0.5"),
    ({"on_policy": 1.0}, "on_policy=1"),
    ({"seq_kd": True}, "seq_kd"),
    ({"seq_kd": True, "on_policy": 0.25}, "seq_kd+on_policy=0.25"),
])
def test_data_source_from_the_procedure_config(procedure: dict, source: str):
    assert decoder.data_source(procedure) == source


def test_runs_read_the_source_and_the_generation_scores_from_the_records(tmp_path: Path):
    rows = []
    for n, procedure in enumerate(({"name": "causal_lm"}, {"name": "causal_lm", "on_policy": 0.5, "seq_kd": False})):
        path = tmp_path / f"r{n}" / "result.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"task": "causal_toy_instructions", "config": {"procedure": procedure},
                                    "final": {"dev": {"perplexity": 2.0 + n, "token_accuracy": 0.5,
                                                      "exact_match": 0.25 * n, "rouge_l": 0.5}},
                                    "init": {"layers": [1, 2]}, "teacher": {"dev": {"perplexity": 1.5}}}))
        rows.append({"procedure": "causal_lm", "status": "completed", "path": str(path), "init_name": "bottom",
                     "student_name": "truncated", "task": "t", "teacher_name": "tiny_llama", "student_layers": 2,
                     "objective": "fkl", "seed": 1})
    frame = decoder.runs(pd.DataFrame(rows))
    assert frame["data"].tolist() == ["fixed", "on_policy=0.5"]
    assert frame["exact_match"].tolist() == [0.0, 0.25] and frame["rouge_l"].tolist() == [0.5, 0.5]


PPL = {  # (objective, source, seed) -> dev perplexity
    ("fkl", "fixed", 1): 3.0, ("fkl", "fixed", 2): 3.2, ("fkl", "fixed", 3): 3.1,
    ("fkl", "on_policy=0.5", 1): 2.8, ("fkl", "on_policy=0.5", 2): 3.1, ("fkl", "on_policy=0.5", 3): 2.7,
    ("fkl", "seq_kd", 1): 3.5, ("fkl", "seq_kd", 2): 3.3,  # seed 3 missing: 2 pairs
    ("rkl", "fixed", 1): 3.3, ("rkl", "fixed", 2): 3.4, ("rkl", "fixed", 3): 3.6,
    ("rkl", "on_policy=0.5", 1): 2.9, ("rkl", "on_policy=0.5", 2): 3.0, ("rkl", "on_policy=0.5", 3): 3.3,
}


def _frame(with_generation: bool) -> pd.DataFrame:
    return pd.DataFrame([{"setting": "s", "objective": o, "init": "skip", "data": d, "layers": "2,4,6", "seed": s,
                          "teacher_dev": {"perplexity": 2.0, "exact_match": 0.5}, "perplexity": v,
                          "token_accuracy": 0.4, "choice_accuracy": None,
                          **({"exact_match": s / 4, "rouge_l": 0.5} if with_generation else {})}
                         for (o, d, s), v in PPL.items()])


def test_the_table_has_a_data_column_and_tests_each_source_against_fixed():
    ((title, headers, rows, test_headers, tests, teacher),) = decoder.tables(_frame(True), ddof=1, alpha=0.05)
    assert headers == ["objective", "init", "data", "layers", "perplexity", "token acc", "exact match", "ROUGE-L"]
    cells = {(r[0], r[2]): r for r in rows}
    assert list(cells) == [("fkl", "fixed"), ("fkl", "on_policy=0.5"), ("fkl", "seq_kd"), ("rkl", "fixed"),
                           ("rkl", "on_policy=0.5")]
    assert cells[("fkl", "seq_kd")][4] == f"3.400±{np.std([3.5, 3.3], ddof=1):.3f} (2)"
    # exact match per seed s/4: seeds 1, 2, 3 -> mean 0.5, std 0.25
    assert cells[("fkl", "fixed")][6] == "0.500±0.250 (3)"
    assert "exact match 0.500" in teacher
    tested = {row[0]: dict(zip(test_headers, row, strict=True)) for row in tests}
    assert list(tested) == ["rkl vs fkl (fixed)", "rkl vs fkl (on_policy=0.5)", "on_policy=0.5 vs fixed (fkl)",
                            "seq_kd vs fixed (fkl)", "on_policy=0.5 vs fixed (rkl)"]
    # on_policy=0.5 - fixed under fkl, by seed: -0.2, -0.1, -0.4
    row = tested["on_policy=0.5 vs fixed (fkl)"]
    assert row["pairs"] == "3" and row["mean diff"] == f"{np.mean([-0.2, -0.1, -0.4]):+.3f}"
    ref = sps.ttest_rel([2.8, 3.1, 2.7], [3.0, 3.2, 3.1])
    assert row["p"] == f"{ref.pvalue:.3g}" and row["t"] == f"{ref.statistic:.2f}"
    assert tested["seq_kd vs fixed (fkl)"]["pairs"] == "2"  # the seeds both ran
    assert tested["seq_kd vs fixed (fkl)"]["mean diff"] == f"{np.mean([0.5, 0.1]):+.3f}"
    assert tested["rkl vs fkl (on_policy=0.5)"]["mean diff"] == f"{np.mean([0.1, -0.1, 0.6]):+.3f}"
    # Holm over all five tests: the smallest p times 5 (capped at 1)
    ps = sorted(float(r["p"]) for r in tested.values())
    smallest = min(tested.values(), key=lambda r: float(r["p"]))
    assert float(smallest["p (Holm)"].rstrip(" *")) == pytest.approx(min(1.0, 5 * ps[0]), rel=1e-2)


def test_a_setting_with_fixed_data_only_keeps_the_table_it_had():
    frame = _frame(False)
    frame = frame[frame["data"] == "fixed"].drop(columns=["data"])  # records from before the axis
    ((_, headers, rows, _, tests, _),) = decoder.tables(frame, ddof=1, alpha=0.05)
    assert headers == ["objective", "init", "layers", "perplexity", "token acc"]
    assert [r[0] for r in rows] == ["fkl", "rkl"] and [t[0] for t in tests] == ["rkl vs fkl"]


def test_a_shared_prefix_setting_says_its_metrics_read_the_shared_ids_only(tmp_path: Path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"task": "causal_toy_instructions", "config": {"procedure": {"name": "causal_lm"}},
                                "final": {"dev": {"perplexity": 2.0}}, "teacher": {"dev": {"perplexity": 1.5}},
                                "causal_lm": {"vocabularies": {"shared_ids": 68,
                                                               "metrics": {"vocabulary": "shared_ids", "size": 68}}}}))
    row = {"procedure": "causal_lm", "status": "completed", "path": str(path), "init_name": "bottom",
           "student_name": "fresh", "task": "t", "teacher_name": "tiny_llama", "student_layers": 2, "objective": "fkl",
           "seed": 1}
    frame = decoder.runs(pd.DataFrame([row]))
    assert frame["metric_ids"].tolist() == [68]
    ((*_, teacher),) = decoder.tables(frame, ddof=1, alpha=0.05)
    assert teacher.endswith("metrics of procedure.vocab=shared_prefix runs over the shared ids only (0..67)")
    ((*_, plain),) = decoder.tables(_frame(False), ddof=1, alpha=0.05)
    assert "shared" not in plain


def test_the_decoder_tables_are_written_as_markdown_and_latex_too(tmp_path: Path):
    """decoder<N>.md and decoder<N>.tex beside the CSV: the same cells, the notes below (Markdown) or in the
    caption (LaTeX), ± as maths and the names' underscores escaped."""
    from distill_sweep.report.build import _decoder_sections
    from distill_sweep.report.options import ReportOptions
    from distill_sweep.report.render import Doc

    rows = []
    for seed, ppl in ((1, 3.0), (2, 3.2)):
        path = tmp_path / f"r{seed}" / "result.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"task": "causal_toy_instructions", "config": {"procedure": {"name": "causal_lm"}},
                                    "final": {"dev": {"perplexity": ppl, "token_accuracy": 0.5}},
                                    "init": {"layers": [1, 2]}, "teacher": {"dev": {"perplexity": 1.5}}}))
        rows.append({"procedure": "causal_lm", "status": "completed", "path": str(path), "init_name": "bottom",
                     "student_name": "truncated", "task": "t", "teacher_name": "tiny_llama", "student_layers": 2,
                     "objective": "fkl", "seed": seed})
    files: dict = {}
    _decoder_sections(Doc(), files, pd.DataFrame(rows), ReportOptions())
    markdown, latex = files["decoder1.md"], files["decoder1.tex"]
    cell = "3.100±0.141 (2)"  # mean of 3.0 and 3.2, std (ddof 1) = 0.2 / sqrt(2) = 0.1414
    assert cell in markdown and "| fkl" in markdown and "- final epoch's dev values" in markdown
    assert cell.replace("±", "$\\pm$") in latex and r"\toprule" in latex and r"\label{tab:decoder1}" in latex
    assert "\\_" in latex and "_" not in latex.replace("\\_", "").split(r"\caption")[0].split(r"\toprule")[1]
