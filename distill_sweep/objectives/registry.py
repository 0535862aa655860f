"""The intermediate-layer loss terms, declared by name: what the config checks need, without torch.

A declaration gives a term's flags (what it reads from the student and the teacher), its settings dataclass
(term_settings.py), a one-line description (the config reference's) and `target`, "module:attribute", the
code: an ``nn.Module`` class built from a ``TermSpec`` or a loss function (spec.py). The code is imported
when a job first builds the term (`TermInfo.factory`), so `objective.alpha=7` is refused before torch is.
Using a term is one YAML in conf/objective/ naming it under ``terms`` (``terms: {hid_seq: {weight: 1.0}}``);
combinations (e.g. Att-MSE + Hid-Seq) are YAML only: the objective sums ``weight * term`` over its terms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING

from distill_sweep.config.declared import add, load

from .term_settings import (
    CausalKDSettings,
    ContrastSettings,
    GJSDSettings,
    HiddenSettings,
    PKDSettings,
    RelationSettings,
    TermSettings,
)

if TYPE_CHECKING:
    from torch import nn

    from .spec import TermSpec

__all__ = ["ANY_VOCAB_TERMS", "NEXT_TOKEN_TERMS", "TERMS", "TermInfo", "available_terms", "declare"]

FACTORY_OF = "distill_sweep.objectives.spec:factory_of"  # torch: loaded with a term's code, never before


@dataclass(frozen=True)
class TermInfo:
    """One term's declaration (an entry of `declare(...)` below)."""

    name: str  # the key of `objective.terms`
    target: str  # "module:attribute": the term's class or loss function
    doc: str  # one line, for the config reference
    _: KW_ONLY
    uses_hidden: bool = False  # needs all hidden states of both models
    uses_qkv: bool = False  # needs the q/k/v projections of the mapped layers
    settings: type = TermSettings
    same_heads: bool = True  # with uses_qkv: compares attention heads one to one (equal head counts)
    cls_only: bool = False  # with uses_hidden: reads only the first token's state of each mapped layer
    # with uses_hidden: also pairs the embedding outputs (0, 0) (TermSpec.hidden_pairs), unless a procedure
    # turns that pair off (task_agnostic's `procedure.embeddings_pair`)
    pairs_embeddings: bool = False
    next_token: bool = False  # reads only the next-token logits (decoder LMs): no hidden states, no q/k/v
    # with next_token: needs no shared vocabulary (the teacher's and the student's tokenizers may differ)
    any_vocab: bool = False

    @property
    def factory(self) -> Callable[[TermSpec], nn.Module]:
        """What builds the term from its TermSpec; imports its code (and torch) on first use. A class may carry
        its own ``check_compatible`` rules (pkd.py), which `config.check_compatible` reads from here."""
        return load(FACTORY_OF)(self.name, load(self.target))


TERMS: dict[str, TermInfo] = {}


def declare(*terms: TermInfo) -> None:
    """Add terms to TERMS; a name declared twice is refused."""
    for term in terms:
        add(TERMS, term.name, term, "loss term")


declare(
    TermInfo("hid_cls", "distill_sweep.objectives.hidden:HidCLS",
             "Hid-CLS: MSE between projected student and teacher [CLS] (first token) states, summed over pairs.",
             uses_hidden=True, settings=HiddenSettings, cls_only=True, pairs_embeddings=True),
    TermInfo("hid_seq", "distill_sweep.objectives.hidden:HidSeq",
             "Hid-Seq: MSE between projected student and teacher states of all valid tokens, summed over pairs.",
             uses_hidden=True, settings=HiddenSettings, pairs_embeddings=True),
    TermInfo("hid_cos", "distill_sweep.objectives.cosine:HidCos",
             "Hid-Cos (DistilBERT): mean over real tokens of 1 - cos(student state, teacher state), summed over "
             "pairs.", uses_hidden=True),
    TermInfo("hid_cls_contrast", "distill_sweep.objectives.contrastive:HidCLSContrast",
             "Hid-CLS-Contrast: CoDIR contrastive [CLS] distillation with a training-set memory bank.",
             uses_hidden=True, settings=ContrastSettings, cls_only=True, pairs_embeddings=True),
    TermInfo("pkd_cls", "distill_sweep.objectives.pkd:PatienceCLS",
             "PKD's patient loss: MSE of L2-normalised [CLS] states of student layers 1..k-1 and their teacher "
             "layers.", uses_hidden=True, settings=PKDSettings, cls_only=True),
    TermInfo("att_mse", "distill_sweep.objectives.attention:att_mse",
             "Att-MSE: MSE of pre-softmax attention scores, averaged over heads and valid (query, key) pairs.",
             uses_qkv=True),
    TermInfo("att_kl", "distill_sweep.objectives.attention:att_kl",
             "Att-KL: KL(teacher || student) of attention distributions, per head and valid query row.",
             uses_qkv=True),
    TermInfo("val_kl", "distill_sweep.objectives.attention:val_kl",
             "Val-KL: KL(teacher || student) of MiniLM value relations softmax(V V^T / sqrt(d_head)).",
             uses_qkv=True),
    TermInfo("rel_kl", "distill_sweep.objectives.relations:RelationKL",
             "MiniLMv2 relations: KL(teacher || student) of Q-Q, K-K, V-V relations over A_r relation heads.",
             uses_qkv=True, same_heads=False, settings=RelationSettings),
    TermInfo("fkl", "distill_sweep.objectives.causal:ForwardKL",
             "Forward KL(teacher || student) of the next-token distributions (causal LMs), x T^2.",
             settings=CausalKDSettings, next_token=True),
    TermInfo("rkl", "distill_sweep.objectives.causal:ReverseKL",
             "Reverse KL(student || teacher) of the next-token distributions (causal LMs), x T^2.",
             settings=CausalKDSettings, next_token=True),
    TermInfo("gjsd", "distill_sweep.objectives.causal:GeneralizedJSD",
             "Generalised Jensen-Shannon divergence (beta) of the next-token distributions (causal LMs), x T^2.",
             settings=GJSDSettings, next_token=True),
    TermInfo("uld", "distill_sweep.objectives.uld:ULD",
             "ULD: Wasserstein-1 of the sorted, zero-padded next-token distributions, across vocabularies (causal "
             "LMs).", next_token=True, any_vocab=True),
    TermInfo("nll", "distill_sweep.objectives.uld:StudentNLL",
             "The student's next-token cross-entropy on its own targets (causal LMs; ULD's CE term).",
             next_token=True, any_vocab=True),
)

# terms that read the next-token logits (causal LMs only): a teacher's stored top-k logits serve them
NEXT_TOKEN_TERMS = tuple(name for name, term in TERMS.items() if term.next_token)
# next-token terms that a teacher and student with different vocabularies can use (uld); the others compare the
# two distributions token by token, and the stored top-k serves none of these
ANY_VOCAB_TERMS = tuple(name for name, term in TERMS.items() if term.any_vocab)


def available_terms() -> list[str]:
    return sorted(TERMS)
