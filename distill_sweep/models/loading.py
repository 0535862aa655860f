"""Teacher loading (configs, tokenizers, weights, MLM heads); `init=` rules are in inits.py, students in students/."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedModel,
)

from distill_sweep.config.schema import TeacherSettings
from distill_sweep.errors import ConfigError
from distill_sweep.models.hub import go_offline_if_hub_unreachable
from distill_sweep.models.toy_vocabulary import build_toy_tokenizer


def teacher_config(teacher: TeacherSettings, num_labels: int, vocab_size: int | None = None) -> PretrainedConfig:
    """The teacher's architecture config (reads only config.json for a pretrained model).

    A given fine-tuned teacher is the model that runs, so its own config.json describes it, also for a
    teacher otherwise built from `config` (teacher=tiny).
    """
    label_kwargs: dict[str, Any] = {"num_labels": num_labels}
    if teacher.name_or_path is None and not teacher.finetuned_path:
        return _config_from_settings(teacher, label_kwargs, vocab_size)
    key = "teacher.finetuned_path" if teacher.finetuned_path else "teacher.name_or_path"
    return read_model_config(teacher.finetuned_path or teacher.name_or_path, key,
                             bool(teacher.trust_remote_code), **label_kwargs)


def read_model_config(name_or_path: str, key: str, trust_remote_code: bool, **kwargs: Any) -> PretrainedConfig:
    """config.json of a hub id or local directory; anything wrong is one ConfigError line naming `key`."""
    source = model_source(name_or_path, key)
    try:
        return AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code, **kwargs)
    except (OSError, ValueError) as err:  # ValueError: a config.json without a known model_type
        raise ConfigError(model_error_message(source, err, key)) from None


def _config_from_settings(teacher: TeacherSettings, label_kwargs: dict[str, Any], vocab_size: int | None
                          ) -> PretrainedConfig:
    """A fresh teacher's architecture from `teacher.config`, checked as the other settings are."""
    from transformers import CONFIG_MAPPING

    arch = copy.deepcopy(dict(teacher.config))
    assert isinstance(arch, dict)
    model_type = str(arch.pop("model_type", "bert"))
    if model_type not in CONFIG_MAPPING:
        raise ConfigError(f"teacher.config.model_type={model_type!r} is not a transformers model type")
    defaults = CONFIG_MAPPING[model_type]()
    unknown = sorted(str(k) for k in arch if not hasattr(defaults, str(k)))
    if unknown:  # transformers would keep a misspelt key as an unused attribute
        raise ConfigError(f"teacher.config.{unknown[0]}: not a setting of a {model_type} config")
    if vocab_size is not None:
        arch["vocab_size"] = vocab_size
    try:
        config = AutoConfig.for_model(model_type, **arch, **label_kwargs)
    except Exception as err:  # noqa: BLE001 - transformers' strict validation raises its own error types
        detail = str(err).strip().splitlines()[-1].strip() if str(err).strip() else type(err).__name__
        raise ConfigError(f"teacher.config: {detail}") from None
    for name in ("num_hidden_layers", "hidden_size", "num_attention_heads"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value < 1:
            raise ConfigError(f"teacher.config.{name}={value}: must be >= 1")
    heads, width = getattr(config, "num_attention_heads", None), getattr(config, "hidden_size", None)
    if isinstance(heads, int) and isinstance(width, int) and width % heads:
        raise ConfigError(f"teacher.config.hidden_size={width} is not a multiple of "
                          f"teacher.config.num_attention_heads={heads}")
    return config


def load_tokenizer(teacher: TeacherSettings, cache_dir: Path) -> Any:
    """The tokenizer the teacher and student share."""
    name = tokenizer_source(teacher)
    if name == "toy":
        return build_toy_tokenizer(cache_dir)
    try:
        return AutoTokenizer.from_pretrained(name, trust_remote_code=bool(teacher.trust_remote_code))
    except OSError as err:
        raise ConfigError(model_error_message(name, err, "teacher.tokenizer")) from None


def check_attention(name: str, key: str) -> None:
    """`name` is an attention implementation this transformers knows (eager, its registry's: sdpa, flash
    attention, flex..., optionally `paged|`), or a hub kernel (`org/repo`); else ConfigError before any work
    (transformers would refuse it only when the model is built, in a traceback)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    known = ["eager", *ALL_ATTENTION_FUNCTIONS.valid_keys()]
    base = name.removeprefix("paged|")
    if base in known or "/" in base:
        return
    raise ConfigError(f"{key}={name!r}: not an attention implementation of transformers (choose from: "
                      f"{', '.join(sorted(set(known)))}, or a hub kernel org/repo)")


def tokenizer_source(teacher: TeacherSettings) -> str:
    """Where the tokenizer comes from ("toy", a hub id or a directory, checked to exist); loads nothing."""
    name = teacher.tokenizer or teacher.finetuned_path or teacher.name_or_path
    if name is None:
        raise ConfigError("teacher.tokenizer must be set when teacher.name_or_path is null")
    if name == "toy":
        return name
    key = "teacher.tokenizer" if teacher.tokenizer else ("teacher.finetuned_path" if teacher.finetuned_path
                                                             else "teacher.name_or_path")
    return model_source(name, key)


def inference_dtype(precision: str) -> torch.dtype:
    """The dtype a frozen teacher is held in: the one the run computes in (bf16 under precision=bf16, whose
    autocast would cast every weight to it at each matmul anyway), so that no float32 copy sits on the device;
    float32 otherwise. Students and a teacher being trained keep float32 weights (the optimiser's)."""
    return torch.bfloat16 if precision == "bf16" else torch.float32


def load_teacher(
    teacher: TeacherSettings, path: str | None, num_labels: int, label_names: list[str], vocab_size: int
) -> PreTrainedModel:
    """A sequence classifier: from `path` (pretrained/fine-tuned dir or hub id) or fresh from config."""
    label_kwargs = _label_kwargs(num_labels, label_names)
    attn = teacher.attn_implementation
    if path is None:
        config = teacher_config(teacher, num_labels, vocab_size)
        for key, value in label_kwargs.items():
            setattr(config, key, value)
        config._attn_implementation = attn
        return AutoModelForSequenceClassification.from_config(config, attn_implementation=attn)
    try:
        saved = AutoConfig.from_pretrained(path, trust_remote_code=bool(teacher.trust_remote_code))
    except (OSError, ValueError) as err:
        raise ConfigError(model_error_message(path, err)) from None
    # Check BEFORE loading: passing our label map to from_pretrained would overwrite the saved one.
    check_label_order(saved, label_names, path)
    try:
        return AutoModelForSequenceClassification.from_pretrained(
            path,
            trust_remote_code=bool(teacher.trust_remote_code),
            attn_implementation=attn,
            **label_kwargs,
        )
    except OSError as err:
        raise ConfigError(model_error_message(path, err)) from None


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

    go_offline_if_hub_unreachable()
    return str(source)


def model_error_message(source: str, err: Exception, key: str | None = None) -> str:
    """One line for a model that cannot be loaded; the hub is blamed only for a hub id."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    named = f"{key}={source!r}" if key else repr(source)
    if Path(str(source)).expanduser().exists():  # a local directory: the hub has nothing to do with it
        return f"{named}: cannot load a model from this directory ({first})"
    return (
        f"cannot load model {named} ({first}). The HF hub may be unreachable: pass a local directory "
        f"(teacher.name_or_path=/path/to/model) or run offline with teacher=tiny task=toy (make demo)"
    )


# ---------------------------------------------------------------------------------------------------
# Masked-LM models (task-agnostic distillation)


def has_mlm_head(config: PretrainedConfig) -> bool | None:
    """Whether a saved model's config.json names an architecture with an MLM head (None: it names none, as
    a config built from settings)."""
    archs = list(getattr(config, "architectures", None) or [])
    if not archs:
        return None
    return any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in archs)


def load_masked_lm(teacher: TeacherSettings, vocab_size: int) -> PreTrainedModel:
    """The teacher with its MLM head: from `name_or_path` (hub id or directory), or built from `config` with
    random weights. A checkpoint whose MLM head is missing is refused (ConfigError), not silently given a
    random one."""
    from transformers import AutoModelForMaskedLM

    attn = teacher.attn_implementation
    path = teacher.name_or_path
    if path is None:
        config = teacher_config(teacher, 2, vocab_size)
        config._attn_implementation = attn
        return AutoModelForMaskedLM.from_config(config, attn_implementation=attn)
    source = model_source(str(path), "teacher.name_or_path")
    try:
        model, info = AutoModelForMaskedLM.from_pretrained(
            source, trust_remote_code=bool(teacher.trust_remote_code), attn_implementation=attn,
            output_loading_info=True)
    except (OSError, ValueError) as err:
        raise ConfigError(model_error_message(source, err, "teacher.name_or_path")) from None
    head = [k for k in info.get("missing_keys", []) if not k.startswith(f"{model.base_model_prefix}.")]
    if head:
        raise ConfigError(f"teacher.name_or_path={str(path)!r} has no MLM head (missing {head[0]}): task-agnostic "
                          "distillation needs the pre-trained model with its MLM head, not a fine-tuned classifier")
    return model


def mlm_head(model: PreTrainedModel) -> torch.nn.Module:
    """The MLM head of a masked-LM model: its one child beside the backbone (BERT `cls`, RoBERTa `lm_head`)."""
    return getattr(model, _mlm_head_name(model))


def _mlm_head_name(model: PreTrainedModel) -> str:
    names = [name for name, _ in model.named_children() if name != model.base_model_prefix]
    if len(names) != 1:
        raise TypeError(f"{type(model).__name__}: expected one MLM head beside the backbone, found {len(names)}")
    return names[0]


@contextmanager
def head_deferred(model: PreTrainedModel) -> Iterator[torch.nn.Module]:
    """While the block runs, a masked-LM model's `.logits` are its last hidden states; the head (yielded) is
    the caller's to apply where predictions are needed. The head is a vocabulary-sized GEMM per token: applied
    at the masked positions only (15% of the tokens) it costs a seventh as much, with the same logits there."""
    name = _mlm_head_name(model)
    head = getattr(model, name)
    setattr(model, name, torch.nn.Identity())
    try:
        yield head
    finally:
        setattr(model, name, head)


def as_masked_lm(model: PreTrainedModel) -> PreTrainedModel:
    """`model` if it is a masked-LM model, else a masked-LM model of its config carrying its backbone's
    weights (a fresh MLM head, its decoder tied to the word embeddings as the config says)."""
    from transformers import AutoModelForMaskedLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    if type(model).__name__ in MODEL_FOR_MASKED_LM_MAPPING_NAMES.values():
        return model
    attn = getattr(model.config, "_attn_implementation", None) or "sdpa"
    mlm = AutoModelForMaskedLM.from_config(model.config, attn_implementation=attn)
    state = {k: v for k, v in model.base_model.state_dict().items() if not k.startswith("pooler.")}
    missing, unexpected = mlm.base_model.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if not k.startswith("pooler.")]:
        raise TypeError(f"cannot carry {type(model).__name__}'s backbone into {type(mlm).__name__}")
    return mlm.to(next(model.parameters()).device)
