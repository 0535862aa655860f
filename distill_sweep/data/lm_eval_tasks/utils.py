"""Functions the shipped lm-eval task YAMLs name (`!function utils.<name>`): lm-eval imports this file by its path.

The documents are read from the JSONL file beside it (`toy_instructions.jsonl`, written by
`distill_sweep.data.lm_eval_files.write_toy_file` from the toy instructions: no download), and the
generate-until task is scored by the project's own ROUGE-L F1 (data/generation_metrics.py), the same number as the
`rouge_l` dev metric.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distill_sweep.data.generation_metrics import exact_match, rouge_l

HERE = Path(__file__).resolve().parent


def load_toy(**_: Any) -> Any:
    """The documents, one split `test` (lm-eval's `custom_dataset`: it passes the task's metadata as keywords)."""
    import datasets

    path = HERE / "toy_instructions.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


def rouge_scores(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    """ROUGE-L F1 and exact match of the response (greedy; sampled with procedure.lm_eval.sampling_seeds) against
    the reference (`process_results`)."""
    response = results[0]
    return {"rouge_l": rouge_l(response, doc["response"]), "exact_match": exact_match(response, doc["response"])}
