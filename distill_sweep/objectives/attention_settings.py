"""att_mse, att_kl and val_kl: the attention terms on the q/k/v projections of the mapped layers. Their code:
attention.py.

Torch-free: the terms' declarations (their settings: the weight every term has).
"""

from __future__ import annotations

from .term_base import TermInfo, declare

declare(
    TermInfo("att_mse", "distill_sweep.objectives.attention:att_mse",
             "Att-MSE: MSE of pre-softmax attention scores, averaged over heads and valid (query, key) pairs.",
             uses_qkv=True),
    TermInfo("att_kl", "distill_sweep.objectives.attention:att_kl",
             "Att-KL: KL(teacher || student) of attention distributions, per head and valid query row.",
             uses_qkv=True),
    TermInfo("val_kl", "distill_sweep.objectives.attention:val_kl",
             "Val-KL: KL(teacher || student) of MiniLM value relations softmax(V V^T / sqrt(d_head)).",
             uses_qkv=True),
)
