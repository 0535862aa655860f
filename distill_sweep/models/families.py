"""Model families: where a transformer keeps its layer stack, attention projections, final norm and LM head.

Everything that reaches into a model's modules by name (capture.py's hooks and truncation, the students'
layer copy, the decoder students' pruning) asks the model's family, found by its config's `model_type`,
instead of assuming a BERT encoder. A family is a few attribute paths:

  encoder   BERT / RoBERTa / MiniLM / ELECTRA: base_model.encoder.layer, attention.self.{query,key,value}
  llama     LlamaForCausalLM (and the Qwen2 / Mistral shapes): base_model.layers, final norm `norm`,
            lm_head (tied to embed_tokens when the config says so)
  gpt2      GPT2LMHeadModel: base_model.h, final norm `ln_f`, lm_head tied to wte

A decoder family captures no q/k/v: its attention scores are not q k^T of the projections (rotary positions
rotate q and k first; Llama/Qwen2 share key/value heads between query heads), so attention terms are refused
for it (`qkv_refusal`) while hidden-state terms and the logits work as for the encoders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the config checks read families before torch is imported
    from torch import nn

__all__ = ["FAMILIES", "Family", "family_named", "family_of", "family_of_model", "is_causal_type"]


@dataclass(frozen=True)
class Family:
    """One family's module layout (attribute paths below the model's `base_model`)."""

    name: str
    model_types: tuple[str, ...]  # config.model_type values it covers
    causal: bool  # a decoder LM (next-token logits from an LM head)
    stack: str  # dotted path of the layer ModuleList below base_model
    attention: str | None  # dotted path of a layer's self-attention with Linear q/k/v (None: not captured)
    qkv: tuple[str, str, str] = ("query", "key", "value")  # names of the q/k/v Linear modules in `attention`
    final_norm: str | None = None  # base_model child applied after the last layer (decoders)
    qkv_refusal: str = ""  # why attention terms cannot read this family (one line)

    @property
    def stack_root(self) -> str:
        """The base_model child that holds the layer stack (everything else in the backbone is copied whole)."""
        return self.stack.split(".")[0]

    def layers(self, model: nn.Module) -> nn.ModuleList:
        """The model's layer stack, in order (TypeError for a model without one where its family keeps it)."""
        try:
            return _path(model.base_model, self.stack)
        except AttributeError as exc:
            raise TypeError(f"{type(model).__name__} has no base_model.{self.stack}: not a {self.name} model") from exc

    def set_layers(self, model: nn.Module, layers: nn.ModuleList) -> None:
        """Replace the layer stack (truncation, sharing); the caller restores it when that is temporary."""
        *parent, last = self.stack.split(".")
        owner = _path(model.base_model, ".".join(parent)) if parent else model.base_model
        setattr(owner, last, layers)

    def attention_module(self, model: nn.Module, layer: int) -> nn.Module:
        """The self-attention block of 1-based `layer` (TypeError for a family whose q/k/v are not captured)."""
        if self.attention is None:
            raise TypeError(f"{type(model).__name__}: {self.qkv_refusal}")
        layers = self.layers(model)
        if not 1 <= layer <= len(layers):
            raise ValueError(f"encoder layer {layer} requested, the model has layers 1..{len(layers)}")
        return _path(layers[layer - 1], self.attention)


def _path(root: nn.Module, dotted: str) -> Any:
    obj: Any = root
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


ENCODER = Family("encoder", ("bert", "roberta", "electra", "xlm-roberta", "camembert"), causal=False,
                 stack="encoder.layer", attention="attention.self")
_DECODER_QKV = ("rotary position embeddings rotate q and k before the scores and grouped-query attention shares "
                "key/value heads: attention terms (att_*, val_kl) are not available for decoders")
LLAMA = Family("llama", ("llama", "qwen2", "mistral"), causal=True, stack="layers", attention=None,
               final_norm="norm", qkv_refusal=_DECODER_QKV)
GPT2 = Family("gpt2", ("gpt2",), causal=True, stack="h", attention=None, final_norm="ln_f",
              qkv_refusal="GPT-2's fused c_attn projection is not hooked: attention terms (att_*, val_kl) are not "
                          "available for decoders")

FAMILIES: dict[str, Family] = {f.name: f for f in (ENCODER, LLAMA, GPT2)}
_BY_TYPE = {t: f for f in FAMILIES.values() for t in f.model_types}


def family_named(name: str) -> Family:
    return FAMILIES[name]


def family_of(config: Any) -> Family | None:
    """The family of a transformers config (by `model_type`); None for a model no family describes (BiLSTM)."""
    return _BY_TYPE.get(str(getattr(config, "model_type", "")))


def is_causal_type(model_type: str) -> bool:
    """Whether `model_type` (a config's) is a decoder LM family."""
    family = _BY_TYPE.get(str(model_type))
    return family is not None and family.causal


def family_of_model(model: nn.Module) -> Family:
    """The family of a model; a model of unknown type whose backbone has `encoder.layer` is taken as an encoder
    (what capture.py assumed before families existed)."""
    family = family_of(getattr(model, "config", None))
    if family is not None:
        return family
    base = getattr(model, "base_model", None)
    if base is not None and hasattr(getattr(base, "encoder", None), "layer"):
        return ENCODER
    raise TypeError(f"{type(model).__name__} has no base_model.encoder.layer and no known model family "
                    f"(model_type {getattr(getattr(model, 'config', None), 'model_type', None)!r}): supported "
                    f"are {', '.join(sorted(_BY_TYPE))}")
