"""fkl, rkl and gjsd: divergences of the next-token distributions (causal LMs), x T^2. Their code: causal.py.

Torch-free: the terms' settings (their defaults' one home) and their declarations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distill_sweep.config.parse import IDENTITY, TEMPERATURE

from .term_base import TermInfo, TermSettings, declare


@dataclass
class CausalKDSettings(TermSettings):
    temperature: float = field(default=1.0, metadata=IDENTITY | TEMPERATURE)  # softmax temperature T (the loss is x T^2)


@dataclass
class GJSDSettings(CausalKDSettings):
    # interpolation: 0 = forward KL, 1 = reverse KL, between: the mixture's JSD (0.5: symmetric JSD)
    beta: float = field(default=0.5, metadata=IDENTITY | {"ge": 0.0, "le": 1.0})


declare(
    TermInfo("fkl", "distill_sweep.objectives.causal:ForwardKL",
             "Forward KL(teacher || student) of the next-token distributions (causal LMs), x T^2.",
             settings=CausalKDSettings, next_token=True),
    TermInfo("rkl", "distill_sweep.objectives.causal:ReverseKL",
             "Reverse KL(student || teacher) of the next-token distributions (causal LMs), x T^2.",
             settings=CausalKDSettings, next_token=True),
    TermInfo("gjsd", "distill_sweep.objectives.causal:GeneralizedJSD",
             "Generalised Jensen-Shannon divergence (beta) of the next-token distributions (causal LMs), x T^2.",
             settings=GJSDSettings, next_token=True),
)
