"""What every loss term's declaration is made of: `TermInfo`, the settings every term has (`TermSettings`) and the
`TERMS` it is declared into. Torch-free.

Each term is declared, next to its settings dataclass, in an `objectives/*_settings.py` module (hidden_settings.py
for hid_cls and hid_seq, ...); registry.py imports them all, so the registry it hands on holds every term.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING

from distill_sweep.config.declared import add, load
from distill_sweep.config.parse import IDENTITY, LOSS_WEIGHT

if TYPE_CHECKING:
    from torch import nn

    from .spec import TermSpec

FACTORY_OF = "distill_sweep.objectives.spec:factory_of"  # torch: loaded with a term's code, never before


@dataclass
class TermSettings:
    """Settings every term has; a term with more extends this class."""

    weight: float = field(default=1.0, metadata=IDENTITY | LOSS_WEIGHT)  # the term's weight in its stage's loss


@dataclass(frozen=True)
class TermInfo:
    """One term's declaration (`declare(TermInfo(...))` in its objectives/*_settings.py)."""

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
