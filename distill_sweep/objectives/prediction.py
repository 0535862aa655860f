"""Prediction-layer transfer (vanilla KD, Hinton et al. 2015), used by every objective's prediction stage.

Classification: (1 - alpha) * CE(z_s, y) + alpha * T^2 * KL(softmax(z_t / T) || softmax(z_s / T)), both
averaged over the batch (KL summed over classes, i.e. "batchmean"), which is what the reference's
sum-then-divide-by-sample-size reduces to.  With ``kd_loss="mse"`` (Tang et al. 2019's logit matching) the
KD term is ||z_t - z_s||^2 instead: squared differences summed over classes, averaged over the batch, with
no temperature; Tang's L = a CE + (1 - a) ||z_t - z_s||^2 is ``alpha = 1 - a``.  Regression (STS-B):
(1 - alpha) * MSE(z_s, y) + alpha * MSE(z_s, z_t) (one output: both forms are the same).  Computed in float32
with autocast off.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .inputs import as_target, fp32_region

__all__ = ["prediction_loss"]


def prediction_loss(
    student_logits: Tensor,
    teacher_logits: Tensor,
    labels: Tensor,
    *,
    alpha: float,
    temperature: float,
    regression: bool,
    kd_loss: str = "kl",
) -> Tensor:
    """Vanilla-KD loss; ``alpha`` weighs the teacher term, ``1 - alpha`` the supervised term; ``kd_loss``: "kl"
    (softened KL) or "mse" (squared logit distance)."""
    with fp32_region(student_logits.device):
        z_s = student_logits.float()
        z_t = as_target(teacher_logits)
        if regression:
            z_s, z_t = z_s.reshape(-1), z_t.reshape(-1)
            y = labels.reshape(-1).to(torch.float32)
            sup = (z_s - y).square().mean()
            kd = (z_s - z_t).square().mean()
            return (1.0 - alpha) * sup + alpha * kd
        sup = F.cross_entropy(z_s, labels.long())
        if kd_loss == "mse":
            return (1.0 - alpha) * sup + alpha * (z_s - z_t).square().sum(-1).mean()
        t = float(temperature)
        logp_s = F.log_softmax(z_s / t, dim=-1)
        logp_t = F.log_softmax(z_t / t, dim=-1)
        # KL(p_t || p_s) = sum p_t (log p_t - log p_s); p_t > 0 always here (finite logits).
        kd = (logp_t.exp() * (logp_t - logp_s)).sum(-1).mean()
        return (1.0 - alpha) * sup + alpha * (t * t) * kd
