"""The student type registry and the types every student type declares (see the package's docstring).

Torch-free: a `StudentType` names the module of its code, which is imported the first time a hook is used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from distill_sweep.config import declared, space
from distill_sweep.errors import ConfigError
from distill_sweep.models.families import ENCODER
from distill_sweep.models.inits import StudentInit
from distill_sweep.models.model_info import ModelInfo

if TYPE_CHECKING:  # annotations only: the config checks run before transformers is imported
    from transformers import PretrainedConfig, PreTrainedModel

# Model types whose encoder layers expose attention.self.{query,key,value} (what capture.py hooks).
QKV_MODEL_TYPES = ENCODER.model_types
# A settings field's metadata: filled in when the job is prepared (student.distilled_from), not a setting the
# config gives, so `student=<type>` does not compose it.
FILLED_IN = {"filled_in": True}


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
    """A student type as the config checks see it: its settings and what it needs, declared without its code.

    Its code is the module `code` names, imported the first time a job uses one of its hooks: `describe(settings,
    teacher config)` (the student's architecture config, no weights loaded), `build(settings, BuildInputs)` (the
    model, with a fresh classification head) and, where the declaration says it has them, `tokenizer` and
    `locate`.
    """

    name: str
    settings: type
    code: str  # the module holding describe and build (and tokenizer, locate), e.g. "distill_sweep.students.fresh"
    uses_init: bool  # initialised from teacher layers chosen by the top-level `init`
    needs_teacher_weights: bool  # build copies weights from the teacher (so finetune loads it)
    has_layers: bool = True  # transformer layers that intermediate-layer terms can be mapped to
    procedures: tuple[str, ...] | None = None  # the procedures it can run under (None: every one)
    # its module's `tokenizer`: (settings, raw training split, text fields, cache dir, task name) -> the student's
    # own tokenizer, whose ids the batches carry (data.STUDENT_IDS); without: it reads the teacher's word pieces
    has_tokenizer: bool = False
    # its module's `locate`: (settings, results dir) -> the settings with the files another job wrote located
    # (student=distilled); called when the job is prepared, after its config hash is taken
    has_locate: bool = False

    @property
    def describe(self) -> Callable[[Any, PretrainedConfig], PretrainedConfig]:
        return declared.load(f"{self.code}:describe")

    @property
    def build(self) -> Callable[[Any, BuildInputs], PreTrainedModel]:
        return declared.load(f"{self.code}:build")

    @property
    def tokenizer(self) -> Callable[[Any, Any, list[str], Any, str], Any] | None:
        """The student's tokenizer builder, or None (it reads the teacher's word pieces); None imports nothing."""
        return declared.load(f"{self.code}:tokenizer") if self.has_tokenizer else None

    @property
    def locate(self) -> Callable[[Any, Any], Any] | None:
        """The hook that locates another job's files, or None (nothing to locate); None imports nothing."""
        return declared.load(f"{self.code}:locate") if self.has_locate else None


STUDENTS: dict[str, StudentType] = {}


def register_student(kind: StudentType) -> StudentType:
    """Add a declared student type to `STUDENTS` (students/declarations.py lists the package's own) and make
    `student=<name>` an option of the config group: its settings at their dataclass defaults, their one home."""
    declared.add(STUDENTS, kind.name, kind, "student")
    space.register_option("student", kind.name, space.config_defaults(kind.settings))
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


def checkpointed(model: PreTrainedModel, on: bool) -> PreTrainedModel:
    """`model` with gradient checkpointing on (`student.gradient_checkpointing`): each layer's activations are
    recomputed in the backward (transformers' activation checkpointing), non-reentrant (it needs no input that requires grad, and it restores the RNG so
    dropout draws the same masks), so the gradients are the ones without it. transformers applies it in train mode
    only."""
    if on:
        enable = getattr(model, "activation_checkpointing_enable", None)  # its name from transformers 5.x on
        if enable is not None:
            enable({"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def is_checkpointed(model: PreTrainedModel) -> bool:
    """Whether `model` has gradient checkpointing on."""
    flag = getattr(model, "is_activation_checkpointing", None)  # its name from transformers 5.x on
    return bool(model.is_gradient_checkpointing if flag is None else flag)
