"""The blocks of a record that only some jobs have (a procedure's or a part's own), in the order result.json holds them.

`Record` (record.py) holds each as a field of its own, None where the job has none (and then left out of
result.json). A block whose shape is fixed is a dataclass here; one whose contents vary with the procedure's
settings, a corpus's metadata or a tool's output (causal_lm, lm_eval, ...) is the field's plain dict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class TuneTrial:
    """A tuning trial's job: trained without the holdout and scored on it alone."""

    number: int | None = None  # the trial's number in its arm's study
    holdout: Any = None  # the share (or count) of the training split held out
    seed: int | None = None  # the seed that drew the holdout
    holdout_size: int | None = None  # examples held out
    study: int | None = None  # which of its arm's tune.studies (0: the first, the only one at studies=1)
    sampler: str | None = None  # tune.sampler: tpe, random or qmc
    sampler_seed: int | None = None  # the seed that drew its values (qmc: its study's sequence's; else its own)
    order: int | None = None  # its place in its study's draws (qmc: the point's index in the Sobol sequence)
    pruned: dict[str, Any] | None = None  # stopped by tune.pruner: the pruner, rung (evaluation), stage, epoch, step


@dataclass
class Cost:
    """What training the student cost, measured (training/cost.py). Not hashed, and no trained number depends on
    it: a record's numbers are those of the same job without it."""

    cpu_seconds: float | None = None  # CPU-seconds of its training steps (in a pack: its share, see `share`)
    cpu_measured: str | None = None  # what cpu_seconds measures
    gpu_seconds: float | None = None  # on CUDA: wall seconds of its training steps (null on CPU)
    gpu_measured: str | None = None  # what gpu_seconds measures
    flops: float | None = None  # training FLOPs: each stage's counted step times its steps
    flops_per_step: dict[str, float] = field(default_factory=dict)  # stage -> FLOPs of its counted step (rank 0's)
    flops_counted: str | None = None  # what the count covers
    steps: int | None = None  # training steps taken (every stage)
    ranks: int = 1  # processes it trained in (their CPU-seconds and FLOPs summed)
    cpu_seconds_own: float | None = None  # in a pack: the CPU-seconds of its own steps, before the split
    share: dict[str, Any] | None = None  # in a pack: the pack, its CPU-seconds, its members and the split rule


@dataclass
class StudentVocab:
    """A student with a tokenizer of its own (student=bilstm): its word vocabulary."""

    size: int | None = None  # words, [PAD] and [UNK] included
    key: str | None = None  # the vocabulary's cache key


@dataclass
class PTPInfo:
    """procedure=ptp: the confidence thresholds and how many training examples got each PTP label."""

    thresholds: dict[str, Any] = field(default_factory=dict)  # correct, wrong
    labels: dict[str, int] = field(default_factory=dict)  # PTP class -> training examples


TYPED = {"tune_trial": TuneTrial, "student_vocab": StudentVocab, "ptp": PTPInfo, "cost": Cost}
# every block, in the order result.json holds them (the order a job adds them in: its data, then its procedure's)
BLOCKS = ("tune_trial", "pack", "cost", "tuned", "augment", "student_vocab", "ptp", "fsdp", "corpus", "task_agnostic",
          "student_dir", "causal_lm", "lm_eval", "early_exit")


def block_to_json(value: Any) -> Any:
    """A block as result.json holds it."""
    return asdict(value) if type(value) in TYPED.values() else value


def block_from_json(name: str, value: Any) -> Any:
    """A block as read from result.json: a typed block's dataclass (its known keys; one that is not an object
    is kept as it is), another as it is."""
    cls = TYPED.get(name)
    if cls is None or not isinstance(value, dict):
        return value
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in value.items() if k in known})
