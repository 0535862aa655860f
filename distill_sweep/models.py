"""Teacher loading and the student-initialisation rules (`init=`); students are built in students/."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
)

from distill_sweep.errors import ConfigError

# The paper's Table 3 initialisations, in its order.
PAPER_INITS = {1: "skip", 2: "mixed", 3: "bottom"}
NAMED_INITS = ("skip", "mixed", "bottom", "first", "random")


@dataclass(frozen=True)
class StudentInit:
    """A resolved `init`: what the user wrote, the rule it names, and the 1-based teacher layers."""

    spec: str
    name: str  # skip | mixed | bottom | random | custom
    layers: list[int]  # teacher layers copied into student layers 1..k (random: [] copied)
    layer_map: list[tuple[int, int]]  # (student layer, teacher layer) pairs the objectives use



def init_spec(spec: Any) -> str:
    """`init` as text: "1", "mixed", or "[1,5,9]" for a list (also accepts the text of a list)."""
    if isinstance(spec, (list, tuple, ListConfig)):
        return "[" + ",".join(str(x).strip() for x in spec) + "]"
    return str(spec).strip().replace(" ", "")


def init_dirname(spec: Any) -> str:
    return "init-" + init_spec(spec).strip("[]").replace(",", "-")


def skip_layers(teacher_layers: int, student_layers: int) -> list[int]:
    """Every (L/k)-th teacher layer, ending at L (rounded half up when k does not divide L)."""
    step = teacher_layers / student_layers
    return [math.floor((i + 1) * step + 0.5) for i in range(student_layers)]


def resolve_init(spec: Any, teacher_layers: int, student_layers: int) -> StudentInit:
    """Turn `init=` (1|2|3, a rule name, or an explicit 1-based list) into teacher layers."""
    if student_layers < 1:
        raise ConfigError(f"student.num_layers must be >= 1, got {student_layers}")
    if student_layers > teacher_layers:
        raise ConfigError(
            f"student.num_layers={student_layers} is deeper than the teacher ({teacher_layers} layers)"
        )
    if isinstance(spec, (list, tuple, ListConfig)):
        layers = [_as_layer(x, teacher_layers) for x in spec]
        if len(layers) != student_layers:
            raise ConfigError(
                f"init={list(spec)} names {len(layers)} teacher layers but the student has "
                f"{student_layers} (student.num_layers)"
            )
        return StudentInit(init_spec(layers), "custom", layers, list(zip(range(1, student_layers + 1), layers)))

    text = init_spec(spec)
    name = PAPER_INITS.get(int(text), None) if text.isdigit() else text
    if name is None or name not in NAMED_INITS:
        raise ConfigError(
            f"init={text!r} is not valid: use 1, 2, 3 (the paper's skip/mixed/bottom), one of "
            f"{', '.join(NAMED_INITS)}, or a list of {student_layers} teacher layers like [1,5,9]"
        )
    skip = skip_layers(teacher_layers, student_layers)
    if name == "skip":
        layers = skip
    elif name == "mixed":
        layers = [1] + skip[1:]
    elif name in ("bottom", "first"):
        name, layers = "bottom", list(range(1, student_layers + 1))
    else:  # random: nothing copied but the embeddings; learns from the skip layers (the paper's rule)
        return StudentInit(text, "random", [], list(zip(range(1, student_layers + 1), skip)))
    return StudentInit(text, name, layers, list(zip(range(1, student_layers + 1), layers)))


def _as_layer(x: Any, teacher_layers: int) -> int:
    try:
        layer = int(x)
    except (TypeError, ValueError):
        raise ConfigError(f"init list entries must be 1-based layer numbers, got {x!r}") from None
    if not 1 <= layer <= teacher_layers:
        raise ConfigError(f"init layer {layer} is out of range: the teacher has layers 1..{teacher_layers}")
    return layer


# ---------------------------------------------------------------------------------------------------
# Teacher


def teacher_config(teacher_cfg: DictConfig, num_labels: int, vocab_size: int | None = None) -> PretrainedConfig:
    """The teacher's architecture config (reads only config.json for a pretrained model)."""
    label_kwargs: dict[str, Any] = {"num_labels": num_labels}
    if teacher_cfg.name_or_path is None:
        arch = OmegaConf.to_container(teacher_cfg.config, resolve=True)
        assert isinstance(arch, dict)
        model_type = arch.pop("model_type", "bert")
        if vocab_size is not None:
            arch["vocab_size"] = vocab_size
        return AutoConfig.for_model(model_type, **arch, **label_kwargs)
    key = "teacher.finetuned_path" if teacher_cfg.finetuned_path else "teacher.name_or_path"
    source = model_source(teacher_cfg.finetuned_path or teacher_cfg.name_or_path, key)
    try:
        return AutoConfig.from_pretrained(
            source, trust_remote_code=bool(teacher_cfg.trust_remote_code), **label_kwargs
        )
    except OSError as err:
        raise ConfigError(_unreachable_model_message(source, err)) from None


