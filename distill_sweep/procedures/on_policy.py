"""On-policy batches of procedure=causal_lm (procedure.on_policy, GKD's lambda): the student's own samples as the
responses of a share of the training batches, and a few of its samples per epoch for the record.

Which steps: CausalLMSettings.on_policy_step(seed, epoch, step), a function of those three alone. The loader marks
every batch with its position (`POSITION`: epoch, step and each row's place in the global batch, `mark_positions`);
the loss function (`OnPolicy.batch`) reads it, drops it and, at a chosen step, replaces the batch by the student's
samples for the batch's prompts, drawn now, at the student's current parameters (as GKD), under
procedure.generation. Row r of the global batch at (epoch, step) is drawn with a generator seeded by
(seed, epoch, step, r) (models/generation.py): a resumed job draws what the uninterrupted one drew, and each rank
draws its own slice, the same tokens one process draws for those rows. Nothing is drawn in the loader, so the
batches a resumed epoch skips cost nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from distill_sweep.config.seeds import derived_seed
from distill_sweep.data.decoder import CausalData, Sequences, prompts_of, with_responses
from distill_sweep.models.generation import generate_responses, sampler
from distill_sweep.records.files import write_json_atomic
from distill_sweep.training import distributed
from distill_sweep.training.loop import to_device

from .causal_lm_settings import CausalLMSettings

POSITION = "on_policy_position"  # a batch key: (B, 3) int64, [epoch, step, row of the global batch]
TRAIN_STREAM, RECORD_STREAM = "on_policy_sample", "record_sample"  # the seeds of the two kinds of draws
RECORD_SAMPLES = 3  # dev prompts the student answers at each epoch's end, for the record
SAMPLES_FILE = "student_samples.json"  # beside result.json: the epochs' samples, read back by a resumed job

Loader = Callable[[Any, int], Iterator[dict[str, Tensor]]]


def mark_positions(loader: Loader) -> Loader:
    """`loader` (stage, epoch) -> batches, each marked with its position (`POSITION`); under several ranks each
    rank's slice is the rank-th equal part of the global batch (sequences.rank_slice)."""

    def batches(stage: Any, epoch: int) -> Iterator[dict[str, Tensor]]:
        rank = distributed.world().rank
        for step, batch in enumerate(loader(stage, epoch)):
            n = int(batch["input_ids"].shape[0])
            rows = torch.arange(rank * n, (rank + 1) * n)
            batch[POSITION] = torch.stack([torch.full((n,), epoch), torch.full((n,), step), rows], dim=1)
            yield batch

    return batches


def row_generators(seed: int, position: list[int | str], rows: list[int], device: torch.device
                   ) -> list[torch.Generator]:
    """One generator per row, seeded by (seed, position..., row)."""
    return [torch.Generator(device=device).manual_seed(derived_seed(seed, *position, row)) for row in rows]


@dataclass
class OnPolicy:
    """The student's samples for procedure.on_policy (and the record's samples of jobs that generate)."""

    settings: CausalLMSettings
    seed: int
    data: CausalData  # the student's data: its training prompts (and dev prompts, for the record)
    tokens: tuple[int, int, int]  # (bos, eos, pad)
    steps: int = 0  # on-policy steps taken by this process (its record says how many the job chose)

    @property
    def room(self) -> int:
        """Prompt tokens kept (from their end) so that [BOS] + prompt + max_new_tokens fit max_seq_length."""
        return self.settings.max_seq_length - 1 - self.settings.generation.max_new_tokens

    def sample(self, model: nn.Module, split: Sequences, rows: np.ndarray, generators: list[torch.Generator],
               device: torch.device) -> Sequences:
        """[BOS] prompt response of each row of `split`, the response drawn from `model` with `generators`."""
        prompts = prompts_of(split, rows, self.room)
        g, (_, eos, pad) = self.settings.generation, self.tokens
        responses = generate_responses(model, prompts, max_new_tokens=g.max_new_tokens, eos=eos, pad=pad,
                                       device=device, processors=sampler(g.temperature, g.top_p, generators))
        return with_responses(prompts, responses, pad)

    def batch(self, student: nn.Module, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """The batch to train on: `batch` without its position, or at an on-policy step the student's samples for
        its prompts (the same rows, `idx`), on its device."""
        position = batch.pop(POSITION)
        epoch, step = int(position[0, 0]), int(position[0, 1])
        if not self.settings.on_policy_step(self.seed, epoch, step):
            return batch
        device = batch["input_ids"].device
        rows = batch["idx"].cpu().numpy()
        generators = row_generators(self.seed, [TRAIN_STREAM, epoch, step], position[:, 2].tolist(), device)
        sampled = self.sample(student, self.data.train, rows, generators, device)
        out = to_device(self.data.batch(sampled, np.arange(len(rows))), device)
        out["idx"] = batch["idx"]
        self.steps += 1
        return out


@dataclass
class RecordSamples:
    """At each epoch's end, the student's samples for the first RECORD_SAMPLES dev prompts (seeded by the seed and
    the epoch), decoded, into `kept` (the record's list) and SAMPLES_FILE, which a resumed job reads back."""

    policy: OnPolicy
    tokenizer: Any
    out_dir: Path
    history: list[dict[str, Any]]
    kept: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        file = self.out_dir / SAMPLES_FILE
        if self.history and file.is_file():  # a resumed job: the epochs evaluated before it stopped
            done = {e["epoch"] for e in self.history}
            self.kept[:] = [s for s in json.loads(file.read_text()) if s["epoch"] in done]

    def wrap(self, evaluate: Callable[..., dict[str, float]]) -> Callable[..., dict[str, float]]:
        def evaluate_and_sample(model: nn.Module, *args: Any, **kwargs: Any) -> dict[str, float]:
            metrics = evaluate(model, *args, **kwargs)
            self.keep(model, len(self.history) + 1, next(model.parameters()).device)
            return metrics

        return evaluate_and_sample

    def keep(self, model: nn.Module, epoch: int, device: torch.device) -> None:
        dev = self.policy.data.dev
        rows = np.arange(min(RECORD_SAMPLES, len(dev)))
        generators = row_generators(self.policy.seed, [RECORD_STREAM, epoch], rows.tolist(), device)
        sampled = self.policy.sample(model, dev, rows, generators, device)
        eos = self.policy.tokens[1]
        entries = []
        for i in range(len(rows)):
            first, length = int(sampled.first_target[i]), int(sampled.lengths[i])
            response = sampled.ids[i, first:length].tolist()
            entries.append({"epoch": epoch, "dev_row": int(rows[i]),
                            "prompt": self.tokenizer.decode(sampled.ids[i, 1:first].tolist(), skip_special_tokens=True),
                            "response": self.tokenizer.decode(response, skip_special_tokens=True),
                            "tokens": len(response), "eos": bool(response and response[-1] == eos)})
        self.kept[:] = [s for s in self.kept if s["epoch"] != epoch] + entries
        if distributed.is_main():
            write_json_atomic(self.out_dir / SAMPLES_FILE, self.kept)
