"""The lm-eval task files this project ships (distill_sweep/data/lm_eval_tasks/) and the content hash of a task's data.

The shipped tasks read `toy_instructions.jsonl`: held-out draws of the toy instructions (data/decoder.py's
`toy_pairs` with their own seed, so they are fresh draws, not the default dev slice), one JSON object a line:
`{"prompt", "response", "choices", "label"}` (label: the response's index among the choices). `toy_task_rows`
makes them; a test keeps the shipped file equal to it. No torch, no lm_eval here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from distill_sweep.data.decoder import TOY_RESPONSES, toy_pairs
from distill_sweep.data.decoder_settings import InstructionSettings

TASKS_DIR = Path(__file__).resolve().parent / "lm_eval_tasks"  # the shipped tasks: always on lm-eval's path
TOY_FILE = TASKS_DIR / "toy_instructions.jsonl"
SHIPPED_TASKS = ("toy_instruct_rouge", "toy_instruct_choice")
TOY_ROWS, TOY_SEED = 48, 20_001  # a seed no preset's toy instructions use


def toy_task_rows(rows: int = TOY_ROWS, seed: int = TOY_SEED) -> list[dict[str, Any]]:
    """The shipped tasks' documents: `rows` toy prompt/response pairs drawn with `seed`, with the three choices."""
    choices = list(TOY_RESPONSES.values())
    pairs = toy_pairs(InstructionSettings(num_examples=rows + 1, dev_examples=rows, seed=seed))[:rows]
    return [{"prompt": p, "response": r, "choices": choices, "label": choices.index(r)} for p, r in pairs]


def write_toy_file(path: Path = TOY_FILE) -> Path:
    """Write the shipped JSONL file (run this module to rewrite it)."""
    path.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in toy_task_rows()), encoding="utf-8")
    return path


def docs_hash(docs: Iterable[Any]) -> str:
    """sha256 of the documents a task evaluated, in doc_id order, as canonical JSON: the key of its per-example
    results (the same documents give the same hash wherever their file lies)."""
    digest = hashlib.sha256()
    for doc in docs:
        digest.update(json.dumps(doc, sort_keys=True, default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()


if __name__ == "__main__":
    print(write_toy_file())