def load_tokenizer(teacher_cfg: DictConfig, cache_dir: Path) -> Any:
    """The tokenizer the teacher and student share."""
    name = teacher_cfg.tokenizer or teacher_cfg.finetuned_path or teacher_cfg.name_or_path
    if name == "toy":
        from distill_sweep.toy import build_toy_tokenizer

        return build_toy_tokenizer(cache_dir)
    if name is None:
        raise ConfigError("teacher.tokenizer must be set when teacher.name_or_path is null")
    name = model_source(name, "teacher.tokenizer")
    try:
        return AutoTokenizer.from_pretrained(name, trust_remote_code=bool(teacher_cfg.trust_remote_code))
    except OSError as err:
        raise ConfigError(_unreachable_model_message(name, err)) from None


def load_teacher(
    teacher_cfg: DictConfig, path: str | None, num_labels: int, label_names: list[str], vocab_size: int
) -> PreTrainedModel:
    """A sequence classifier: from `path` (pretrained/fine-tuned dir or hub id) or fresh from config."""
    label_kwargs = _label_kwargs(num_labels, label_names)
    attn = teacher_cfg.get("attn_implementation", "sdpa")
    if path is None:
        config = teacher_config(teacher_cfg, num_labels, vocab_size)
        for key, value in label_kwargs.items():
            setattr(config, key, value)
        config._attn_implementation = attn
        return AutoModelForSequenceClassification.from_config(config, attn_implementation=attn)
    try:
        saved = AutoConfig.from_pretrained(path, trust_remote_code=bool(teacher_cfg.trust_remote_code))
    except OSError as err:
        raise ConfigError(_unreachable_model_message(path, err)) from None
    # Check BEFORE loading: passing our label map to from_pretrained would overwrite the saved one.
    check_label_order(saved, label_names, path)
    try:
        return AutoModelForSequenceClassification.from_pretrained(
            path,
            trust_remote_code=bool(teacher_cfg.trust_remote_code),
            attn_implementation=attn,
            **label_kwargs,
        )
    except OSError as err:
        raise ConfigError(_unreachable_model_message(path, err)) from None


def check_label_order(config: PretrainedConfig, label_names: list[str], path: str) -> None:
    """A classifier trained with another label order would silently invert the task: refuse it.

    Pretrained backbones carry generic labels (LABEL_0, ...) and pass; a fine-tuned head must carry
    exactly the data's labels, in the data's order.
    """
    id2label = {int(k): str(v) for k, v in (config.id2label or {}).items()}
    generic = all(v == f"LABEL_{k}" for k, v in id2label.items())
    if label_names and not generic and [id2label.get(i) for i in range(len(id2label))] != list(label_names):
        raise ConfigError(
            f"label order mismatch: the data's labels are {list(label_names)} but the model at {path} was "
            f"trained with {[id2label[i] for i in sorted(id2label)]}"
        )


def _label_kwargs(num_labels: int, label_names: list[str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"num_labels": num_labels}
    if label_names:
        kwargs["id2label"] = dict(enumerate(label_names))
        kwargs["label2id"] = {name: i for i, name in enumerate(label_names)}
    return kwargs


def model_source(source: str, key: str) -> str:
    """`source` (a local directory or a hub id) checked before transformers sees it: a missing local path
    is said to be missing, and an unreachable hub is found out once (one line instead of ~30 s of retries)."""
    path = Path(str(source)).expanduser()
    if path.exists():
        return str(path)
    if str(source).startswith(("/", ".", "~")) or str(source).count("/") > 1:
        raise ConfigError(f"{key}={source!r}: no such directory")
    from distill_sweep.data import go_offline_if_hub_unreachable

    go_offline_if_hub_unreachable()
    return str(source)


def _unreachable_model_message(source: str, err: Exception) -> str:
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return (
        f"cannot load model {source!r} ({first}). The HF hub may be unreachable: pass a local directory "
        f"(teacher.name_or_path=/path/to/model) or run offline with teacher=tiny task=toy (make demo)"
    )


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
