"""Decoder-LM data settings and metric names, read by the config checks before torch is imported.

data/decoder.py reads the data these settings describe; teachers/decoder.py computes the metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from distill_sweep.config.parse import SEED_RANGE, TEACHER
from distill_sweep.errors import ConfigError

PRIMARY = "token_accuracy"  # next-token top-1 accuracy on the dev targets: higher is better, as the driver picks
CHOICE = "choice_accuracy"  # classification-style data: the right choice ranked first after the prompt
# toy instructions: the toy task's label as a word its tokenizer knows (models/toy_vocabulary.py's words have no label names)
TOY_RESPONSES = {"positive": "good", "mixed": "but", "negative": "bad"}


@dataclass
class InstructionSettings:
    """Prompt/response pairs (procedure.instructions)."""

    name: str = field(default="toy_instructions", metadata=TEACHER)  # the data's name (the record's task is causal_NAME)
    # toy: generated from the toy task; jsonl or parquet: a local file; hub: a hub dataset id
    source: Literal["toy", "jsonl", "parquet", "hub"] = field(default="toy", metadata=TEACHER)
    # jsonl: the .jsonl file, one {prompt, response} object per line; parquet: the .parquet file with those columns
    path: str | None = field(default=None, metadata=TEACHER)
    hub_id: str | None = field(default=None, metadata=TEACHER)  # hub: the dataset id
    hub_config: str | None = field(default=None, metadata=TEACHER)  # hub: the dataset's config
    split: str = field(default="train", metadata=TEACHER)  # hub: the split read
    prompt_field: str = field(default="prompt", metadata=TEACHER)  # the prompt's key / column
    response_field: str = field(default="response", metadata=TEACHER)  # the response's key / column
    # the first examples, held out for the dev metrics
    dev_examples: int = field(default=64, metadata=TEACHER | {"ge": 1})
    max_examples: int | None = field(default=None, metadata=TEACHER | {"ge": 2})  # read at most this many (null: all)
    # classification-style data: the possible responses; the dev slice is also scored by the next-token choice
    # among their first tokens (choice_accuracy). toy: null means its three label words
    choices: list[str] | None = field(default=None, metadata=TEACHER)
    num_examples: int = field(default=600, metadata=TEACHER | {"ge": 2})  # toy only: examples generated
    seed: int = field(default=0, metadata=TEACHER | SEED_RANGE)  # toy only: the generator's seed

    def validate(self, where: str) -> None:
        if self.source in ("jsonl", "parquet") and not self.path:
            raise ConfigError(f"{where}.path is required for source={self.source} (a .{self.source} file of "
                              "prompt/response pairs)")
        if self.source in ("jsonl", "parquet") and not Path(str(self.path)).expanduser().is_file():
            raise ConfigError(f"{where}.path={self.path!r}: no such file")
        if self.source == "hub" and not self.hub_id:
            raise ConfigError(f"{where}.hub_id is required for source=hub")
        limit = self.max_examples or (self.num_examples if self.source == "toy" else None)
        if limit is not None and limit <= self.dev_examples:
            raise ConfigError(f"{where}: {limit} examples leave none to train on after dev_examples="
                              f"{self.dev_examples}")

    def choice_words(self) -> list[str]:
        if self.choices is None and self.source == "toy":
            return list(TOY_RESPONSES.values())
        return list(self.choices or [])
