"""The student type registry and the types every student type module declares (see the package's docstring)."""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from transformers import PretrainedConfig, PreTrainedModel

from distill_sweep.errors import ConfigError
from distill_sweep.families import ENCODER
from distill_sweep.inits import StudentInit
from distill_sweep.model_info import ModelInfo

# Model types whose encoder layers expose attention.self.{query,key,value} (what capture.py hooks).
QKV_MODEL_TYPES = ENCODER.model_types


@dataclass(frozen=True)
class BuildInputs:
    """What a builder may use: the (fine-tuned) teacher when the job has one, the resolved init, labels."""

    arch: PretrainedConfig  # the student's architecture, from `describe`
    teacher: PreTrainedModel | None
    init: StudentInit
    num_labels: int
    label_names: list[str]
    tokenizer: Any = None  # the student's own tokenizer (StudentType.tokenizer), when it has one


@dataclass(frozen=True)
class StudentType:
    name: str
    settings: type
    describe: Callable[[Any, PretrainedConfig], PretrainedConfig]
    build: Callable[[Any, BuildInputs], PreTrainedModel]
    uses_init: bool  # initialised from teacher layers chosen by the top-level `init`
    needs_teacher_weights: bool  # build copies weights from the teacher (so finetune loads it)
    # (settings, raw training split, text fields, cache dir, task name) -> the student's own tokenizer, whose
    # ids the batches carry (data.STUDENT_IDS); None: the student reads the teacher's word pieces
    tokenizer: Callable[[Any, Any, list[str], Any, str], Any] | None = None
    has_layers: bool = True  # transformer layers that intermediate-layer terms can be mapped to
    procedures: tuple[str, ...] | None = None  # the procedures it can run under (None: every one)
    # (settings, results dir) -> the settings with the files another job wrote located (student=distilled);
    # called when the job is prepared, after its config hash is taken
    locate: Callable[[Any, Any], Any] | None = None


STUDENTS: dict[str, StudentType] = {}


def register_student(kind: StudentType) -> StudentType:
    if kind.name in STUDENTS:
        raise ValueError(f"student {kind.name!r} registered twice")
    STUDENTS[kind.name] = kind
    return kind


def student_type(name: str) -> StudentType:
    if name not in STUDENTS:
        raise ConfigError(f"student.name={name!r} is not a student type (known: {', '.join(sorted(STUDENTS))})")
    return STUDENTS[name]


def model_info(arch: PretrainedConfig) -> ModelInfo:
    """The features a BERT-family architecture provides to the objectives (an architecture that sets
    `exposes_hidden_states = False`, e.g. the BiLSTM's, provides neither hidden states nor q/k/v)."""
    return ModelInfo.from_config(arch, qkv=str(getattr(arch, "model_type", "")) in QKV_MODEL_TYPES,
                                 hidden_states=bool(getattr(arch, "exposes_hidden_states", True)))
